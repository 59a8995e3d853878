"""``serve`` (a trained policy, or an A/B test of two, behind the OpenAI chat API; or, with
``--model``, a model behind the token-level ``/v1/completions`` route), ``export-model`` and ``ab``
(``report``, ``split``)."""

from __future__ import annotations

import json
import os
import sys

from .common import UsageError, add_command, add_engine_option


def add_serve(sub) -> None:
    p = add_command(sub, "serve", cmd_serve,
                    help="serve a trained policy (or an A/B test) over the OpenAI chat API",
                    description="Serve RUN_DIR[:CHECKPOINT] (best, latest, step_000012) or a model behind an "
                                "OpenAI-compatible /v1/chat/completions (streaming, tools) and /v1/models, so any "
                                "agent uses it by base URL; --ab serves two arms split by session. With --model, "
                                "serve a model behind the token-level /v1/completions route (vLLM's contract, "
                                "for agentboost's own samplers).")
    p.add_argument("policy", nargs="?", help="RUN_DIR[:CHECKPOINT], a model directory or an embedded model name")
    p.add_argument("--ab", nargs=2, metavar="ARM=SPEC",
                   help="an A/B test: baseline=MODEL_OR_RUN experiment=RUN_DIR:best")
    p.add_argument("--split", type=float, default=None, help="the experiment's share of sessions (default: 0.5); "
                                                             "change it live with `agentboost ab split`")
    p.add_argument("--min-effect", type=float, default=None,
                   help="the minimum success-rate difference declared before the test (ab report says if reached)")
    p.add_argument("--out", default="serve", help="directory of the event log ab.jsonl (default: serve)")
    p.add_argument("--config", help="training YAML for a plain model's agent settings and reward "
                                    "(a run's arm uses the run's config.yaml)")
    p.add_argument("--prompt-policy", metavar="PATH",
                   help="serve with this prompt policy (docs/prompt-policy.md): its instructions after the client's "
                        "system prompt (its own prompt when the client sends none), its demonstration turns before "
                        "the client's messages; a prompt_policy.json, a checkpoint or a prompt-training run "
                        "directory (whose config.yaml is then the default --config and whose model the default "
                        "policy); with --ab, the experiment arm's")
    p.add_argument("--max-tokens", type=int, help="tokens per answer (default: the config's validation.max_new_tokens)")
    p.add_argument("--temperature", type=float, help="sampling temperature (default: validation.temperature)")
    p.add_argument("--token", help="bearer token the clients must send (default: $AGENTBOOST_SERVE_TOKEN; "
                                   "required off loopback)")
    p.add_argument("--max-request-bytes", type=int, default=1 << 20, help="larger requests get 413 (default: 1 MiB)")
    p.add_argument("--rate-limit", type=float, default=0.0,
                   help="requests per second per user (the request's user), else per session, else per client "
                        "address (0: none)")
    p.add_argument("--record", action="store_true",
                   help="record every session as a token-exact episode in OUT/sessions.jsonl, with its arm, policy "
                        "and outcome (off by default; docs/continual.md says what is stored)")
    p.add_argument("--reconfigurable", action="store_true",
                   help="let token holders change the arms live (POST /v1/admin/arms: the job service's "
                        "deployments); needs --token")
    p.add_argument("--served-name", default="agentboost", help="the model name /v1/models gives (default: agentboost)")
    p.add_argument("--model", help="token-level mode: serve this model behind /v1/completions")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    p.add_argument("--max-batch-size", type=int, default=8, help="hf engine: requests decoded together (default: 8)")
    add_engine_option(p)


