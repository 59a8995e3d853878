"""A local stand-in for a hosted chat model: the embedded SmolLM2-135M on the vLLM CPU server's
OpenAI-compatible chat route (tool calls in hermes format, structured outputs), which is what
docs/hosted-models.md and docs/judge-rewards.md point agentboost's chat models at. It needs the vLLM
engine (``bash setup.sh --vllm``). A hosted model needs no such server: give its provider, model id
and the name of the variable that holds its key instead.

    python examples/hosted/local_chat_server.py --url-file chat.url [--api-key-env NAME] &

writes the server's base URL (``http://127.0.0.1:PORT/v1``) to ``--url-file`` once it answers, and
serves until it is stopped (the server goes with it). With ``--api-key-env``, the server demands
the key that variable holds, as a hosted one does.

Where ``AGENTBOOST_CHAT_SERVER_URL`` names the same server already running (its base URL without
``/v1``; the test suite shares one between the docs pages and its tests of chat models, and starts
it with the same options), that URL is written instead and no second server is started.
"""

import argparse
import os
import signal
import time
import urllib.request
from pathlib import Path

from agentboost.models.embedded import prepare_embedded
from agentboost.sampling.vllm_server import VLLMServer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url-file", required=True, help="where to write the base URL once the server answers")
    p.add_argument("--api-key-env", help="the variable holding the key the server demands (none: no key)")
    p.add_argument("--max-model-len", type=int, default=4096)
    args = p.parse_args()
    extra = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    if args.api_key_env:
        extra += ["--api-key", os.environ[args.api_key_env]]
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(SystemExit(0)))  # stop the server on kill
    running = os.environ.get("AGENTBOOST_CHAT_SERVER_URL")
    if running:  # the server must answer as this one would: with the key asked for, if any
        request = urllib.request.Request(f"{running.rstrip('/')}/v1/models", headers={
            "Authorization": f"Bearer {os.environ[args.api_key_env]}"} if args.api_key_env else {})
        try:
            urllib.request.urlopen(request, timeout=30).close()
        except OSError as e:
            raise SystemExit(f"local_chat_server.py: AGENTBOOST_CHAT_SERVER_URL={running} does not answer "
                             f"as this server would ({e})") from None
        _write_url(args.url_file, running)
        while True:
            time.sleep(3600)
    with VLLMServer(prepare_embedded("smollm2-135m-instruct"), kv_cache_gib=1, max_model_len=args.max_model_len,
                    extra_args=tuple(extra)) as server:
        _write_url(args.url_file, server.url)
        while True:
            time.sleep(3600)


def _write_url(url_file: str, base: str) -> None:
    tmp = Path(url_file).with_suffix(".tmp")
    tmp.write_text(f"{base.rstrip('/')}/v1\n")
    os.replace(tmp, url_file)


if __name__ == "__main__":
    main()
