"""Stopping a server that is answering (``BackgroundServer``: the completions server, the gateway and
``serve``'s router): requests in flight get ``drain_s`` to finish, then their handlers are cancelled,
and ``stop_thread`` returns only after that, so what its caller closes next (a router's policies
and session recorder) is never closed under a request. Before, it waited 10 s while aiohttp
drained for 60: a router closed its policies under a request still being answered."""

import asyncio
import threading
import time
import urllib.error
import urllib.request

from aiohttp import web

from agentboost.sampling.completions_server import BackgroundServer


class SlowServer(BackgroundServer):
    drain_s = 0.5

    def __init__(self, answer_s: float):
        self.app = web.Application()
        self.app.router.add_post("/answer", self._answer)
        self.answer_s, self.ends, self.started = answer_s, [], threading.Event()

    async def _answer(self, request: web.Request) -> web.Response:
        self.started.set()
        try:
            await asyncio.sleep(self.answer_s)
        except asyncio.CancelledError:
            self.ends.append("cancelled")
            raise
        self.ends.append("answered")
        return web.json_response({"ok": True})


def _post(url: str, got: dict) -> None:
    try:
        with urllib.request.urlopen(urllib.request.Request(url + "/answer", data=b"{}", method="POST"),
                                    timeout=30) as r:
            got["status"] = r.status
    except (urllib.error.URLError, ConnectionError) as e:
        got["error"] = repr(e)


def test_stop_drains_what_finishes_in_time_cancels_the_rest_and_returns_after_both():
    for answer_s, end in ((0.1, "answered"), (5.0, "cancelled")):
        server = SlowServer(answer_s)
        url = server.start_in_thread()
        got: dict = {}
        client = threading.Thread(target=_post, args=(url, got))
        client.start()
        assert server.started.wait(10)
        t0 = time.monotonic()
        server.stop_thread()
        took = time.monotonic() - t0
        # when stop_thread returns the handler has ended, one way or the other
        assert server.ends == [end], (answer_s, server.ends, took)
        client.join(10)
        if end == "answered":
            assert got == {"status": 200}
        else:  # cut at the drain's end (0.5 s), not answered 5 s later; the client is told
            assert took < 4 and "error" in got, (took, got)
