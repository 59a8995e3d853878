"""Served sessions recorded as token-exact episodes (``serve --record``, opt-in) with scripted arms:
what a record holds (arm, policy, outcome, task), when it is written (at an outcome, when a session
ends unscored, at a swap, at close), that ``agentboost check`` passes on it, that a server failure
and a client gone mid-answer say so in the record; and a swap of the arms while a request is in
flight fails no request (the retiring policy is closed only after its answer)."""

import json
import threading
import time

import pytest
from test_router import PARAMS, TOKEN, arm, post

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.cli import main
from agentboost.episodes.record import check_episode, read_episodes
from agentboost.sampling.scripted import ScriptedSampler, ScriptedTurn
from agentboost.serving.policies import ServedPolicy
from agentboost.serving.recording import latest_records, opening_task_id
from agentboost.serving.report import ab_report
from agentboost.serving.router import Router, ServeInputError


@pytest.fixture(scope="module")
def smollm2_tok(smollm2_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(smollm2_path))


def chat(url, sid, text="What is 2 + 3?", user=None):
    body = {"messages": [{"role": "user", "content": text}], **({"user": user} if user else {})}
    return post(url + "/v1/chat/completions", body, headers={"X-Agentboost-Session": sid})


def test_sessions_are_recorded_only_when_asked_and_pass_check(tmp_path, smollm2_tok, capsys):
    with Router({"policy": arm("v1", smollm2_tok, "The answer is 5.")}, out_dir=tmp_path / "off", token=TOKEN) as r:
        assert chat(r.url, "a")[0] == 200
    assert not (tmp_path / "off" / "sessions.jsonl").exists()  # off by default
    with pytest.raises(ServeInputError, match="needs a serving directory"):
        Router({"policy": arm("v1", smollm2_tok, "x")}, record=True)

    from agentboost.environments.strands_env import StrandsEnv

    scored = arm("v1", smollm2_tok, "The answer is 5.")
    scored.env = StrandsEnv(reward="exact_answer")
    out = tmp_path / "on"
    with Router({"policy": scored}, out_dir=out, token=TOKEN, record=True, max_sessions=2) as r:
        assert chat(r.url, "s-task", user="u1")[0] == 200
        status, _, body = post(r.url + "/v1/feedback", {"session_id": "s-task",
                                                        "task": {"task_id": "t7", "answer": "5"}})
        assert status == 200 and json.loads(body)["success"] is True
        assert chat(r.url, "s-ok")[0] == 200
        assert post(r.url + "/v1/feedback", {"session_id": "s-ok", "reward": 0.25})[0] == 200
        assert post(r.url + "/v1/feedback", {"session_id": "s-ok", "success": True, "reward": 0.5})[0] == 200
        assert chat(r.url, "s-none")[0] == 200  # no outcome: recorded when it leaves, reward null
        assert chat(r.url, "s-evicts")[0] == 200  # past max_sessions=2: the longest idle leaves (s-task)
    records = latest_records(out / "sessions.jsonl")
    lines = (out / "sessions.jsonl").read_text().splitlines()
    by_session = {r["metadata"]["served"]["session"]: r for r in records.values()}
    assert set(by_session) == {"s-task", "s-ok", "s-none", "s-evicts"}
    # s-ok was written at each outcome (the last counts); s-task at its outcome only (nothing after it);
    # each answer was written ahead too, before it was sent (superseded by those records)
    def lines_of(session, ahead):
        return sum(json.loads(x)["metadata"]["served"]["session"] == session
                   and (json.loads(x)["metadata"]["served"].get("delivery") == "unconfirmed") == ahead for x in lines)

    assert (lines_of("s-ok", False), lines_of("s-ok", True)) == (2, 1)
    assert (lines_of("s-task", False), lines_of("s-task", True)) == (1, 1)
    assert all(rec["metadata"]["served"].get("delivery") is None for rec in records.values())
    t = by_session["s-task"]
    assert t["task_id"] == t["group_id"] == "t7" and t["reward"] == 1.0
    assert t["metadata"]["served"]["arm"] == "policy" and t["metadata"]["served"]["spec"] == "v1"
    assert t["metadata"]["served"]["user"] == "u1"
    assert t["metadata"]["served"]["outcome"]["task"] == {"task_id": "t7", "answer": "5"}
    ok = by_session["s-ok"]
    assert ok["reward"] == 0.5 and ok["reward_components"] == {"outcome": 1.0}
    assert ok["metadata"]["served"]["outcome"]["source"] == "client"
    none = by_session["s-none"]
    assert none["reward"] is None and none["metadata"]["served"]["outcome"] is None
    # without a task row, a session's task is its opening: the same question is the same task
    assert none["task_id"] == ok["task_id"] == opening_task_id([{"role": "user", "content": "What is 2 + 3?"}], None)
    for rec in records.values():
        assert check_episode(rec) == [] and rec["calls"][0]["response_logprobs"]
    assert main(["check", str(out / "sessions.jsonl")]) == 0
    assert "violations=0" in capsys.readouterr().out
    assert len(list(read_episodes(out / "sessions.jsonl"))) == len(lines)


