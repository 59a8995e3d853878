"""``serve``: a model behind a vLLM-compatible ``/v1/completions`` route."""

from __future__ import annotations

from .common import add_command, add_engine_option


def add_serve(sub) -> None:
    p = add_command(sub, "serve", cmd_serve, help="serve a local model over a vLLM-compatible /v1/completions route",
                    description="Serve a model with the batched local engine behind vLLM's "
                                "/v1/completions contract (token-id prompts, token ids and logprobs back).")
    p.add_argument("--model", default="smollm2-135m-instruct", help="embedded name, model directory or hub id (default: smollm2-135m-instruct)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    p.add_argument("--max-batch-size", type=int, default=8, help="hf engine: requests decoded together (default: 8)")
    add_engine_option(p)


def cmd_serve(args) -> int:
    import threading

    from ..sampling.policy_server import start_policy_server

    _, ps = start_policy_server(args.engine, args.model, served_name=args.model, max_batch_size=args.max_batch_size,
                                host=args.host, port=args.port)
    with ps:
        print(f"serving {args.model} at {ps.url}/v1/completions (Ctrl-C to stop)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0
