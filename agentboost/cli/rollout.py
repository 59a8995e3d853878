"""``rollout``: a Strands agent on tasks against the policy, episodes written as they end."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from .common import UsageError, add_command, add_engine_option, add_options


def add_rollout(sub) -> None:
    p = add_command(sub, "rollout", cmd_rollout, help="run an agent on tasks and write token-exact episodes",
                    description="Run a Strands agent spec on tasks (or one --prompt) against the policy "
                                "and write one episode per line to --out.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--prompt", help="a single task given as text")
    src.add_argument("--tasks", help="task file (.jsonl or .parquet) with a question per row")
    add_options(p, ("--question-field", "question", "task field holding the question (default: question)"),
                ("--samples", 1, "episodes per task, one GRPO group (default: 1)"),
                ("--out", "episodes.jsonl", "output JSONL file, overwritten (default: episodes.jsonl)"),
                ("--model", "smollm2-135m-instruct",
                 "embedded model name or Hugging Face model directory (default: smollm2-135m-instruct)"),
                ("--sampler-url", str, "use a vLLM-compatible server at this URL instead of a local model"))
    p.add_argument("--demonstrations", action="store_true",
                   help="no model: answer each task from its 'solution' field (tool calls, then the answer) "
                        "through the real agent and tools; demonstrations for `agentboost sft`")
    add_engine_option(p)
    add_options(p, ("--max-batch", 32, "hf engine: requests decoded together; more wait in a queue (default: 32)"),
                ("--tokenizer", str, "tokenizer directory (default: the model's); needed with --sampler-url"))
    p.add_argument("--allow-weak-sandbox", action="store_true",
                   help="run model-written code (code reward or tool) even where the sandbox cannot isolate it")
    p.add_argument("--tool", dest="tools", action="append",
                   help="tool import path (module:function or module); repeatable (default: the calculator)")
    p.add_argument("--prompt-policy", metavar="PATH",
                   help="run the agent with a prompt policy (its system prompt, instructions and demonstration "
                        "turns): a prompt_policy.json, a checkpoint or a prompt-training run directory")
    http = p.add_mutually_exclusive_group()
    http.add_argument("--agent-command", metavar="CMD",
                      help="run your own agent instead, in its own process, through the gateway: CMD gets "
                           "OPENAI_BASE_URL, OPENAI_API_KEY and the task, and prints its answer (docs/gateway.md)")
    http.add_argument("--agent-entry-point", metavar="MODULE:FUNCTION",
                      help="as --agent-command, with FUNCTION(prompt, task) -> answer run in a process of its own")
    add_options(p, ("--system-prompt", str, "the agent's system prompt"),
                ("--agent-factory", str, "module:function building the Strands Agent around the model"),
                ("--max-model-calls", 6, "model calls per episode (default: 6)"),
                ("--max-response-tokens", 1024, "sampled tokens per episode, all calls together (default: 1024)"),
                ("--timeout", 300.0, "seconds per episode (default: 300)"),
                ("--temperature", 0.7, "sampling temperature (default: 0.7)"),
                ("--top-p", 1.0, "nucleus sampling (default: 1.0)"),
                ("--max-new-tokens", 256, "tokens per model call (default: 256)"),
                ("--seed", int, "sampling seed"),
                ("--workers", 1, "worker processes (default: 1)"),
                ("--slots", 8, "episodes in flight per worker (default: 8)"),
                ("--reward", str, "reward: a registered name, 'default' (the agent type's), or module:function"),
                ("--answer", str, "ground truth for --prompt, for the reward"),
                ("--chat-template-kwargs", "{}",
                 'JSON passed to the chat template, e.g. \'{"enable_thinking": false}\''),
                ("--reasoning", "auto", "the policy's reasoning markers: auto (from the chat template), none, or a "
                                        "format or family name (think, qwen3, deepseek_r1, ...); tool calls, the "
                                        "final answer and the reward read the content after the reasoning"),
                ("--tool-parser", "auto", "the policy's tool-call format: auto (from the chat template; hermes where "
                                          "it shows no other family) or hermes, qwen3_xml, llama3_json, mistral, "
                                          "glm45, kimi_k2; --demonstrations write their calls in it"))


def cmd_rollout(args) -> int:
    from ..agents.strands_agent import StrandsAgentSpec
    from ..environments.strands_env import StrandsEnv
    from ..episodes.record import EpisodeWriter
    from ..episodes.summary import print_summary
    from ..models.loading import resolve_model_path
    from ..rewards.groups import GroupPolicy, apply_group_policy
    from ..rewards.registry import default_reward, registered_rewards
    from ..rollout.pool import StrandsProcessPool
    from ..sampling.protocol import SamplingParams
    from ..sampling.spec import SamplerSpec
    from ..tasks import load_tasks

    if args.samples < 1 or args.workers < 1 or args.slots < 1 or args.max_batch < 1:
        raise UsageError("--samples, --workers, --slots and --max-batch must be >= 1")
    if args.sampler_url and args.engine != "hf":
        raise UsageError("--engine chooses the server agentboost starts; --sampler-url uses one already running")
    if args.demonstrations and (args.sampler_url or args.engine != "hf" or not args.tasks):
        raise UsageError("--demonstrations needs --tasks (rows with a 'solution') and no --sampler-url or --engine")
    try:
        template_kwargs = json.loads(args.chat_template_kwargs)
    except json.JSONDecodeError as e:
        raise UsageError(f"--chat-template-kwargs is not valid JSON: {e.msg}") from None
    if args.tasks:
        tasks = load_tasks(args.tasks, question_field=args.question_field)
        if args.demonstrations:
            from ..agents.demonstrations import check_solution

            for t in tasks:  # every row is checked before any episode runs
                check_solution(t)
    else:
        tasks = [{"task_id": "prompt-0", "question": args.prompt or "What is 17 + 25?"}]
        if args.answer is not None:
            tasks[0]["answer"] = args.answer
    spec_kwargs = {}
    if args.tools:
        spec_kwargs["tools"] = args.tools
    if args.system_prompt is not None:
        spec_kwargs["system_prompt"] = args.system_prompt
    if args.agent_command or args.agent_entry_point:
        if spec_kwargs or args.agent_factory or args.prompt_policy or args.demonstrations:
            raise UsageError("--agent-command and --agent-entry-point run your own agent: --tool, --system-prompt, "
                             "--agent-factory, --prompt-policy and --demonstrations describe one agentboost builds")
        from ..agents.http_agent import HttpAgentSpec

        spec = HttpAgentSpec(command=args.agent_command or "", entry_point=args.agent_entry_point or "",
                             max_model_calls=args.max_model_calls, max_response_tokens=args.max_response_tokens,
                             timeout_s=args.timeout, reasoning=args.reasoning, tool_parser=args.tool_parser).validate()
    else:
        spec = StrandsAgentSpec(max_model_calls=args.max_model_calls, max_response_tokens=args.max_response_tokens,
                                timeout_s=args.timeout, factory=args.agent_factory, reasoning=args.reasoning,
                                tool_parser=args.tool_parser,
                                **spec_kwargs).validate()
    if args.prompt_policy:
        if args.system_prompt is not None:
            raise UsageError("--prompt-policy brings its own system prompt; give one of --prompt-policy and --system-prompt")
        from ..run.prompt_policy import load_prompt_policy

        policy = load_prompt_policy(args.prompt_policy)
        spec = policy.apply(spec).validate()
        print(f"agent prompt: {policy.summary()} ({args.prompt_policy})")
    reward = args.reward
    if reward == "default":
        reward = default_reward(spec.agent_type)
        if reward is None:
            raise UsageError(f"no default reward for agent type {spec.agent_type!r}; "
                             f"registered: {', '.join(registered_rewards())}")
    env = StrandsEnv(reward=reward).validate()
    from ..run.assembly import check_sandbox

    warning = check_sandbox(reward, list(spec.tools), args.allow_weak_sandbox or None)
    if warning:
        print(f"warning: {warning}")
    sampling = SamplingParams(temperature=args.temperature, top_p=args.top_p,
                              max_new_tokens=args.max_new_tokens, seed=args.seed)

    tokenizer = args.tokenizer or str(resolve_model_path(args.model))
    policy = policy_file = None
    if args.demonstrations:
        from ..agents.demonstrations import demonstration_sampler

        sampler = demonstration_sampler(tokenizer, str(Path(args.tasks).resolve()), sampling,
                                        question_field=args.question_field, tool_parser=spec.tool_parser,
                                        template_kwargs=template_kwargs)
    elif args.sampler_url:
        url = args.sampler_url
    else:
        # the policy is served from here; workers reach it over loopback through the vLLM contract.
        # hf: at most --max-batch decode together, the rest queue (one huge batch is what used to
        # make 128 episodes in flight time out)
        from ..sampling.policy_server import start_policy_server

        in_flight = args.workers * args.slots
        engine, policy = start_policy_server(args.engine, args.model, seed=args.seed or 0, slots=in_flight,
                                             max_batch_size=min(args.max_batch, in_flight))
        policy_file = str(policy.policy_file) if engine == "vllm" else None
        url = policy.url
    if not args.demonstrations:
        sampler = SamplerSpec(tokenizer=tokenizer, sampling=sampling, url=url, template_kwargs=template_kwargs,
                              policy_file=policy_file)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("")
    t0 = time.perf_counter()
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    try:
        with EpisodeWriter(out) as writer, Progress(
            TextColumn("episodes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            disable=not sys.stderr.isatty(),
        ) as progress, StrandsProcessPool(spec, sampler, env, workers=args.workers, slots=args.slots) as pool:
            bar = progress.add_task("episodes", total=len(tasks) * args.samples)

            def on_episode(ep) -> None:
                apply_group_policy([ep], GroupPolicy.KEEP, failed_reward=env.failed_reward)  # failed: its reward
                writer.write(ep)
                progress.advance(bar)

            episodes = pool.run(tasks, samples=args.samples, on_episode=on_episode)
            stats = pool.stats()
            broken = pool.broken
    finally:
        if policy is not None:
            policy.close()
    _, groups = apply_group_policy(episodes, GroupPolicy.KEEP, group_size=args.samples,
                                   failed_reward=env.failed_reward)
    print_summary(episodes, wall_s=time.perf_counter() - t0, out=str(out), groups=groups, pool_stats=stats)
    if broken:
        print(f"agentboost rollout: error: {broken}", file=sys.stderr)
        return 1
    return 0
