"""The one JSONL reader, atomic writes, the Status enum and Episode.succeeded, named errors vs
tracebacks on the command line, and the HTTP sampler's request as gateways read it."""

import asyncio
import json
import subprocess
import sys

import pytest
from aiohttp import web
from helpers import cli, serve_app

from agentboost.episodes.record import (
    Episode,
    EpisodeFileError,
    Status,
    read_episodes,
    write_episodes,
)
from agentboost.errors import InputError
from agentboost.files import atomic_directory, iter_jsonl
from agentboost.sampling.http_sampler import HttpSampler
from agentboost.sampling.protocol import SamplingParams


def test_jsonl_reader_names_file_and_line(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"a": 1}\n\n{"a": 2\n')
    rows = iter_jsonl(f)
    assert next(rows) == (1, {"a": 1})
    with pytest.raises(ValueError, match=r"x.jsonl:3: invalid JSON"):
        next(rows)
    with pytest.raises(EpisodeFileError, match="no such episode file"):
        list(read_episodes(tmp_path / "missing.jsonl"))
    f.write_text('{"schema_version": 1, "episode_id": "e", "task_id": "t", "group_id": "g", "status": "lost"}\n')
    with pytest.raises(EpisodeFileError, match=r"x.jsonl:1: not a valid episode record: episode status must be one of"):
        list(read_episodes(f))


def test_atomic_directory_publishes_whole_or_not_at_all(tmp_path):
    final = tmp_path / "model"
    with atomic_directory(final) as d:
        (d / "a.txt").write_text("one")
    assert (final / "a.txt").read_text() == "one"
    with pytest.raises(RuntimeError):
        with atomic_directory(final) as d:
            (d / "a.txt").write_text("two")
            raise RuntimeError("killed half way")
    assert (final / "a.txt").read_text() == "one"  # the old version stays
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # no temporary left behind
    with atomic_directory(final) as d:
        (d / "b.txt").write_text("new")
    assert sorted(p.name for p in final.iterdir()) == ["b.txt"]
    with pytest.raises(FileExistsError):
        with atomic_directory(final, replace=False):
            pass


def test_status_is_an_enum_that_round_trips_as_text(tmp_path):
    ep = Episode("e", "t", "g", status="timeout")
    assert ep.status is Status.TIMEOUT and ep.status == "timeout" and ep.failed
    write_episodes(tmp_path / "e.jsonl", [ep])
    assert json.loads((tmp_path / "e.jsonl").read_text())["status"] == "timeout"
    assert next(read_episodes(tmp_path / "e.jsonl")).status is Status.TIMEOUT
    assert f"{Status.OK}" == "ok" and not Status.TRUNCATED.failed
    with pytest.raises(ValueError, match="episode status must be one of"):
        Episode("e", "t", "g", status="fine")


def test_succeeded_is_a_full_outcome_success_on_an_ended_episode():
    def ep(status="ok", reward=None, components=None):
        return Episode("e", "t", "g", status=status, reward=reward, reward_components=components or {})

    assert ep(reward=1.0, components={"outcome": 1.0}).succeeded
    assert ep("truncated", 1.0, {"outcome": 1.0}).succeeded
    # shaping does not make a success: the outcome decides
    assert not ep(reward=1.1, components={"outcome": 0.9, "tool_success": 0.2}).succeeded
    assert ep(reward=1.0, components={"outcome": 1.0, "length": -0.1}).succeeded
    assert not ep("timeout", 1.0, {"outcome": 1.0}).succeeded and not ep(reward=None).succeeded


def test_bad_input_is_one_line_and_an_internal_error_keeps_its_traceback(tmp_path):
    r = cli("check", str(tmp_path / "nope.jsonl"))
    assert r.returncode == 2 and "no such episode file" in r.stderr and "Traceback" not in r.stderr
    # a ValueError that is not bad input (a bug) must not be dressed up as a usage message
    code = ("import sys, agentboost.cli as c, agentboost.cli.episodes as e\n"
            "def boom(args): raise ValueError('internal bug')\n"
            "e.cmd_check = boom\n"  # the parser is built in main, after this
            "sys.exit(c.main(['check', 'x']))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" in r.stderr and "ValueError: internal bug" in r.stderr
    assert issubclass(EpisodeFileError, InputError)


def test_http_sampler_asks_for_logprobs_as_gateways_understand_it():
    """A gateway that treats ``logprobs: 0`` as not requested strips log-probs and token ids (as
    OpenAI-compatible gateways do); the sampler must get them back through it."""
    seen = []

    async def completions(request):
        body = await request.json()
        seen.append(body)
        choice = {"index": 0, "text": "ok", "finish_reason": "stop"}
        if body.get("logprobs"):  # 0, None or absent: "not requested"
            choice["token_ids"] = [7, 2]
            choice["logprobs"] = {"tokens": ["token_id:7", "token_id:2"], "token_logprobs": [-0.5, -0.1]}
        return web.json_response({"choices": [choice]})

    async def models(request):
        return web.json_response({"data": [{"id": "gw"}]})

    async def main():
        app = web.Application()
        app.router.add_post("/v1/completions", completions)
        app.router.add_get("/v1/models", models)
        async with serve_app(app) as url:
            sampler = HttpSampler(url)
            try:
                return await sampler.sample([1, 2, 3], SamplingParams(temperature=0.5, max_new_tokens=4))
            finally:
                await sampler.close()

    res = asyncio.run(main())
    assert seen[0]["logprobs"] == 1 and seen[0]["prompt"] == [1, 2, 3]
    assert res.response_ids == [7, 2] and res.logprobs == [-0.5, -0.1]
