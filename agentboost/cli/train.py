"""``train``, ``plot``, ``export``, ``sft`` and ``eval``: a training run and what comes of it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..episodes.summary import ci95_text, interval_text
from ..run.metrics import rate_text
from .common import UsageError, add_command, add_options


def add_train(sub) -> None:
    p = add_command(sub, "train", cmd_train, help="GRPO on one machine (the local backend)",
                    description="Train the policy with GRPO/RLOO/REINFORCE++ on one machine. CONFIG is YAML; "
                                "key=value pairs override it (e.g. run.steps=5 optim.lr=1e-4). Every key, its "
                                "default, bounds and meaning: `agentboost config` (docs/configuration.md).")
    p.add_argument("config", nargs="?", help="YAML configuration (not needed with --resume)")
    p.add_argument("overrides", nargs="*", help="dotted overrides, key.sub=value")
    p.add_argument("--run-dir", help="output directory (default: runs/<config name>-<time>)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
    p.add_argument("--check", action="store_true",
                   help="check the configuration and everything it names (files, model, rewards, tools, ports, "
                        "sandbox), then stop: no model loads, nothing is written")


def add_config(sub) -> None:
    p = add_command(sub, "config", cmd_config, help="every training configuration key",
                    description="Print every training configuration key with its type, default, bounds or "
                                "choices and meaning, read from the schema.")
    p.add_argument("--markdown", action="store_true", help="as the markdown of docs/configuration.md")


def cmd_config(args) -> int:
    from ..run.config_reference import markdown, text

    print(markdown() if args.markdown else text(), end="" if args.markdown else "\n")
    return 0


def add_plot(sub) -> None:
    p = add_command(sub, "plot", cmd_plot, help="redraw a run's PNG plots", description="Redraw RUN_DIR/plots/*.png.")
    p.add_argument("run_dir", help="a training run directory")


def add_export(sub) -> None:
    p = add_command(sub, "export", cmd_export, help="export a run's episodes for fine-tuning or inspection",
                    description="Write selected training episodes of a run (messages and token segments) as JSONL.")
    p.add_argument("run_dir", help="a training run directory")
    p.add_argument("--out", required=True, help="output JSONL file")
    p.add_argument("--min-reward", type=float, help="keep episodes with reward >= this")
    p.add_argument("--success-only", action="store_true", help="keep episodes whose outcome is a full success")
    p.add_argument("--limit", type=int, help="at most this many episodes")
    p.add_argument("--include-validation", action="store_true", help="also export validation episodes")


def add_sft(sub) -> None:
    p = add_command(sub, "sft", cmd_sft, help="supervised fine-tuning on episodes (rejection-sampling fine-tuning)",
                    description="Fine-tune on the sampled tokens of episodes (episode records or `agentboost export` "
                                "files, e.g. a run's successes) and write a model directory that --model and "
                                "model.path accept.")
    p.add_argument("files", nargs="+", help="episode JSONL files (records or exports)")
    p.add_argument("--out", required=True, help="output model directory")
    p.add_argument("--model", default="smollm2-135m-instruct", help="starting model (embedded name or HF directory)")
    p.add_argument("--full", action="store_true", help="full fine-tuning instead of LoRA (merged into the output)")
    add_options(p, ("--lora-r", 16, "LoRA rank (default: 16)"), ("--epochs", 1, "passes over the rows (default: 1)"), ("--lr", 1e-4, "learning rate (default: 1e-4)"),
                ("--batch-rows", 16, "rows per optimizer step (default: 16)"), ("--micro-batch-tokens", 4096, "token budget per micro-batch (default: 4096)"),
                ("--seed", 0, "seed of the row order (default: 0)"))
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")


def add_eval(sub) -> None:
    p = add_command(sub, "eval", cmd_eval,
                    help="a checkpoint or model against a baseline, with a paired significance test",
                    description="Run the model and the baseline on the same held-out tasks with the same agent, "
                                "reward, sampling parameters and seeds; report each one's success rate, mean reward "
                                "and tool-call rate, the paired difference over tasks with its 95% CI, a p-value "
                                "(paired sign-flip permutation test over tasks) and whether it is significant.")
    p.add_argument("--model", required=True, help="a training run directory, RUN_DIR[:CHECKPOINT] (the newest "
                                                  "intact checkpoint, or best, latest, step_000012), an embedded "
                                                  "model name, a model directory, or a chat model we do not train: "
                                                  "a YAML/JSON file or inline mapping {provider: openai, model_id: "
                                                  "..., base_url: ..., api_key_env: ...} (docs/hosted-models.md)")
    p.add_argument("--baseline", default=None, help="the same kinds; default: the model's base model")
    p.add_argument("--prompt-policy", metavar="PATH",
                   help="the model's side runs with this prompt policy (a prompt_policy.json, a checkpoint or a "
                        "prompt-training run directory, whose config.yaml is then the default --config); the "
                        "baseline keeps the configuration's prompt")
    p.add_argument("--config", help="training YAML for the agent, reward and validation sampling "
                                    "(default: the run's config.yaml, else the defaults)")
    p.add_argument("overrides", nargs="*", help="dotted overrides of that configuration, e.g. validation.temperature=0.5")
    add_options(p, ("--tasks", str, "held-out task file (default: the configuration's data.val_file)"),
                ("--samples", int, "episodes per task (default: validation.k)"),
                ("--max-tasks", int, "evaluate on the first N tasks"),
                ("--seed", 0, "sampling seed, the same for both (default: 0)"),
                ("--alpha", 0.05, "significance level (default: 0.05)"), ("--workers", 1, "worker processes (default: 1)"), ("--slots", 16, "episodes in flight per worker (default: 16)"),
                ("--out", "eval", "directory for eval.json and both policies' episodes; run again with the same "
                                  "arguments, an interrupted evaluation resumes there (default: eval)"),
                ("--retries", 2, "rounds of retries of the episodes the serving side aborted (default: 2)"),
                ("--retry-backoff", 5.0, "seconds before the first retry round, doubling (default: 5)"))


def cmd_train(args) -> int:
    from ..run.config import load_config
    from ..trainer.dispatch import trainer_for

    if args.resume:
        if args.config or args.overrides:
            raise UsageError("--resume continues a run with its saved config; give no CONFIG or overrides")
        trainer = trainer_for(None, args.resume, resume=True)
    else:
        if not args.config:
            raise UsageError("a CONFIG file is required (or --resume RUN_DIR)")
        cfg = load_config(args.config, args.overrides)
        if args.check:
            from ..run.preflight import preflight

            for warning in preflight(cfg, args.config):
                print(f"warning: {warning}")
            print(f"{args.config}: configuration OK")
            return 0
        run_dir = args.run_dir or f"runs/{Path(args.config).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        if Path(run_dir, "checkpoints", "latest").exists():
            raise UsageError(f"{run_dir} already holds a run; use --resume {run_dir} or another --run-dir")
        trainer = trainer_for(cfg, run_dir)  # algorithm.policy: weights (Trainer) or prompt (PromptTrainer)
    print(f"run directory: {trainer.run_dir}", flush=True)
    from ..run.lifecycle import StepAbandoned

    trainer.stop_on_signals()  # SIGTERM: finish the step and checkpoint, within run.stop_grace_s
    try:
        result = trainer.run()
    except StepAbandoned as e:
        print(f"agentboost train: stopped: {e}", file=sys.stderr)
        return 143
    if "validation" in result:
        first, last = result["validation"]["first"], result["validation"]["last"]
        span = (f"step {first['step']} -> {last['step']}" if first is not last else f"step {last['step']}")
        pass1 = (f"{rate_text(first['pass@1'])} -> {rate_text(last['pass@1'])}" if first is not last
                 else rate_text(last['pass@1']))
        tools = (f"{first['tool_call_rate']:.2f} -> {last['tool_call_rate']:.2f}" if first is not last
                 else f"{last['tool_call_rate']:.2f}")
        print(f"validation ({span}, {last['episodes']} episodes): pass@1 {pass1}, tool-call rate {tools}")
        if last.get("figure"):  # what the figure is: the same words as Run.status() and the job service
            print(f"  last validation: {last['figure']}")
    if "best_checkpoint" in result:
        best = result["best_checkpoint"]
        print(f"best checkpoint: {best['checkpoint']} (validation pass@1 {best['value']:.3f}); serve it as "
              f"{trainer.run_dir}:best")
    print(f"done: {result['steps']} steps ({result['stopped']}); metrics in {trainer.run_dir / 'metrics.jsonl'}, "
          f"plots in {trainer.run_dir / 'plots'}")
    return 0


def cmd_plot(args) -> int:
    from ..run.metrics import draw_plots

    for path in draw_plots(args.run_dir):
        print(path)
    return 0


def cmd_export(args) -> int:
    from ..trainer.export import export_run

    n = export_run(args.run_dir, args.out, min_reward=args.min_reward, success_only=args.success_only,
                   limit=args.limit, include_validation=args.include_validation)
    print(f"exported {n} episodes to {args.out}")
    return 0


def cmd_sft(args) -> int:
    from ..trainer.sft import SFTConfig, load_sft_rows, run_sft

    for name, value in (("--epochs", args.epochs), ("--batch-rows", args.batch_rows),
                        ("--micro-batch-tokens", args.micro_batch_tokens), ("--lora-r", args.lora_r)):
        if value < 1:
            raise UsageError(f"{name} must be >= 1, got {value}")
    if args.lr <= 0:
        raise UsageError(f"--lr must be > 0, got {args.lr}")
    from ..models.loading import resolve_model_path

    # text-level episodes (a chat model's) are rendered with the student's own chat template
    rows = load_sft_rows(args.files, tokenizer=str(resolve_model_path(args.model)))
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
    from ..evaluation.evaluate import evaluate
    from ..run.assembly import config_for
    from ..tasks import load_tasks

    config = args.config
    if config is None and args.prompt_policy and Path(args.prompt_policy, "config.yaml").is_file():
        config = str(Path(args.prompt_policy, "config.yaml"))  # the prompt run's agent, reward and tasks
    cfg = config_for(args.model, config, args.overrides)
    task_file = args.tasks or cfg.data.val_file
    if not task_file:
        raise UsageError("no held-out tasks: give --tasks or a configuration with data.val_file")
    tasks = load_tasks(task_file, question_field=cfg.data.question_field)[: args.max_tasks]
    baseline = args.baseline or cfg.model.path
    res = evaluate(args.model, baseline, tasks, cfg, samples=args.samples or cfg.validation.k, seed=args.seed,
                   alpha=args.alpha, workers=args.workers, slots=args.slots, out_dir=args.out,
                   prompt_policy=args.prompt_policy, retries=args.retries, backoff_s=args.retry_backoff)
    d = res["difference"]
    t = res["sampling"]["temperature"]
    # named as status and the train summary name validation's figure: the two agree only on the same
    # tasks, samples and temperature
    print(f"success = pass@1 over {res['tasks']} tasks x {res['samples_per_task']} samples "
          f"({'greedy' if t == 0 else f'sampled at temperature {t:g}'}), seed {res['seed']}")
    if args.prompt_policy:
        print(f"model's prompt: {res['prompt_policy']}")
    print(f"{'policy':<10} {'success (95% CI)':>17} {'reward':>7} {'tools':>6} {'tool ok':>8} {'malformed':>9} "
          f"{'turns':>6}  source")
    for name in ("model", "baseline"):
        r = res[name]
        reward = f"{r['mean_reward']:.3f}" if r["mean_reward"] is not None else "-"
        ci = ci95_text(r["success_ci95"], r["episodes"])
        print(f"{name:<10} {rate_text(r['success_rate']):>9} {ci:<10} {reward:>7} {r['tool_call_rate']:>6.2f} "
              f"{r['tool_success_rate']:>8.2f} {r['malformed_tool_call_rate']:>9.2f} {r['mean_turns']:>6.2f}  {r['policy']}")
        if r["aborted"]:
            print(f"{'':<10} {r['aborted']} episodes aborted by the serving side (outages, not failures): left out "
                  f"of every figure; run the same command again to retry them")
    if res["tasks_left_out"]:
        print(f"{res['tasks_left_out']} of {res['tasks']} tasks have no outcome on one side: compared on the others")
    print(f"difference {d['mean_difference']:+.3f} ({interval_text(d['ci95'], d['tasks'])}), p = {d['p_value']:.4f} "
          f"({d['method']}; {d['differing_tasks']} of {d['tasks']} tasks differ): "
          f"{'significant' if d['significant'] else 'not significant'} at alpha {d['alpha']:g}")
    print(f"written: {Path(args.out) / 'eval.json'}")
    return 0
