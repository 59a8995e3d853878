"""The ``agentboost`` command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import __version__
from .errors import InputError


class UsageError(InputError):
    """A wrong combination of command-line options."""


ENGINE_HELP = ("the engine that samples the model: hf (batched HF generate in this process), vllm (a vLLM "
               "server subprocess; install it with `bash setup.sh --vllm`), auto (vllm when installed) (default: hf)")


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
    p.add_argument("--demonstrations", action="store_true",
                   help="no model: answer each task from its 'solution' field (tool calls, then the answer) "
                        "through the real agent and tools; demonstrations for `agentboost sft`")
    p.add_argument("--engine", choices=("hf", "vllm", "auto"), default="hf", help=ENGINE_HELP)
    p.add_argument("--max-batch", type=int, default=32,
                   help="hf engine: requests decoded together; more wait in a queue (default: 32)")
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
    p.add_argument("--max-batch-size", type=int, default=8, help="hf engine: requests decoded together (default: 8)")
    p.add_argument("--engine", choices=("hf", "vllm", "auto"), default="hf", help=ENGINE_HELP)
    p.set_defaults(func=cmd_serve)


def _add_check(sub) -> None:
    p = sub.add_parser("check", help="verify the token invariant of every episode in a JSONL file",
                       description="Verify, from the JSONL alone, that in every segment the tokens under loss "
                                   "mask 1 are exactly the response_ids of its calls.")
    p.add_argument("episodes")
    p.set_defaults(func=cmd_check)


def _add_data(sub) -> None:
    from .data.prepare import PREPARERS

    p = sub.add_parser("data", help="prepare datasets in the task schema", description="Prepare datasets.")
    dsub = p.add_subparsers(dest="data_cmd", metavar="COMMAND", required=True)
    prep = dsub.add_parser("prepare", help="convert a dataset to train.parquet / test.parquet",
                           description="Convert a dataset into the project's task schema. Datasets: "
                                       + "; ".join(f"{k}: {v.description}" for k, v in PREPARERS.items()))
    prep.add_argument("name", choices=sorted(PREPARERS))
    prep.add_argument("--out", required=True, help="output directory")
    prep.add_argument("--source", help="local .json/.jsonl/.parquet file or Hugging Face dataset name")
    prep.add_argument("--config", help="dataset config (deepcoder: taco, lcbv5, primeintellect)")
    prep.add_argument("--split", default="train",
                      help="source split for Hugging Face datasets; tau2: train, test or base (default: train)")
    prep.add_argument("--domain", help="tau2: airline, retail or telecom")
    prep.add_argument("--test-fraction", type=float, help="share of rows for test.parquet (default: per dataset)")
    prep.add_argument("--public-tests", type=int, default=1, help="tests per problem that become public examples (default: 1)")
    prep.add_argument("--show-example", action="store_true",
                      help="show the first public example in the question (it is then never graded)")
    prep.add_argument("--float-tol", help="how every row's real-number outputs compare: 'exact', a tolerance "
                                           "such as 1e-6, or '{\"abs\": 1e-6, \"rel\": 0}' (default: what the "
                                           "statement states, else the judge's default)")
    prep.add_argument("--drop-images", action="store_true",
                      help="reject problems whose statement has an image (default: keep them, flagged has_image)")
    prep.add_argument("--seed", type=int, default=0)
    prep.add_argument("--limit", type=int, help="read at most this many rows")
    prep.add_argument("--verl-agent", metavar="NAME",
                      help="also write verl_train.parquet / verl_test.parquet: veRL rows run by this agent loop")
    prep.set_defaults(func=cmd_data_prepare)
    vrl = dsub.add_parser("verl", help="convert a task file to veRL dataset rows (parquet)",
                          description="Write veRL rows (prompt, agent_name, data_source, reward_model, extra_info "
                                      "with the task) for verl.trainer.main_ppo with the Strands agent loop.")
    vrl.add_argument("tasks", help="task file (.jsonl or .parquet)")
    vrl.add_argument("--out", required=True, help="output .parquet file")
    vrl.add_argument("--agent-name", default="strands_agent",
                     help="the agent loop's name in the agent-loop YAML (default: strands_agent)")
    vrl.add_argument("--question-field", default="question")
    vrl.add_argument("--id-field", default="task_id")
    vrl.set_defaults(func=cmd_data_verl)


def _add_score(sub) -> None:
    p = sub.add_parser("score", help="score given answers with a reward",
                       description="Score answers (JSONL rows with task_id and answer) with any registered reward; "
                                   "the last line is passed=<n> total=<n>.")
    p.add_argument("--reward", required=True, help="registered reward name or module:function")
    p.add_argument("--tasks", required=True, help="task file (.jsonl or .parquet)")
    p.add_argument("--answers", required=True, help="JSONL with task_id and answer")
    p.add_argument("--jobs", type=int, default=4, help="answers scored at once (default: 4)")
    p.add_argument("--results", help="write one JSON line per answer: task_id, score, verdict, the reward's "
                                     "metadata (for code: each test's verdict and time)")
    p.set_defaults(func=cmd_score)


def _add_stats(sub) -> None:
    p = sub.add_parser("stats", help="tables over an episodes file (code categories, tool outcomes, statuses)",
                       description="Episodes by code category, test_code calls by outcome, statuses and tool calls.")
    p.add_argument("episodes")
    p.add_argument("--tasks", help="tau2 episodes: the task file they ran on (`data prepare tau2`), for the null "
                                   "baseline and the success rate on non-trivial tasks")
    p.set_defaults(func=cmd_stats)


def _add_sandbox(sub) -> None:
    p = sub.add_parser("sandbox", help="the code sandbox", description="The sandbox for model-written code.")
    ssub = p.add_subparsers(dest="sandbox_cmd", metavar="COMMAND", required=True)
    info = ssub.add_parser("info", help="which protections are active on this machine",
                           description="Probe and print which sandbox protections are active here.")
    info.set_defaults(func=cmd_sandbox_info)


def _add_train(sub) -> None:
    p = sub.add_parser("train", help="GRPO on one machine (the local backend)",
                       description="Train the policy with GRPO/RLOO/REINFORCE++ on one machine. CONFIG is YAML; "
                                   "key=value pairs override it (e.g. run.steps=5 optim.lr=1e-4).")
    p.add_argument("config", nargs="?", help="YAML configuration (not needed with --resume)")
    p.add_argument("overrides", nargs="*", help="dotted overrides, key.sub=value")
    p.add_argument("--run-dir", help="output directory (default: runs/<config name>-<time>)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
    p.set_defaults(func=cmd_train)


def _add_plot(sub) -> None:
    p = sub.add_parser("plot", help="redraw a run's PNG plots", description="Redraw RUN_DIR/plots/*.png.")
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_plot)


def _add_export(sub) -> None:
    p = sub.add_parser("export", help="export a run's episodes for fine-tuning or inspection",
                       description="Write selected training episodes of a run (messages and token segments) as JSONL.")
    p.add_argument("run_dir")
    p.add_argument("--out", required=True)
    p.add_argument("--min-reward", type=float, help="keep episodes with reward >= this")
    p.add_argument("--success-only", action="store_true", help="keep episodes whose outcome is a full success")
    p.add_argument("--limit", type=int, help="at most this many episodes")
    p.add_argument("--include-validation", action="store_true", help="also export validation episodes")
    p.set_defaults(func=cmd_export)


def _add_sft(sub) -> None:
    p = sub.add_parser("sft", help="supervised fine-tuning on episodes (rejection-sampling fine-tuning)",
                       description="Fine-tune on the sampled tokens of episodes (episode records or `agentboost export` "
                                   "files, e.g. a run's successes) and write a model directory that --model and "
                                   "model.path accept.")
    p.add_argument("files", nargs="+", help="episode JSONL files (records or exports)")
    p.add_argument("--out", required=True, help="output model directory")
    p.add_argument("--model", default="smollm2-135m-instruct", help="starting model (embedded name or HF directory)")
    p.add_argument("--full", action="store_true", help="full fine-tuning instead of LoRA (merged into the output)")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch-rows", type=int, default=16, help="rows per optimizer step (default: 16)")
    p.add_argument("--micro-batch-tokens", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    p.set_defaults(func=cmd_sft)


def _add_eval(sub) -> None:
    p = sub.add_parser("eval", help="a checkpoint or model against a baseline, with a paired significance test",
                       description="Run the model and the baseline on the same held-out tasks with the same agent, "
                                   "reward, sampling parameters and seeds; report each one's success rate, mean reward "
                                   "and tool-call rate, the paired difference over tasks with its 95%% CI, a p-value "
                                   "(paired sign-flip permutation test over tasks) and whether it is significant.")
    p.add_argument("--model", required=True, help="a training run directory (its newest intact checkpoint), "
                                                  "an embedded model name or a model directory")
    p.add_argument("--baseline", default=None, help="the same kinds; default: the model's base model")
    p.add_argument("--config", help="training YAML for the agent, reward and validation sampling "
                                    "(default: the run's config.yaml, else the defaults)")
    p.add_argument("overrides", nargs="*", help="dotted overrides of that configuration, e.g. validation.temperature=0.5")
    p.add_argument("--tasks", help="held-out task file (default: the configuration's data.val_file)")
    p.add_argument("--samples", type=int, help="episodes per task (default: validation.k)")
    p.add_argument("--max-tasks", type=int, help="evaluate on the first N tasks")
    p.add_argument("--seed", type=int, default=0, help="sampling seed, the same for both (default: 0)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default: 0.05)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--slots", type=int, default=16)
    p.add_argument("--out", default="eval", help="directory for eval.json and both policies' episodes (default: eval)")
    p.set_defaults(func=cmd_eval)


def _add_jobs(sub) -> None:
    p = sub.add_parser("jobs", help="the local job service (start, status, cancel, evaluate, export over HTTP)",
                       description="Training jobs as child processes with their own run directories, driven over "
                                   "HTTP with a bearer token (see agentboost.jobs.client.TrainingClient).")
    jsub = p.add_subparsers(dest="jobs_cmd", metavar="COMMAND", required=True)
    s = jsub.add_parser("serve", help="serve the jobs under --root", description="Serve the jobs under --root; the "
                        "bearer token is made at first start in ROOT/token (owner-only).")
    s.add_argument("--root", default="jobs", help="jobs directory (default: jobs)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback)")
    s.add_argument("--port", type=int, default=8765)
    s.set_defaults(func=cmd_jobs_serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentboost", description="Train Strands Agents with reinforcement learning.")
    parser.add_argument("--version", action="version", version=f"agentboost {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_rollout(sub)
    _add_models(sub)
    _add_serve(sub)
    _add_check(sub)
    _add_data(sub)
    _add_score(sub)
    _add_stats(sub)
    _add_sandbox(sub)
    _add_train(sub)
    _add_plot(sub)
    _add_export(sub)
    _add_sft(sub)
    _add_eval(sub)
    _add_jobs(sub)
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
    import threading

    from .sampling.policy_server import PolicyServer, resolve_engine

    if resolve_engine(args.engine) == "vllm":
        from .models.loading import resolve_model_path
        from .sampling.vllm_server import VLLMPolicyServer

        ps = VLLMPolicyServer(resolve_model_path(args.model), host=args.host, port=args.port,
                              served_name=args.model).start()
    else:
        ps = PolicyServer.from_pretrained(args.model, max_batch_size=args.max_batch_size, host=args.host,
                                          port=args.port)
    with ps:
        print(f"serving {args.model} at {ps.url}/v1/completions (Ctrl-C to stop)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


def cmd_data_prepare(args) -> int:
    from .data.prepare import PrepareOptions, prepare

    opts = PrepareOptions(public_tests=args.public_tests, show_example=args.show_example,
                          test_fraction=args.test_fraction, seed=args.seed, limit=args.limit,
                          float_tol=args.float_tol, drop_images=args.drop_images, domain=args.domain)
    report = prepare(args.name, args.out, source=args.source, config=args.config, split=args.split, opts=opts)
    if report.written:
        for path, n in report.written:
            print(f"wrote {n} tasks to {path}")
        return 0
    print("\n".join(report.summary(args.name, opts)))
    print(f"wrote {report.train} tasks to {Path(args.out) / 'train.parquet'} and {report.test} to "
          f"{Path(args.out) / 'test.parquet'}")
    if args.verl_agent:
        from .integrations.verl.rows import prepared_splits_to_verl

        for path, n in prepared_splits_to_verl(args.out, {"train": report.train, "test": report.test},
                                               agent_name=args.verl_agent):
            print(f"wrote {n} veRL rows to {path}")
    return 0


def cmd_data_verl(args) -> int:
    from .integrations.verl.rows import task_file_to_verl

    n = task_file_to_verl(args.tasks, args.out, agent_name=args.agent_name, question_field=args.question_field,
                          id_field=args.id_field)
    print(f"wrote {n} veRL rows to {args.out} (agent_name {args.agent_name})")
    return 0


def cmd_score(args) -> int:
    from collections import Counter

    from .rewards.scoring import read_answers, score_answers, tests_by_verdict
    from .tasks import load_tasks

    tasks = {t["task_id"]: t for t in load_tasks(args.tasks)}
    answers = read_answers(args.answers, tasks, args.tasks)
    results = score_answers(args.reward, tasks, answers, jobs=args.jobs)
    passed = sum(1 for r in results if r.score >= 1.0)
    total = len(results)
    print(f"reward {args.reward}: {total} answers, pass rate {passed / total:.1%}" if total else "no answers")
    for verdict, n in Counter(r.verdict for r in results).most_common():
        print(f"  {verdict}: {n} ({n / total:.1%})")
    tests = tests_by_verdict(results)
    if tests:
        print(f"tests run: {sum(tests.values())}; " + ", ".join(f"{v} {n}" for v, n in tests.most_common()))
    if args.results:
        with open(args.results, "w", encoding="utf-8") as f:
            for r in results:
                f.write(json.dumps({"task_id": r.task_id, "score": r.score, "verdict": r.verdict,
                                    "metadata": r.metadata}, default=str) + "\n")
    print(f"passed={passed} total={total}")
    return 0


def cmd_stats(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from .rewards.code import CATEGORIES, OUTCOME_ROWS, code_stats
    from .episodes.record import read_episodes
    from .episodes.stats import TOOL_USE_ROWS, generic_stats

    episodes = list(read_episodes(args.episodes))
    n = len(episodes) or 1
    code, generic = code_stats(episodes), generic_stats(episodes)
    console = Console()

    def table(title, header, rows):
        t = Table(title=title)
        for h in header:
            t.add_column(h, justify="right" if h != header[0] else "left")
        for r in rows:
            t.add_row(*[str(x) for x in r])
        console.print(t)

    table(f"episodes by category ({len(episodes)})", ["category", "count", "%"],
          [(c, code["categories"][c], f"{100 * code['categories'][c] / n:.1f}") for c in CATEGORIES])
    total_calls = sum(code["outcomes"].values()) or 1
    table(f"test_code calls by outcome ({sum(code['outcomes'].values())})", ["outcome", "count", "%"],
          [(name, code["outcomes"][name], f"{100 * code['outcomes'][name] / total_calls:.1f}") for name, _ in OUTCOME_ROWS])
    table("episodes by status", ["status", "count", "%"],
          [(s, c, f"{100 * c / n:.1f}") for s, c in generic["statuses"].most_common()])
    table("tool calls by name", ["tool", "ok", "error"],
          [(name, generic["tools"][(name, "ok")], generic["tools"][(name, "error")])
           for name in sorted({k[0] for k in generic["tools"]})])
    table(f"episodes by tool use ({len(episodes)}; no tool call: {generic['tool_use_no_call_success'][True]} succeeded)",
          ["tool use", "count", "%"],
          [(row, generic["tool_use"][row], f"{100 * generic['tool_use'][row] / n:.1f}") for row in TOOL_USE_ROWS])
    tau2 = [ep for ep in episodes if str(ep.task_id).startswith("tau2/")]
    if tau2:
        from .environments.tau2.metrics import null_baseline, tau2_metrics
        from .tasks import load_tasks

        null = null_baseline([t for t in load_tasks(args.tasks) if t["task_id"] in {e.task_id for e in tau2}]) \
            if args.tasks else None
        m = tau2_metrics(tau2, null=null)
        rows = [("episodes / tasks", f"{m['episodes']} / {m['tasks']}"), ("average reward", f"{m['avg_reward']:.3f}")]
        rows += [(f"pass^{k}", f"{v:.3f}") for k, v in m["pass_hat_k"].items()]
        rows += [(f"pass@{k}", f"{v:.3f}") for k, v in m["pass_at_k"].items()]
        if null is not None:
            rows += [("null baseline (do nothing)", f"{m['null_baseline']:.3f}"),
                     (f"success on non-trivial tasks ({m['nontrivial_tasks']})",
                      "-" if m["nontrivial_success"] is None else f"{m['nontrivial_success']:.3f}")]
        rows += [(f"termination: {k}", v) for k, v in sorted(m["terminations"].items())]
        rows += [(f"user signal: {k}", v) for k, v in sorted(m["user_signals"].items())]
        rows += [("tool errors per episode", f"{m['tool_errors_per_episode']:.2f}")]
        table("tau2 (pass^k as tau2 reports it)", ["metric", "value"], rows)
    return 0


def cmd_sandbox_info(args) -> int:
    from .sandbox.runner import describe_protections, protections

    print(describe_protections())
    for k, v in protections().items():
        print(f"  {k}: {v}")
    return 0


def cmd_train(args) -> int:
    from .trainer.config import load_config
    from .trainer.loop import Trainer

    if args.resume:
        if args.config or args.overrides:
            raise UsageError("--resume continues a run with its saved config; give no CONFIG or overrides")
        trainer = Trainer(None, args.resume, resume=True)
    else:
        if not args.config:
            raise UsageError("a CONFIG file is required (or --resume RUN_DIR)")
        cfg = load_config(args.config, args.overrides)
        run_dir = args.run_dir or f"runs/{Path(args.config).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        if Path(run_dir, "checkpoints", "latest").exists():
            raise UsageError(f"{run_dir} already holds a run; use --resume {run_dir} or another --run-dir")
        trainer = Trainer(cfg, run_dir)
    print(f"run directory: {trainer.run_dir}", flush=True)
    import signal

    # SIGTERM (a cancelled job, a scheduler's stop): finish the step, checkpoint, exit cleanly
    signal.signal(signal.SIGTERM, lambda *_: trainer.request_stop("stopped by SIGTERM"))
    result = trainer.run()
    print(f"done: {result['steps']} steps ({result['stopped']}); metrics in {trainer.run_dir / 'metrics.jsonl'}, "
          f"plots in {trainer.run_dir / 'plots'}")
    return 0


def cmd_plot(args) -> int:
    from .trainer.metrics import draw_plots

    for path in draw_plots(args.run_dir):
        print(path)
    return 0


def cmd_export(args) -> int:
    from .trainer.export import export_run

    n = export_run(args.run_dir, args.out, min_reward=args.min_reward, success_only=args.success_only,
                   limit=args.limit, include_validation=args.include_validation)
    print(f"exported {n} episodes to {args.out}")
    return 0


def cmd_sft(args) -> int:
    from .trainer.sft import SFTConfig, load_sft_rows, run_sft

    for name, value in (("--epochs", args.epochs), ("--batch-rows", args.batch_rows),
                        ("--micro-batch-tokens", args.micro_batch_tokens), ("--lora-r", args.lora_r)):
        if value < 1:
            raise UsageError(f"{name} must be >= 1, got {value}")
    if args.lr <= 0:
        raise UsageError(f"--lr must be > 0, got {args.lr}")
    rows = load_sft_rows(args.files)
    cfg = SFTConfig(model=args.model, lora=not args.full, lora_r=args.lora_r, lora_alpha=2 * args.lora_r,
                    epochs=args.epochs, lr=args.lr, batch_rows=args.batch_rows,
                    micro_batch_tokens=args.micro_batch_tokens, seed=args.seed)
    try:
        res = run_sft(rows, cfg, args.out, overwrite=args.overwrite)
    except FileExistsError as e:
        raise UsageError(f"{e}; choose another --out or pass --overwrite") from None
    print(f"trained on {res['rows']} rows in {res['steps']} steps: loss {res['first_loss']:.4f} -> "
          f"{res['last_loss']:.4f}; model in {res['out']}")
    return 0


def cmd_eval(args) -> int:
    from .tasks import load_tasks
    from .trainer.evaluation import config_for, evaluate

    cfg = config_for(args.model, args.config, args.overrides)
    task_file = args.tasks or cfg.data.val_file
    if not task_file:
        raise UsageError("no held-out tasks: give --tasks or a configuration with data.val_file")
    tasks = load_tasks(task_file, question_field=cfg.data.question_field)[: args.max_tasks]
    baseline = args.baseline or cfg.model.path
    res = evaluate(args.model, baseline, tasks, cfg, samples=args.samples or cfg.validation.k, seed=args.seed,
                   alpha=args.alpha, workers=args.workers, slots=args.slots, out_dir=args.out)
    d = res["difference"]
    print(f"{res['tasks']} tasks x {res['samples_per_task']} samples, seed {res['seed']}, "
          f"temperature {res['sampling']['temperature']:g}")
    print(f"{'policy':<10} {'success (95% CI)':>17} {'reward':>7} {'tools':>6} {'tool ok':>8} {'malformed':>9} "
          f"{'turns':>6}  source")
    for name in ("model", "baseline"):
        r = res[name]
        reward = f"{r['mean_reward']:.3f}" if r["mean_reward"] is not None else "-"
        print(f"{name:<10} {r['success_rate']:>9.3f} ± {r['success_ci95']:.3f} {reward:>7} {r['tool_call_rate']:>6.2f} "
              f"{r['tool_success_rate']:>8.2f} {r['malformed_tool_call_rate']:>9.2f} {r['mean_turns']:>6.2f}  {r['policy']}")
    lo, hi = d["ci95"]
    print(f"difference {d['mean_difference']:+.3f} (95% CI {lo:+.3f} .. {hi:+.3f}), p = {d['p_value']:.4f} "
          f"({d['method']}; {d['differing_tasks']} of {d['tasks']} tasks differ): "
          f"{'significant' if d['significant'] else 'not significant'} at alpha {d['alpha']:g}")
    print(f"written: {Path(args.out) / 'eval.json'}")
    return 0


def cmd_jobs_serve(args) -> int:
    from .jobs.service import serve

    serve(args.root, args.host, args.port)
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
    from .agents.strands_agent import StrandsAgentSpec
    from .agents.strands_process_pool import StrandsProcessPool
    from .rewards.groups import GroupPolicy, apply_group_policy
    from .rewards.registry import default_reward, registered_rewards
    from .environments.strands_env import StrandsEnv
    from .episodes.record import EpisodeWriter
    from .episodes.summary import print_summary
    from .sampling.protocol import SamplingParams
    from .sampling.spec import SamplerSpec
    from .tasks import load_tasks

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
            from .agents.demonstrations import check_solution

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
    spec = StrandsAgentSpec(max_model_calls=args.max_model_calls, max_response_tokens=args.max_response_tokens,
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

    from .models.loading import resolve_model_path

    tokenizer = args.tokenizer or str(resolve_model_path(args.model))
    policy = policy_file = None
    if args.demonstrations:
        sampler = SamplerSpec(tokenizer=tokenizer, sampling=sampling, kind="scripted",
                              script="agentboost.agents.demonstrations:solution_policy",
                              script_kwargs={"tasks": str(Path(args.tasks).resolve()),
                                             "question_field": args.question_field},
                              template_kwargs=template_kwargs)
    elif args.sampler_url:
        url = args.sampler_url
    else:
        # the policy is served from here; workers reach it over loopback through the vLLM contract
        from .sampling.policy_server import PolicyServer, resolve_engine

        if resolve_engine(args.engine) == "vllm":
            from .sampling.vllm_server import VLLMPolicyServer

            policy = VLLMPolicyServer(resolve_model_path(args.model),
                                      seed=args.seed or 0, max_num_seqs=max(16, args.workers * args.slots)).start()
            policy_file = str(policy.policy_file)
        else:
            # at most --max-batch decode together; the rest queue (one huge batch is what used to
            # make 128 episodes in flight time out)
            policy = PolicyServer.from_pretrained(args.model, max_batch_size=min(args.max_batch, args.workers * args.slots))
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (UsageError, InputError) as e:  # bad input: one line; anything else keeps its traceback
        print(f"agentboost {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