def _wait_forever() -> None:
    """Until Ctrl-C or SIGTERM (a service manager's stop): both end the wait, so the engines close."""
    import signal
    import threading

    def stop(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass


def cmd_serve(args) -> int:
    if args.model:
        if args.policy or args.ab:
            raise UsageError("--model serves /v1/completions alone; give either --model or a policy (or --ab)")
        if args.prompt_policy:
            raise UsageError("--prompt-policy goes into chat turns; --model serves token ids (/v1/completions), "
                             "which have none: serve the model as a policy (agentboost serve MODEL --prompt-policy PATH)")
        from ..sampling.policy_server import start_policy_server

        _, ps = start_policy_server(args.engine, args.model, served_name=args.model,
                                    max_batch_size=args.max_batch_size, host=args.host, port=args.port)
        with ps:
            print(f"serving {args.model} at {ps.url}/v1/completions (Ctrl-C to stop)", flush=True)
            _wait_forever()
        return 0
    from ..serving.router import build_router, check_bind, check_split

    token = args.token or os.environ.get("AGENTBOOST_SERVE_TOKEN") or None
    check_bind(args.host, token)
    if args.prompt_policy:
        from pathlib import Path

        from ..run.prompt_policy import load_prompt_policy

        load_prompt_policy(args.prompt_policy)  # a bad file fails before any model loads
        run_config = Path(args.prompt_policy, "config.yaml")
        if run_config.is_file():  # a prompt run: its agent settings and validation sampling, its model
            args.config = args.config or str(run_config)
            if not args.policy and not args.ab:
                from ..run.config import load_config

                run_cfg = load_config(str(run_config))
                if run_cfg.prompt.policy_model:
                    raise UsageError(f"{args.prompt_policy} trained the prompt of a chat model we do not serve "
                                     f"(prompt.policy_model: {run_cfg.prompt.policy_model.get('model_id')}); "
                                     "name the model to serve, or apply prompt_policy.json in your client")
                args.policy = run_cfg.model.path
    if bool(args.policy) == bool(args.ab):
        raise UsageError("give one policy to serve (RUN_DIR[:CHECKPOINT] or a model) or --ab baseline=... experiment=...")
    if args.split is not None:
        if not args.ab:
            raise UsageError("--split is the experiment's share of an A/B test: it needs --ab")
        check_split(args.split)
    arms: dict[str, str] = {}
    for item in args.ab or [f"policy={args.policy}"]:
        name, sep, spec = item.partition("=")
        if not sep or not spec or name in arms:
            raise UsageError(f"--ab takes baseline=SPEC experiment=SPEC, got {item!r}")
        arms[name] = spec
    if args.ab and set(arms) != {"baseline", "experiment"}:
        raise UsageError(f"--ab takes the arms baseline and experiment, got {', '.join(arms)}")
    overrides = ([f"validation.max_new_tokens={args.max_tokens}"] if args.max_tokens else []) + (
        [f"validation.temperature={args.temperature}"] if args.temperature is not None else [])
    router = build_router(arms, engine=args.engine, config=args.config, overrides=overrides,
                          max_batch_size=args.max_batch_size, split=args.split, out_dir=args.out, token=token,
                          served_name=args.served_name, max_request_bytes=args.max_request_bytes,
                          rate_limit=args.rate_limit, min_effect=args.min_effect, reconfigurable=args.reconfigurable,
                          record=args.record,
                          prompt_policies={"experiment" if args.ab else "policy": args.prompt_policy}
                          if args.prompt_policy else None)
    try:
        url = router.start_in_thread(args.host, args.port)
        what = (f"A/B test, experiment share {router.split:g}, events in {router.events.path}" if router.ab
                else router.policies["policy"].description)
        if "policy" in router.prompt_policies:
            what += f" with {router.prompt_policies['policy'].summary()} ({args.prompt_policy})"
        if router.unconfirmed_at_start:
            print(f"warning: {router.unconfirmed_at_start} recorded session(s) were being answered when the server "
                  "last stopped: whether their last answer reached the client is unknown; kept as incomplete, never "
                  "trained on", flush=True)
        print(f"serving {what} at {url}/v1 (chat completions; Ctrl-C to stop)", flush=True)
        _wait_forever()
    finally:
        router.close()
    return 0


def add_export_model(sub) -> None:
    p = add_command(sub, "export-model", cmd_export_model, help="a checkpoint as a merged Hugging Face model directory",
                    description="Write RUN_DIR[:CHECKPOINT] (best, latest, step_000012) as a Hugging Face model "
                                "directory with the LoRA adapter merged in and the tokenizer beside it, which "
                                "transformers and `vllm serve` load as is.")
    p.add_argument("policy", help="RUN_DIR[:CHECKPOINT]")
    p.add_argument("--out", required=True, help="output model directory")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it is not empty")


def cmd_export_model(args) -> int:
    from ..serving.model_export import export_model

    res = export_model(args.policy, args.out, overwrite=args.overwrite)
    print(f"exported {res['description']} to {res['out']}" + (" (LoRA merged)" if res["merged_lora"] else ""))
    return 0


def add_ab(sub) -> None:
    p = sub.add_parser("ab", help="A/B tests served by `serve --ab`",
                       description="Report on an A/B test, or change its split live.")
    asub = p.add_subparsers(dest="ab_cmd", metavar="COMMAND", required=True)
    rep = add_command(asub, "report", cmd_ab_report, help="per-arm figures and the difference with its CI and p-value",
                      description="Read a serving directory's ab.jsonl: per arm sessions, calls, errors, latency, "
                                  "tokens, success and reward with 95% CIs; the difference experiment - baseline "
                                  "with its CI and p-value (the unpaired counterpart of eval's test) and whether "
                                  "the minimum effect is reached.")
    rep.add_argument("dir", help="the serving directory (serve --out) or its ab.jsonl")
    rep.add_argument("--alpha", type=float, default=0.05, help="significance level (default: 0.05)")
    rep.add_argument("--json", action="store_true", help="print the report as JSON")
    sp = add_command(asub, "split", cmd_ab_split, help="change a running A/B test's split (logged)",
                     description="Set the experiment's share of new sessions on a running `serve --ab`; sessions "
                                 "already assigned keep their arm.")
    sp.add_argument("split", type=float, help="the experiment's new share, in [0, 1]")
    sp.add_argument("--url", default="http://127.0.0.1:8000", help="the server (default: http://127.0.0.1:8000)")
    sp.add_argument("--token", help="its bearer token (default: $AGENTBOOST_SERVE_TOKEN)")


def cmd_ab_report(args) -> int:
    from pathlib import Path

    from ..serving.report import ab_report, report_text
    from ..serving.router import EVENTS

    path = Path(args.dir)
    path = path / EVENTS if path.is_dir() else path
    if not path.is_file():
        raise UsageError(f"{args.dir}: no {EVENTS} (give the directory serve --out wrote)")
    r = ab_report(path, alpha=args.alpha)
    print(json.dumps(r, indent=1) if args.json else report_text(r))
    return 0


def cmd_ab_split(args) -> int:
    import urllib.error
    import urllib.request

    token = args.token or os.environ.get("AGENTBOOST_SERVE_TOKEN")
    req = urllib.request.Request(args.url.rstrip("/") + "/v1/ab/split", method="POST",
                                 data=json.dumps({"split": args.split, "by": "agentboost ab split"}).encode(),
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            res = json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise UsageError(f"{args.url}: {e.code}: {e.read().decode(errors='replace')[:300]}") from None
    except urllib.error.URLError as e:
        raise UsageError(f"{args.url}: {e.reason}") from None
    print(f"split {res['from']:g} -> {res['to']:g}", file=sys.stdout)
    return 0
