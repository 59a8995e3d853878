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
    # the agent's flags default to the configuration's agent section (agents/options.py): one set of defaults
    from ..agents.config import AgentConfig
    from ..schema import default_of

    def agent_default(name: str) -> str:
        return f"(default: {default_of(AgentConfig, name)})"

    add_options(p, ("--config", str, "a training configuration: its agent section (and reward and environment) is "
                                     "the agent the flags below adjust"),
                ("--system-prompt", str, "the agent's system prompt"),
                ("--agent-factory", str, "module:function building the Strands Agent around the model"),
                ("--max-model-calls", int, f"model calls per episode {agent_default('max_model_calls')}"),
                ("--max-response-tokens", int,
                 f"sampled tokens per episode, all calls together {agent_default('max_response_tokens')}"),
                ("--timeout", float, f"seconds per episode {agent_default('timeout_s')}"),
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
                ("--reasoning", str, "the policy's reasoning markers: auto (from the chat template), none, or a "
                                     "format or family name (think, qwen3, deepseek_r1, ...); tool calls, the final "
                                     "answer and the reward read the content after the reasoning "
                                     + agent_default("reasoning")),
                ("--tool-parser", str, "the policy's tool-call format: auto (from the chat template; hermes where it "
                                       "shows no other family) or hermes, qwen3_xml, llama3_json, mistral, glm45, "
                                       "kimi_k2; --demonstrations write their calls in it " + agent_default("tool_parser")))


def rollout_agent(args):
    """The agent the flags describe: the configuration's agent section (``--config``, else the
    defaults every path shares), the given flags applied to it as its keys. With ``--config``, also
    the configuration (for its reward and environment)."""
    from ..agents.config import AgentConfig
    from ..schema import apply

    cfg = None
    if args.config:
        from ..run.config import load_config

        cfg = load_config(args.config, for_training=False)
    section = cfg.agent if cfg is not None else AgentConfig()
    given = {"tools": args.tools, "system_prompt": args.system_prompt, "factory": args.agent_factory,
             "max_model_calls": args.max_model_calls, "max_response_tokens": args.max_response_tokens,
             "timeout_s": args.timeout, "reasoning": args.reasoning, "tool_parser": args.tool_parser}
    given = {k: v for k, v in given.items() if v is not None}
    if args.agent_command or args.agent_entry_point:
        if {"tools", "system_prompt", "factory"} & set(given) or args.prompt_policy or args.demonstrations:
            raise UsageError("--agent-command and --agent-entry-point run your own agent: --tool, --system-prompt, "
                             "--agent-factory, --prompt-policy and --demonstrations describe one agentboost builds")
        given.update(kind="http", command=args.agent_command or "", entry_point=args.agent_entry_point or "",
                     tools=[], system_prompt=None)
    apply(section, given, "rollout", "agent.")  # types here; bounds and choices when the spec validates
    if args.prompt_policy:
        if args.system_prompt is not None:
            raise UsageError("--prompt-policy brings its own system prompt; give one of --prompt-policy and "
                             "--system-prompt")
        section.prompt_policy = args.prompt_policy
    if cfg is None:
        from ..run.config import TrainConfig

        holder = TrainConfig(agent=section)
    else:
        holder = cfg
    from ..run.assembly import agent_spec

    spec = agent_spec(holder).validate()  # the one way a configuration's agent becomes a spec
    if section.prompt_policy:
        from ..run.prompt_policy import load_prompt_policy

        print(f"agent prompt: {load_prompt_policy(section.prompt_policy).summary()} ({section.prompt_policy})")
    return spec, cfg


def cmd_rollout(args) -> int:
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
    spec, cfg = rollout_agent(args)
    reward = args.reward
    if reward == "default":
        reward = default_reward(spec.agent_type)
        if reward is None:
            raise UsageError(f"no default reward for agent type {spec.agent_type!r}; "
                             f"registered: {', '.join(registered_rewards())}")
    if cfg is not None:  # the configuration's reward and environment, --reward instead of its reward
        from ..run.assembly import environment

        env = environment(cfg)
        if reward is not None:
            env.reward = reward
        env.validate()
        reward = env.reward
    else:
        env = StrandsEnv(reward=reward).validate()
    from ..run.assembly import check_sandbox

    warning = check_sandbox(reward, list(spec.tools), args.allow_weak_sandbox or None)
    if warning:
        print(f"warning: {warning}")
    sampling = SamplingParams(temperature=args.temperature, top_p=args.top_p,
                              max_new_tokens=args.max_new_tokens, seed=args.seed)

    tokenizer = args.tokenizer or str(resolve_model_path(args.model))
    policy = None
    if args.demonstrations:
        from ..agents.demonstrations import demonstration_sampler

        sampler = demonstration_sampler(tokenizer, str(Path(args.tasks).resolve()), sampling,
                                        question_field=args.question_field, tool_parser=spec.tool_parser,
                                        template_kwargs=template_kwargs)
    elif args.sampler_url:
        sampler = SamplerSpec(tokenizer=tokenizer, sampling=sampling, url=args.sampler_url,
                              template_kwargs=template_kwargs)
    else:
        # the policy is served from here, as the run's assembly serves one (the configuration's engine
        # options; --engine in place of rollout.engine); workers reach it over loopback through the
        # vLLM contract. hf: at most --max-batch decode together, the rest queue (one huge batch is
        # what used to make 128 episodes in flight time out)
        from ..run.assembly import sampler_spec, start_policy
        from ..run.config import TrainConfig

        in_flight = args.workers * args.slots
        engine, policy = start_policy(cfg or TrainConfig(), args.model, seed=args.seed or 0, slots=in_flight,
                                      max_batch=min(args.max_batch, in_flight), engine=args.engine)
        sampler = sampler_spec(policy, engine, tokenizer, sampling, template_kwargs)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("")
    t0 = time.perf_counter()
    from ..progress import progress_bar

    try:
        with EpisodeWriter(out) as writer, progress_bar("episodes", len(tasks) * args.samples, transient=False) \
                as advance, StrandsProcessPool(spec, sampler, env, workers=args.workers, slots=args.slots) as pool:

            def on_episode(ep) -> None:
                apply_group_policy([ep], GroupPolicy.KEEP, failed_reward=env.failed_reward)  # failed: its reward
                writer.write(ep)
                advance()

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