def test_a_failed_session_and_a_vanished_client_say_so(tmp_path, smollm2_tok):
    from agentboost.environments.strands_env import StrandsEnv

    def script(ids, i):
        text = smollm2_tok.decode(ids[-30:])
        if "break" in text:
            return ScriptedTurn(error="the engine fell over")
        if "slow" in text:
            return ScriptedTurn(text="late", delay_s=2.0)
        return "The answer is 5."

    p = ServedPolicy(name="v1", spec="v1", description="scripted", engine="scripted",
                     sampler=ScriptedSampler(script, smollm2_tok), renderer=ChatRenderer(smollm2_tok), sampling=PARAMS,
                     env=StrandsEnv(reward="exact_answer"))
    with Router({"policy": p}, out_dir=tmp_path, token=TOKEN, record=True) as r:
        assert chat(r.url, "s-err", "please break")[0] == 502
        # the server failed the user: scored as a failure (the failed reward), not refused
        status, _, body = post(r.url + "/v1/feedback", {"session_id": "s-err", "task": {"task_id": "t", "answer": "5"}})
        assert status == 200 and json.loads(body)["success"] is False and json.loads(body)["reward"] == 0.0
        import urllib.error
        import urllib.request

        req = urllib.request.Request(r.url + "/v1/chat/completions", method="POST",
                                     data=json.dumps({"messages": [{"role": "user", "content": "slow please"}]}).encode(),
                                     headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
                                              "X-Agentboost-Session": "s-gone"})
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            urllib.request.urlopen(req, timeout=0.5)  # the client leaves mid-answer
        time.sleep(2.5)
    by_session = {r["metadata"]["served"]["session"]: r for r in latest_records(tmp_path / "sessions.jsonl").values()}
    assert by_session["s-err"]["status"] == "error" and "the engine fell over" in by_session["s-err"]["error"]
    assert by_session["s-gone"]["status"] == "incomplete"  # never trained on


