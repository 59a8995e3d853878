"""``agentboost eval`` with chat models we do not train (``agentboost.models.chat``), against the real
vLLM CPU server's chat endpoint serving the embedded model through Strands' own OpenAI provider:
an evaluation that resumes after SIGKILL with the uninterrupted run's report, an endpoint that
stops halfway (its episodes ``aborted``, counted, left out of every figure, run again on the next
call), and a planted API key that appears in no file the runs wrote."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers import CHAT_KEY, CHAT_KEY_ENV, CLI, cli

from agentboost.episodes.record import Status, read_episodes
from agentboost.models.chat import ChatModelError, chat_model_spec
from agentboost.testing.chaos import temporaries, torn_or_invalid

pytestmark = pytest.mark.vllm

KEY_ENV, KEY = CHAT_KEY_ENV, CHAT_KEY  # the server requires the key: a run without it cannot pass
TASKS = ("--tasks", "examples/quickstart/data/test.jsonl", "--max-tasks", "2", "--samples", "2")
# an episode budget past the server's 4,096-token context: a chat model's call is limited by the
# per-turn max_new_tokens, never by the episode's budget (which the server would refuse)
SMALL = ("--slots", "1", "validation.max_new_tokens=24", "agent.max_response_tokens=8192")


class Proxy:
    """A loopback HTTP proxy in front of the server, on a fixed port, that can stop like a crashed
    endpoint: after ``budget`` requests it drops the connection and stops listening."""

    def __init__(self, upstream: str):
        from aiohttp import web

        self.upstream, self.budget, self.requests = upstream, None, 0
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self.runner = web.AppRunner(app)
        self._call(self.runner.setup())
        self.site = None
        self.port = None
        self.start()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def start(self, budget: int | None = None):
        from aiohttp import web

        self.budget, self.requests = budget, 0
        if self.site is not None:
            self._call(self.site.stop())
        self.site = web.TCPSite(self.runner, "127.0.0.1", self.port or 0)
        self._call(self.site.start())
        self.port = self.site._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"

    async def _forward(self, request):
        import aiohttp
        from aiohttp import web

        self.requests += 1
        if self.budget is not None and self.requests > self.budget:
            if self.site is not None:
                site, self.site = self.site, None
                self.loop.create_task(site.stop())  # no new connections from now on
            request.transport.close()  # and this one is dropped
            return web.Response(status=503)
        async with aiohttp.ClientSession() as s:
            async with s.request(request.method, self.upstream + request.path_qs, data=await request.read(),
                                 headers={k: v for k, v in request.headers.items() if k.lower() != "host"}) as r:
                return web.Response(body=await r.read(), status=r.status, content_type=r.content_type)


def chat_spec(url: str) -> str:
    return json.dumps({"provider": "openai", "model_id": "base", "base_url": url, "api_key_env": KEY_ENV,
                       "max_retries": 1, "timeout_s": 30})


def report(out: Path) -> dict:
    res = json.loads((out / "eval.json").read_text())
    res.pop("wall_s")  # the one figure a rerun cannot repeat
    return res


@pytest.mark.slow
def test_chat_models_in_eval_resume_after_sigkill_and_count_outages(tmp_path, chat_server):
    proxy = Proxy(chat_server.url)
    model, baseline = chat_spec(chat_server.url + "/v1"), chat_spec(proxy.url)
    args = ("eval", "--model", model, "--baseline", baseline, *TASKS, *SMALL, "--retries", "1",
            "--retry-backoff", "0.2")

    # uninterrupted
    r = cli(*args, "--out", tmp_path / "a")
    assert r.returncode == 0, r.stderr[-3000:]
    full = report(tmp_path / "a")
    assert full["model"]["episodes"] == full["baseline"]["episodes"] == 4
    assert full["model"]["aborted"] == full["baseline"]["aborted"] == 0
    eps = list(read_episodes(tmp_path / "a" / "baseline_episodes.jsonl"))
    assert all(ep.text_level and not ep.calls and not ep.segments and ep.messages for ep in eps)
    # every call was answered (none refused for asking more tokens than the server's context)
    both = eps + list(read_episodes(tmp_path / "a" / "model_episodes.jsonl"))
    assert not [(ep.status, ep.error) for ep in both if ep.status == Status.ERROR]
    assert "openai:base" in r.stdout

    # the baseline's endpoint stops after 2 requests: its unfinished episodes are aborted, retried
    # once, then counted and left out of every figure; never scored 0
    out = tmp_path / "b"
    proxy.start(budget=2)
    r = cli(*args, "--out", out)
    assert r.returncode == 0, r.stderr[-3000:]
    res = report(out)
    base = list(read_episodes(out / "baseline_episodes.jsonl"))
    aborted = [ep for ep in base if ep.status == Status.ABORTED]
    finished = {(ep.task_id, ep.metadata["sample"]) for ep in base if not ep.aborted}
    assert aborted and 1 <= len(finished) < 4
    assert res["baseline"]["aborted"] == 4 - len(finished) and res["baseline"]["episodes"] == len(finished)
    assert res["model"] == full["model"]  # the model's side did not notice
    assert all(ep.reward is None and "serving side unavailable" in ep.error for ep in aborted)
    scored = [ep for ep in base if not ep.aborted]
    assert res["baseline"]["success_rate"] == pytest.approx(sum(ep.succeeded for ep in scored) / len(scored))
    assert "retrying them in 0.2 s" in r.stdout + r.stderr
    assert "aborted by the serving side" in r.stdout

    # the endpoint is back; the same command, killed after one more episode, then again: the
    # aborted ones ran, nothing else did, and the report is the uninterrupted run's
    proxy.start()
    episodes = out / "baseline_episodes.jsonl"
    lines = len(episodes.read_text().splitlines())
    p = subprocess.Popen([*CLI, *map(str, args), "--out", str(out)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and len(episodes.read_text().splitlines()) == lines:
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert len(episodes.read_text().splitlines()) > lines
    done = len({(ep.task_id, ep.metadata["sample"]) for ep in read_episodes(episodes) if not ep.aborted})
    r = cli(*args, "--out", out)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"{done} of 4 episodes already finished" in r.stdout + r.stderr
    assert len(list(read_episodes(out / "model_episodes.jsonl"))) == 4  # the model's side ran once
    assert report(out) == full
    assert torn_or_invalid(out) == [] and temporaries(out) == []  # the chaos suite's audit: nothing half-written

    # the key the server demands was used by every request, and written nowhere
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f"the API key leaked into {f}"
    assert json.loads((tmp_path / "a" / "eval_args.json").read_text())["baseline"]["api_key_env"] == KEY_ENV


@pytest.mark.slow
def test_ctrl_c_during_eval_ends_in_one_line_and_keeps_every_finished_episode(tmp_path, chat_server):
    args = ("eval", "--model", chat_spec(chat_server.url + "/v1"), "--baseline", chat_spec(chat_server.url + "/v1"),
            *TASKS, *SMALL, "--out", tmp_path / "out")
    episodes = tmp_path / "out" / "model_episodes.jsonl"
    # Ctrl-C in a terminal: SIGINT to the whole foreground process group (the pool's workers too)
    p = subprocess.Popen([*CLI, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and not (episodes.is_file() and episodes.read_text().strip()):
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130 and err.strip().splitlines()[-1] == "agentboost eval: interrupted", err[-3000:]
    assert "Traceback" not in out + err, (out + err)[-3000:]
    kept = {(ep.task_id, ep.metadata["sample"]) for ep in read_episodes(episodes)}  # every line whole
    assert kept
    r = cli(*args)  # the same command resumes: what finished is not run again
    assert r.returncode == 0, r.stderr[-3000:]
    if len(kept) < 4:
        assert f"{len(kept)} of 4 episodes already finished" in r.stdout + r.stderr
    assert len(list(read_episodes(episodes))) == 4


def _dead_url() -> str:
    """A loopback endpoint nothing listens on (bound, then closed): a judge service that is down."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


