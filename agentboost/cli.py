"""The ``agentboost`` command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from . import __version__


class UsageError(Exception):
    pass


def _add_rollout(sub) -> None:
    p = sub.add_parser("rollout", help="run a Strands agent on tasks and write token-exact episodes",
                       description="Run a Strands agent spec on tasks (or one --prompt) against the policy "
                                   "and write one episode per line to --out.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--prompt", help="a single task given as text")
    src.add_argument("--tasks", help="task file (.jsonl or .parquet) with a question per row")
    p.add_argument("--question-field", default="question", help="task field holding the question (default: question)")
    p.add_argument("--samples", type=int, default=1, help="episodes per task, one GRPO group (default: 1)")
    p.add_argument("--out", default="episodes.jsonl", help="output JSONL file, overwritten (default: episodes.jsonl)")
    p.add_argument("--model", default="smollm2-135m-instruct",
                   help="embedded model name or Hugging Face model directory (default: smollm2-135m-instruct)")
    p.add_argument("--sampler-url", help="use a vLLM-compatible server at this URL instead of a local model")
    p.add_argument("--tokenizer", help="tokenizer directory (default: the model's); needed with --sampler-url")
    p.add_argument("--tool", dest="tools", action="append",
                   help="tool import path (module:function or module); repeatable (default: the calculator)")
    p.add_argument("--system-prompt", help="the agent's system prompt")
    p.add_argument("--agent-factory", help="module:function building the Strands Agent around the model")
    p.add_argument("--max-model-calls", type=int, default=6, help="model calls per episode (default: 6)")
    p.add_argument("--max-response-tokens", type=int, default=1024,
                   help="sampled tokens per episode, all calls together (default: 1024)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per episode (default: 300)")
    p.add_argument("--temperature", type=float, default=0.7, help="sampling temperature (default: 0.7)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling (default: 1.0)")
    p.add_argument("--max-new-tokens", type=int, default=256, help="tokens per model call (default: 256)")
    p.add_argument("--seed", type=int, help="sampling seed")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default: 1)")
    p.add_argument("--slots", type=int, default=8, help="episodes in flight per worker (default: 8)")
    p.add_argument("--reward", help="reward: a registered name, 'default' (the agent type's), or module:function")
    p.add_argument("--answer", help="ground truth for --prompt, for the reward")
    p.add_argument("--chat-template-kwargs", default="{}",
                   help='JSON passed to the chat template, e.g. \'{"enable_thinking": false}\'')
    p.set_defaults(func=cmd_rollout)


def _add_models(sub) -> None:
    p = sub.add_parser("models", help="manage the embedded models", description="Manage the embedded models.")
    msub = p.add_subparsers(dest="models_cmd", metavar="COMMAND", required=True)
    prep = msub.add_parser("prepare", help="dequantise an embedded model into the cache (atomic, verified)",
                           description="Dequantise an embedded model's GGUF into the cache directory "
                                       "(AGENTBOOST_CACHE_DIR, default ~/.cache/agentboost).")
    prep.add_argument("name", nargs="?", default="smollm2-135m-instruct")
    prep.add_argument("--cache-dir", help="cache directory (overrides AGENTBOOST_CACHE_DIR)")
    prep.add_argument("--force", action="store_true", help="prepare again even if a valid cache exists")
    prep.set_defaults(func=cmd_models_prepare)
    ls = msub.add_parser("list", help="list embedded models and whether they are prepared",
                         description="List embedded models and their cache state.")
    ls.add_argument("--cache-dir", help="cache directory (overrides AGENTBOOST_CACHE_DIR)")
    ls.set_defaults(func=cmd_models_list)


def _add_serve(sub) -> None:
    p = sub.add_parser("serve", help="serve a local model over a vLLM-compatible /v1/completions route",
                       description="Serve a model with the batched local engine behind vLLM's "
                                   "/v1/completions contract (token-id prompts, token ids and logprobs back).")
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-batch-size", type=int, default=8)
    p.set_defaults(func=cmd_serve)


def _add_check(sub) -> None:
    p = sub.add_parser("check", help="verify the token invariant of every episode in a JSONL file",
                       description="Verify, from the JSONL alone, that in every segment the tokens under loss "
                                   "mask 1 are exactly the response_ids of its calls.")
    p.add_argument("episodes")
    p.set_defaults(func=cmd_check)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentboost", description="Train Strands Agents with reinforcement learning.")
    parser.add_argument("--version", action="version", version=f"agentboost {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_rollout(sub)
    _add_models(sub)
    _add_serve(sub)
    _add_check(sub)
    return parser


# -- commands ----------------------------------------------------------------------------------
def cmd_models_prepare(args) -> int:
    from .models.embedded import prepare_embedded

    t0 = time.perf_counter()
    path = prepare_embedded(args.name, args.cache_dir, force=args.force)
    print(f"{args.name}: {path} ({time.perf_counter() - t0:.1f} s)")
    return 0


def cmd_models_list(args) -> int:
    from .models.embedded import EMBEDDED_MODELS, cache_root, verify_cache

    for name, spec in EMBEDDED_MODELS.items():
        path = cache_root(args.cache_dir) / "models" / name
        state = "prepared" if path.is_dir() and verify_cache(path) is None else "not prepared"
        print(f"{name}\t{spec.distribution}\t{state}\t{path}")
    return 0


def cmd_serve(args) -> int:
    from .sampling.completions_server import CompletionsServer
    from .sampling.local_engine import LocalEngine

    engine = LocalEngine.from_pretrained(args.model, max_batch_size=args.max_batch_size)
    server = CompletionsServer(engine, model_name=args.model)

    async def main() -> None:
        url = await server.start(args.host, args.port)
        print(f"serving {args.model} at {url}/v1/completions (Ctrl-C to stop)", flush=True)
        await asyncio.Event().wait()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    finally:
        engine.close()
    return 0


def cmd_check(args) -> int:
    from .episodes.record import check_episode, read_episodes

    n = bad = 0
    for ep in read_episodes(args.episodes):
        n += 1
        problems = check_episode(ep)
        if problems:
            bad += 1
            print(f"{ep.episode_id}: " + "; ".join(problems))
    print(f"checked={n} violations={bad}")
    return 1 if bad else 0


def cmd_rollout(args) -> int:
    from .agents.strands_agent import StrandsAgent
    from .agents.strands_process_pool import StrandsProcessPool
    from .environments.groups import apply_group_policy
    from .environments.rewards import default_reward, registered_rewards
    from .environments.strands_env import StrandsEnv
    from .episodes.record import EpisodeWriter
    from .episodes.summary import print_summary
    from .sampling.protocol import SamplingParams
    from .sampling.spec import SamplerSpec
    from .tasks import load_tasks

    if args.samples < 1 or args.workers < 1 or args.slots < 1:
        raise UsageError("--samples, --workers and --slots must be >= 1")
    try:
        template_kwargs = json.loads(args.chat_template_kwargs)
    except json.JSONDecodeError as e:
        raise UsageError(f"--chat-template-kwargs is not valid JSON: {e.msg}") from None
    if args.tasks:
        tasks = load_tasks(args.tasks, question_field=args.question_field)
    else:
        tasks = [{"task_id": "prompt-0", "question": args.prompt or "What is 17 + 25?"}]
        if args.answer is not None:
            tasks[0]["answer"] = args.answer
    spec_kwargs = {}
    if args.tools:
        spec_kwargs["tools"] = args.tools
    if args.system_prompt is not None:
        spec_kwargs["system_prompt"] = args.system_prompt
    spec = StrandsAgent(max_model_calls=args.max_model_calls, max_response_tokens=args.max_response_tokens,
                        timeout_s=args.timeout, factory=args.agent_factory, **spec_kwargs).validate()
    reward = args.reward
    if reward == "default":
        reward = default_reward(spec.agent_type)
        if reward is None:
            raise UsageError(f"no default reward for agent type {spec.agent_type!r}; "
                             f"registered: {', '.join(registered_rewards())}")
    env = StrandsEnv(reward=reward).validate()
    sampling = SamplingParams(temperature=args.temperature, top_p=args.top_p,
                              max_new_tokens=args.max_new_tokens, seed=args.seed)

    engine = server = None
    if args.sampler_url:
        from .models.embedded import resolve_model_path

        url = args.sampler_url
        tokenizer = args.tokenizer or str(resolve_model_path(args.model))
    else:
        # the policy lives here; workers reach it over loopback through the vLLM contract
        from .models.embedded import resolve_model_path
        from .sampling.completions_server import CompletionsServer
        from .sampling.local_engine import LocalEngine

        tokenizer = args.tokenizer or str(resolve_model_path(args.model))
        engine = LocalEngine.from_pretrained(args.model, max_batch_size=args.workers * args.slots)
        server = CompletionsServer(engine, model_name=args.model)
        url = server.start_in_thread()
    sampler = SamplerSpec(tokenizer=tokenizer, sampling=sampling, url=url, template_kwargs=template_kwargs)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("")
    t0 = time.perf_counter()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    try:
        with EpisodeWriter(out) as writer, Progress(
            TextColumn("episodes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            disable=not sys.stderr.isatty(),
        ) as progress, StrandsProcessPool(spec, sampler, env, workers=args.workers, slots=args.slots) as pool:
            bar = progress.add_task("episodes", total=len(tasks) * args.samples)

            def on_episode(ep) -> None:
                writer.write(ep)
                progress.advance(bar)

            episodes = pool.run(tasks, samples=args.samples, on_episode=on_episode)
            stats = pool.stats()
            broken = pool.broken
    finally:
        if server is not None:
            server.stop_thread()
        if engine is not None:
            engine.close()
    _, groups = apply_group_policy(episodes, "keep", group_size=args.samples)
    print_summary(episodes, wall_s=time.perf_counter() - t0, out=str(out), groups=groups, pool_stats=stats)
    if broken:
        print(f"agentboost rollout: error: {broken}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from .agents.strands_agent import AgentSpecError
    from .environments.rewards import UnknownRewardError
    from .models.embedded import ModelNotFoundError
    from .tasks import TaskFileError

    try:
        return args.func(args)
    except (UsageError, AgentSpecError, ModelNotFoundError, TaskFileError, UnknownRewardError, ValueError) as e:
        print(f"agentboost {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