def test_a_swap_fails_no_request_in_flight(tmp_path, smollm2_tok):
    """The arms change while v1 is answering a slow request: the request is answered by v1 (200),
    and v1 is closed only afterwards; sessions held at the swap are recorded as they stood."""
    closed: list[tuple[str, float]] = []

    def slow_arm(spec):
        p = ServedPolicy(name=spec, spec=spec, description=spec, engine="scripted",
                         sampler=ScriptedSampler(lambda ids, i: ScriptedTurn(text=f"I am {spec}.", delay_s=1.5),
                                                 smollm2_tok),
                         renderer=ChatRenderer(smollm2_tok), sampling=PARAMS, env=None)
        p.close = lambda: closed.append((spec, time.monotonic()))
        return p

    def loader(arms, current):
        have = {p.spec: p for p in current.values()}
        return {name: have.get(spec) or slow_arm(spec) for name, spec in arms.items()}

    with Router({"baseline": slow_arm("v1")}, out_dir=tmp_path, token=TOKEN, loader=loader, record=True) as r:
        answered = {}

        def slow_call():
            answered["slow"] = (chat(r.url, "held"), time.monotonic())

        t = threading.Thread(target=slow_call)
        t.start()
        time.sleep(0.5)  # v1 is sampling the slow answer now
        status, _, body = post(r.url + "/v1/admin/arms", {"arms": {"baseline": "v2"}, "by": "test"})
        swapped = time.monotonic()
        assert status == 200 and json.loads(body)["changed"] == "arms"
        t.join()
        (status, _, body), at = answered["slow"]
        assert status == 200 and "I am v1." in body
        assert closed and closed[0][0] == "v1" and closed[0][1] >= at - 0.05  # closed after its answer went out
        assert swapped >= at - 0.05  # the swap waited for it
        status, _, body = chat(r.url, "after")
        assert status == 200 and "I am v2." in body
    specs = {rec["metadata"]["served"]["session"]: rec["metadata"]["served"]["spec"]
             for rec in latest_records(tmp_path / "sessions.jsonl").values()}
    assert specs == {"held": "v1", "after": "v2"}


def test_feedback_for_unknown_sessions_and_bad_arms_are_4xx(tmp_path, smollm2_tok):
    with Router({"policy": arm("v1", smollm2_tok, "x")}, out_dir=tmp_path, token=TOKEN, record=True,
                loader=lambda arms, cur: {n: arm(s, smollm2_tok, s) for n, s in arms.items()}) as r:
        status, _, body = post(r.url + "/v1/feedback", {"session_id": "nobody", "success": True})
        assert status == 404 and "unknown session 'nobody'" in body
        status, _, body = post(r.url + "/v1/admin/arms", {"arms": {"baseline": "v1", "canary": "v2"}})
        assert status == 400 and "baseline and experiment" in body
    assert latest_records(tmp_path / "sessions.jsonl") == {}  # no call was served: nothing to record


def test_two_prompts_of_one_model_share_its_engine(tmp_path, smollm2_path):
    """A spec may carry a prompt policy (MODEL#prompt=PATH): arms of one model are one engine,
    closed with the last arm that uses it; the experiment's calls carry its demonstration turns."""
    from agentboost.run.prompt_policy import Demonstration, PromptPolicy
    from agentboost.serving.router import build_router

    demo = Demonstration(task_id="d", source="policy", messages=[
        {"role": "user", "content": [{"text": "What is 40 + 2?"}]},
        {"role": "assistant", "content": [{"text": "The answer is 42, said the demonstration."}]}])
    path = PromptPolicy(system_prompt="Answer.", demonstrations=[demo]).save(tmp_path / "prompt_policy.json")
    arms = {"baseline": "smollm2-135m-instruct", "experiment": f"smollm2-135m-instruct#prompt={path}"}
    router = build_router(arms, overrides=["validation.max_new_tokens=4", "validation.temperature=0"], split=1.0,
                          out_dir=tmp_path / "serve", token=TOKEN, record=True, log=lambda m: None)
    base, exp = router.policies["baseline"], router.policies["experiment"]
    shared = base.server
    assert exp.server is shared and shared.users == 2 and exp.prompt_policy.demonstrations == [demo]
    with router:
        assert chat(router.url, "s1")[0] == 200
    rec = next(iter(latest_records(tmp_path / "serve" / "sessions.jsonl").values()))
    assert rec["metadata"]["served"]["spec"] == arms["experiment"]
    prompt_text = router.policies["experiment"].renderer.decode(rec["calls"][0]["prompt_ids"])
    assert "said the demonstration" in prompt_text  # the demonstration turns came first
    assert [m["role"] for m in rec["messages"]][:1] == ["user"] and "demonstration" not in json.dumps(rec["messages"])
    assert shared.users == 0 and shared.server is None  # the engine closed with the last arm that used it


