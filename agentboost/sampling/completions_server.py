"""A vLLM-compatible ``/v1/completions`` server on top of the local engine.

It honours the part of vLLM's contract that token-in/token-out rollouts use: the prompt as a list
of token ids, ``max_tokens``, ``temperature``, ``top_p``, ``stop_token_ids``, ``seed``,
``logprobs`` with ``return_tokens_as_token_ids`` (tokens reported as ``"token_id:<id>"``) and
``return_token_ids`` (``token_ids`` and ``prompt_token_ids`` on each choice). Worker processes
reach the trainer's policy through it; ``agentboost serve`` runs it standalone.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import threading
import time
import uuid
from typing import Any

from aiohttp import web

from ..files import loads_json
from .hf_engine import HFEngine
from .protocol import PromptTooLongError, SamplerError, SamplingParams

log = logging.getLogger(__name__)


MAX_REQUEST_BYTES = 64 * 1024 * 1024


class BadRequest(ValueError):
    pass


def _parse_request(body: Any) -> tuple[list[int], SamplingParams, dict[str, Any]]:
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list):
        prompt = prompt[0]
    if not (isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)):
        raise BadRequest("'prompt' must be a non-empty list of token ids (text prompts are not served)")
    if body.get("n", 1) != 1:
        raise BadRequest("'n' must be 1")
    try:
        params = SamplingParams(
            temperature=float(body.get("temperature", 1.0)),
            top_p=float(body.get("top_p", 1.0)),
            max_new_tokens=int(body.get("max_tokens", 16)),
            stop_token_ids=tuple(body.get("stop_token_ids") or ()),
            seed=body.get("seed"),
        )
    except (TypeError, ValueError) as e:
        raise BadRequest(str(e)) from None
    return prompt, params, body


_frozen = False
FULL_COLLECTION_EVERY = 100  # collections of the middle generation per full one (CPython's default: 10)


def freeze_startup_objects() -> None:
    """Once per process, when its first server starts, the garbage collector is set for serving:
    the objects that exist then (the imported libraries: torch, transformers, Strands, about 400,000
    of them) are moved out of its view (``gc.freeze``, after a collection), and a full collection
    waits for ``FULL_COLLECTION_EVERY`` collections of the middle generation instead of 10. A full
    collection stops the whole process, and in a server every request that arrives meanwhile waits:
    over the imported objects it took about 250 ms, over a thousand sessions' own state still about
    100 ms, and together they were the 99th percentile of a call's time (benchmarks/
    gateway_overhead.py --sessions 1000). The young generations are collected as before, and frozen
    objects are still freed when their last reference goes; only cycles among old objects wait
    longer to be found. ``AGENTBOOST_GC_FREEZE=0`` leaves the collector as it is."""
    global _frozen
    if not _frozen and os.environ.get("AGENTBOOST_GC_FREEZE", "1") != "0":
        gc.collect()
        gc.freeze()
        young, middle, full = gc.get_threshold()
        gc.set_threshold(young, middle, max(full, FULL_COLLECTION_EVERY))
        _frozen = True


class BackgroundServer:
    """The subclass's aiohttp ``app`` served on a loopback port (``start``/``stop`` on the caller's
    event loop, or ``start_in_thread`` from a background thread with its own loop, so the caller's
    loop stays free to run agents, tests or the trainer). The completions server, the gateway and
    ``serve``'s router all serve this way."""

    _thread_name = "agentboost-server"
    # a client that goes away cancels its handler: the gateway marks that call's episode incomplete
    _handler_cancellation = False
    # when the server stops, requests in flight get this long to finish; then their handlers are
    # cancelled (aiohttp's shutdown_timeout, 60 s by default). ``stop_thread`` waits for all of it, so
    # what its caller closes next (a router's policies and recorder) is never closed under a request.
    drain_s: float = 10.0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _runner: web.AppRunner | None = None
    url: str | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        freeze_startup_objects()
        self._runner = web.AppRunner(self.app, access_log=None, handler_cancellation=self._handler_cancellation,
                                     shutdown_timeout=self.drain_s)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # the real port when port=0
        self.url = f"http://{host}:{bound}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start_in_thread(self, host: str = "127.0.0.1", port: int = 0) -> str:
        ready = threading.Event()
        err: list[BaseException] = []

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(self.start(host, port))
            except BaseException as e:  # reported to the caller below
                err.append(e)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self.stop())
            # aiohttp cancels a handler that outlasts the drain without waiting for it: let every task
            # left end (as asyncio.run does) rather than close the loop under it ("Task was destroyed
            # but it is pending" on stderr)
            left = asyncio.all_tasks(self._loop)
            for task in left:
                task.cancel()
            if left:
                self._loop.run_until_complete(asyncio.wait(left, timeout=10))
            self._loop.close()

        self._thread = threading.Thread(target=run, name=self._thread_name, daemon=True)
        self._thread.start()
        ready.wait()
        if err:
            raise err[0]
        assert self.url is not None
        return self.url

    def stop_thread(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            # the drain, then the cancelled handlers' own ends: a join shorter than the drain returned
            # while a request was still being answered (it waited 10 s, aiohttp drained for 60)
            self._thread.join(timeout=self.drain_s + 30)
            if self._thread.is_alive():
                log.warning("%s: still answering %.0f s after the drain began; closing anyway",
                            self._thread_name, self.drain_s + 30)
            self._thread = None


class CompletionsServer(BackgroundServer):
    _thread_name = "agentboost-completions"

    def __init__(self, engine: HFEngine, model_name: str = "agentboost-policy"):
        self.engine = engine
        self.model_name = model_name
        # which trained weights the engine serves, where the trainer says (the rLLM path's CPU
        # rollout, integrations/rllm/cpu.py): reported in every response, recorded on every call
        self.weight_version: int | None = None
        self.weight_fingerprint: str | None = None  # the verified digest of those weights (run/verify.py)
        # the prompt comes as token ids, ~7 bytes each in JSON: aiohttp's default 1 MiB would refuse
        # a 150k-token agent context; the model's own context limit is what bounds a prompt
        self.app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        self.app.router.add_post("/v1/completions", self._completions)
        self.app.router.add_get("/v1/models", self._models)
        self.app.router.add_get("/health", self._health)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self.url: str | None = None

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model_name, "object": "model"}]})

    async def _completions(self, request: web.Request) -> web.Response:
        try:
            prompt, params, body = _parse_request(await request.json(loads=loads_json))
        except BadRequest as e:
            return _error(400, str(e))
        except ValueError:
            return _error(400, "request body is not valid JSON")
        try:
            version = self._pinned_version(body.get("model"))
            res = await asyncio.wrap_future(self.engine.submit(prompt, params, version=version))
        except SamplerError as e:
            return _error(400 if isinstance(e, PromptTooLongError) else 500, str(e))
        tok = self.engine.tokenizer
        choice: dict[str, Any] = {
            "index": 0,
            "text": tok.decode(res.response_ids, skip_special_tokens=True),
            "finish_reason": res.finish_reason,
            "stop_reason": None,
            "logprobs": None,
        }
        if body.get("logprobs") is not None:
            if body.get("return_tokens_as_token_ids"):
                tokens = [f"token_id:{t}" for t in res.response_ids]
            else:
                tokens = tok.convert_ids_to_tokens(res.response_ids)
            choice["logprobs"] = {"tokens": tokens, "token_logprobs": res.logprobs,
                                  "top_logprobs": None, "text_offset": None}
        if body.get("return_token_ids"):
            choice["token_ids"] = res.response_ids
            choice["prompt_token_ids"] = prompt
        out: dict[str, Any] = {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [choice],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(res.response_ids),
                      "total_tokens": len(prompt) + len(res.response_ids)},
        }
        if res.weight_version is not None:  # a pinned version's snapshot sampled it
            out["weight_version"] = res.weight_version
        elif self.weight_version is not None:
            out["weight_version"] = self.weight_version
        if self.weight_fingerprint is not None:
            out["weight_fingerprint"] = self.weight_fingerprint
        return web.json_response(out)

    def _pinned_version(self, model: Any) -> int | None:
        """``<model name>@<version>`` names a published weights snapshot (an episode pinned to the
        version it started on, ``rollout.max_staleness``), as a LoRA adapter's name does on vLLM;
        any other name is the live model."""
        if isinstance(model, str) and model.startswith(self.model_name + "@"):
            tail = model[len(self.model_name) + 1:]
            if tail.isdigit():
                return int(tail)
            raise SamplerError(f"model {model!r}: expected {self.model_name}@<weights version>")
        return None



def _error(status: int, message: str) -> web.Response:
    return web.json_response({"object": "error", "message": message, "code": status}, status=status)
