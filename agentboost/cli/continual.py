"""``continual``: the loop that learns from production (``run``, ``status``, ``propose``)."""

from __future__ import annotations

import json

from .common import UsageError, add_command, add_engine_option


def add_continual(sub) -> None:
    p = sub.add_parser("continual", help="learn from production: serve, collect, improve, A/B test, promote or "
                                         "roll back, under a budget",
                       description="The continual loop (docs/continual.md): serve the production version with "
                                   "sessions recorded, train candidates from rewarded sessions, gate them offline, "
                                   "A/B test them live with a sequential test, promote or roll back on their own.")
    csub = p.add_subparsers(dest="continual_cmd", metavar="COMMAND", required=True)
    run = add_command(csub, "run", cmd_run, help="run (or --resume) a loop",
                      description="Serve CONFIG's loop.production (default: model.path) at --port with every session "
                                  "recorded, and improve it from the rewarded sessions (the loop section of the "
                                  "configuration: `agentboost config`). Stops at loop.max_cost, loop.max_rounds or "
                                  "SIGTERM; --resume goes on where it stopped.")
    run.add_argument("config", nargs="?", help="YAML configuration (not needed with --resume)")
    run.add_argument("overrides", nargs="*", help="dotted overrides, key.sub=value (with --resume: of the loop's own)")
    run.add_argument("--out", help="the loop's directory (state, versions, served sessions)")
    run.add_argument("--resume", metavar="DIR", help="go on with the loop in DIR")
    run.add_argument("--host", default="127.0.0.1", help="address to serve on (default: loopback)")
    run.add_argument("--port", type=int, default=8000, help="port to serve on (default: 8000)")
    run.add_argument("--token", help="the bearer token clients send (default: $AGENTBOOST_SERVE_TOKEN, else one "
                                     "made for the loop in DIR/token)")
    run.add_argument("--max-batch-size", type=int, default=8, help="hf engine: requests decoded together (default: 8)")
    add_engine_option(run)
    st = add_command(csub, "status", cmd_status, help="a loop's versions, lineage, costs and sessions",
                     description="Every version of the loop in DIR: parent, how it was made, the sessions it "
                                 "learned from, its gate and live test, its cost; the sessions served, rewarded "
                                 "and never trained on.")
    st.add_argument("dir", help="the loop's directory")
    st.add_argument("--json", action="store_true", help="print the report as JSON")
    pr = add_command(csub, "propose", cmd_propose, help="propose a candidate to a loop (or a rollback drill)",
                     description="Give the loop in DIR a candidate to gate and test next: a checkpoint "
                                 "(RUN_DIR[:CHECKPOINT] or a model), or with --noise a copy of its production "
                                 "version with Gaussian noise added to its weights (a drill of the rollback).")
    pr.add_argument("dir", help="the loop's directory")
    pr.add_argument("spec", nargs="?", help="RUN_DIR[:CHECKPOINT] or a model")
    pr.add_argument("--noise", type=float, help="a noised copy of production: the noise's standard deviation")
    pr.add_argument("--skip-gate", action="store_true", help="straight to the live test (a drill of the rollback)")
    pr.add_argument("--seed", type=int, default=0, help="the noise's seed (default: 0)")


def cmd_run(args) -> int:
    from ..continual.loop import ContinualLoop, report_text
    from ..run.config import load_config

    if args.resume:
        if args.config and "=" not in args.config:
            raise UsageError("--resume continues with the loop's own configuration: give overrides only")
        overrides = ([args.config] if args.config else []) + list(args.overrides)
        loop = ContinualLoop(None, args.resume, resume=True, host=args.host, port=args.port, token=args.token,
                             engine=args.engine, max_batch_size=args.max_batch_size, overrides=overrides)
    else:
        if not args.config or not args.out:
            raise UsageError("give a configuration and --out DIR (or --resume DIR)")
        cfg = load_config(args.config, list(args.overrides), for_training=False)  # it trains from sessions
        loop = ContinualLoop(cfg, args.out, host=args.host, port=args.port, token=args.token, engine=args.engine,
                             max_batch_size=args.max_batch_size)
    loop.stop_on_signals()
    print(report_text(loop.run()), flush=True)
    return 0


def cmd_status(args) -> int:
    from ..continual.loop import loop_report, report_text

    r = loop_report(args.dir)
    print(json.dumps(r, indent=1) if args.json else report_text(r))
    return 0


def cmd_propose(args) -> int:
    from ..continual.loop import propose

    path = propose(args.dir, args.spec, args.noise, args.skip_gate, seed=args.seed)
    print(f"proposed: {path}")
    return 0