def test_feedback_for_a_session_served_before_a_swap_or_evicted_is_kept(tmp_path, smollm2_tok):
    """A user's outcome arrives after the session left the server: the arms changed (a loop's
    promotion, rollback or new test), it was forgotten past max_sessions, or the server restarted
    (scored from its record). The session was served,
    so its outcome counts: scored by the reward of the arm that served it, its record rewritten
    with it, and logged under that arm (the report of the new test leaves it out: it was not
    assigned there). Only a session that was never served is unknown (404)."""
    from agentboost.environments.strands_env import StrandsEnv

    def scored(spec, answer):
        p = arm(spec, smollm2_tok, answer)
        p.env = StrandsEnv(reward="exact_answer")
        return p

    def loader(arms, current):
        have = {p.spec: p for p in current.values()}
        return {name: have.get(spec) or scored(spec, "The answer is 7.") for name, spec in arms.items()}

    task = {"task_id": "t5", "answer": "5"}
    with Router({"policy": scored("v1", "The answer is 5.")}, out_dir=tmp_path, token=TOKEN, loader=loader,
                record=True, max_sessions=2) as r:
        assert chat(r.url, "before-swap")[0] == 200
        assert chat(r.url, "before-swap-2")[0] == 200
        status, _, body = post(r.url + "/v1/admin/arms", {"arms": {"baseline": "v1", "experiment": "v2"},
                                                         "split": 1.0, "by": "test"})
        assert status == 200 and json.loads(body)["changed"] == "arms"
        status, _, body = post(r.url + "/v1/feedback", {"session_id": "before-swap", "task": task})
        assert status == 200, body
        assert json.loads(body)["success"] is True and json.loads(body)["arm"] == "policy"  # v1's answer, v1's arm
        status, _, body = post(r.url + "/v1/feedback", {"session_id": "before-swap-2", "reward": 2.0})
        assert status == 400 and "[0, 1]" in body  # the range of the reward of the arm that served it
        status, _, body = post(r.url + "/v1/feedback", {"session_id": "before-swap-2", "reward": 0.0})
        assert status == 200, body
        for sid in ("new-1", "new-2", "new-3"):  # past max_sessions=2: new-1 is forgotten
            assert chat(r.url, sid)[0] == 200
        status, _, body = post(r.url + "/v1/feedback", {"session_id": "new-1", "task": {"task_id": "t7", "answer": "7"}})
        assert status == 200 and json.loads(body)["success"] is True, body
        status, _, body = post(r.url + "/v1/feedback", {"session_id": "never-served", "success": True})
        assert status == 404 and "unknown session 'never-served'" in body
        report = ab_report(tmp_path / "ab.jsonl")
    # a restart of the same test: a session served before it is scored from its record
    with Router({"baseline": scored("v1", "x"), "experiment": scored("v2", "x")}, out_dir=tmp_path, token=TOKEN,
                record=True) as r:
        status, _, body = post(r.url + "/v1/feedback", {"session_id": "new-3", "task": {"task_id": "t7", "answer": "7"}})
        assert status == 200 and json.loads(body)["success"] is True and json.loads(body)["arm"] == "experiment", body
        # and one that posts its own reward: its record takes it too (the ab log alone would keep it from the loop)
        status, _, body = post(r.url + "/v1/feedback", {"session_id": "new-2", "reward": 0.75})
        assert status == 200 and json.loads(body)["arm"] == "experiment", body
    by_session = {rec["metadata"]["served"]["session"]: rec for rec in latest_records(tmp_path / "sessions.jsonl").values()}
    restarted = by_session["new-3"]
    assert restarted["reward"] == 1.0 and restarted["task_id"] == "t7" and restarted["metadata"]["served"]["spec"] == "v2"
    assert restarted["metadata"]["served"]["outcome"]["source"] == "reward:exact_answer"
    posted = by_session["new-2"]
    assert posted["reward"] == 0.75 and posted["metadata"]["served"]["outcome"] == {
        "reward": 0.75, "success": None, "source": "client"} and posted["metadata"]["served"]["spec"] == "v2"
    kept = by_session["before-swap"]
    assert kept["metadata"]["served"]["spec"] == "v1" and kept["reward"] == 1.0 and kept["task_id"] == "t5"
    assert kept["metadata"]["served"]["outcome"]["task"] == task
    assert by_session["before-swap-2"]["reward"] == 0.0
    assert by_session["new-1"]["metadata"]["served"]["spec"] == "v2" and by_session["new-1"]["reward"] == 1.0
    # the new test counts its own sessions' outcomes only
    assert report["arms"]["experiment"]["outcomes"] == 1 and report["arms"]["baseline"]["outcomes"] == 0