@pytest.mark.slow
def test_a_group_judged_eval_writes_each_episode_once_with_its_score_and_resumes_unjudged(tmp_path, chat_server):
    """A group-ranking judge scores a task's episodes together after they ran: the episodes file
    then holds each (task, sample) once, with the judge's score, and a rerun with the judge down
    runs and judges nothing (a judge call would abort the group) and reads the same scores back."""
    from agentboost.evaluation.evaluate import run_policy
    from agentboost.run.config import load_config
    from agentboost.tasks import load_tasks

    one = {"type": "object", "required": ["score", "reason"],
           "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1},
                          "reason": {"type": "string", "maxLength": 40}}}
    schema = {"type": "object", "required": ["1", "2"], "properties": {"1": one, "2": one},
              "additionalProperties": False}

    def cfg(url):
        judge = {"model": {"provider": "openai", "model_id": "base", "base_url": url, "api_key_env": KEY_ENV,
                           "max_retries": 0, "params": {"response_format": {
                               "type": "json_schema", "json_schema": {"name": "grade", "schema": schema}}}},
                 "rubric": "Score 1 when the final answer is the correct number, else 0.", "mode": "group",
                 "max_tokens": 120}
        return load_config(None, ["reward.name=judge", f"reward.judge={json.dumps(judge)}",
                                  "validation.max_new_tokens=24", "agent.max_response_tokens=24"], for_training=False)

    tasks = load_tasks("examples/quickstart/data/test.jsonl")[:1]
    out = tmp_path / "model_episodes.jsonl"
    model, live, dead = chat_spec(chat_server.url + "/v1"), chat_server.url + "/v1", _dead_url()

    def run(judge_url):
        return run_policy(model, tasks, cfg(judge_url), samples=2, seed=0, workers=1, slots=2, out=out,
                          log=lambda m: None, retries=0)

    eps = run(live)
    assert all(not (ep.failed or ep.aborted) and 0 <= ep.reward <= 1 for ep in eps), [ep.error for ep in eps]
    assert sorted(ep.reward_metadata["judge"]["calls"] for ep in eps) == [0, 1]  # one call for the group
    written = list(read_episodes(out))
    assert [(ep.task_id, ep.metadata["sample"], ep.reward) for ep in written] == \
        [(ep.task_id, ep.metadata["sample"], ep.reward) for ep in eps]  # each once, with its score
    text = out.read_text()

    again = run(dead)  # nothing left to run or judge: a judge call would abort the group
    assert [(ep.status, ep.reward) for ep in again] == [(ep.status, ep.reward) for ep in eps]
    assert out.read_text() == text


def test_a_missing_key_or_a_key_in_the_config_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    spec = json.dumps({"provider": "openai", "model_id": "m", "base_url": "http://127.0.0.1:9/v1",
                       "api_key_env": KEY_ENV})
    r = cli("eval", "--model", spec, "--baseline", spec, *TASKS, "--out", tmp_path / "x", env=env)
    assert r.returncode == 2 and f"{KEY_ENV} (api_key_env) is not set" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x" / "model_episodes.jsonl").exists()  # refused before anything ran
    for bad, match in (({"client_args": {"api_key": "sk-x"}}, "client_args.api_key holds a secret"),
                       ({"provider": "nope"}, "provider 'nope' is not one of openai"),
                       ({"temperature": 1}, "unknown key 'temperature'")):
        with pytest.raises(ChatModelError, match=match):
            chat_model_spec({"provider": "openai", "model_id": "m", **bad})