@pytest.mark.slow
def test_a_server_killed_after_an_answer_keeps_the_session_as_unconfirmed_and_never_trains_on_it(tmp_path,
                                                                                                  smollm2_path):
    """Write-ahead: an answer is on disk before its client can see it. A session the server held when it was
    SIGKILLed (its answer sent, no outcome yet) used to be lost; now its last record is the write-ahead one:
    incomplete, counted, never trained on; one whose outcome was written before the kill stays trainable."""
    import os
    import signal
    import subprocess
    import sys

    from agentboost.continual.sessions import ServedLog
    from agentboost.sampling.vllm_server import free_port
    from helpers import REPO

    out = tmp_path / "serve"

    def start():
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "agentboost.cli", "serve", "smollm2-135m-instruct", "--record",
                                 "--out", str(out), "--token", TOKEN, "--port", str(port), "--max-tokens", "8",
                                 "--temperature", "0"], cwd=str(REPO), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        said = []
        for line in proc.stdout:
            said.append(line)
            if line.startswith("serving "):
                return proc, f"http://127.0.0.1:{port}", "".join(said)
        raise AssertionError("serve ended before serving: " + "".join(said)[-2000:])

    proc, url, _ = start()
    try:
        assert chat(url, "s-fed")[0] == 200
        assert post(url + "/v1/feedback", {"session_id": "s-fed", "reward": 1.0})[0] == 200
        assert chat(url, "s-open")[0] == 200  # answered; the server is killed before anything else
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    records = {r["metadata"]["served"]["session"]: r for r in latest_records(out / "sessions.jsonl").values()}
    assert set(records) == {"s-fed", "s-open"}
    assert records["s-fed"]["reward"] == 1.0 and records["s-fed"]["metadata"]["served"].get("delivery") is None
    unconfirmed = records["s-open"]
    assert unconfirmed["status"] == "incomplete" and unconfirmed["metadata"]["served"]["delivery"] == "unconfirmed"
    assert "whether the client saw it is unknown" in unconfirmed["error"] and unconfirmed["calls"]

    proc, url, said = start()  # the same serving directory again: it says what it found
    try:
        assert "warning: 1 recorded session(s) were being answered when the server last stopped" in said
        assert post(url + "/v1/feedback", {"session_id": "s-open", "reward": 1.0})[0] == 200  # its record, scored
    finally:
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=60)[0]
        # a stop by Ctrl-C: 0 from the serving wait, 130 where it lands in the shutdown; never a traceback
        assert proc.returncode in (0, 130) and "Traceback" not in rest, rest[-2000:]
    log = ServedLog(out, tmp_path / "loop")
    log.poll()
    counts = log.counts()
    assert counts["unconfirmed_delivery"] == 1 and counts["not_trainable"] == 1, counts
    assert [s.session for s in log.sessions.values() if log.trainable(s)] == ["s-fed"]
