"""The A/B serving job of the chaos suite (``benchmarks/chaos.py --jobs serve``): an application that
talks to ``agentboost serve --ab ... --record`` and posts each session's outcome, written to be run
again after a kill.

    .venv/bin/python benchmarks/chaos_serve.py OUT EXPERIMENT_SPEC

Starts the real server (``agentboost serve --ab baseline=smollm2-135m-instruct
experiment=EXPERIMENT_SPEC --record --out OUT/serve``, a process of its own) and plays the
application: ``SESSIONS`` sessions of two turns each, from ``USERS`` users (a user's sessions share
an arm), then each session's outcome (``POST /v1/feedback`` with its reward). What the application
got back it keeps in ``OUT/app.jsonl`` (its own memory, appended line by line), so that a run after a
kill goes on where the application's last confirmed step was: a turn answered but not yet kept is
asked again, as a real client retries. Then stops the server (SIGTERM). Exit status 0 when every
session has its outcome.

A kill reaches the application and the server together (both carry the attempt's marker); "equal"
is what must hold whatever the arms drawn (the assignment salt is drawn per test, so two untouched
runs split the sessions differently): every session assigned once and kept on its arm across the
restart (the arm every answer's ``X-Agentboost-Arm`` named), a user's sessions on one arm, every
outcome counted once in ``ab report`` and kept in the session's latest record, nothing torn.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

from agentboost.files import iter_jsonl, open_append
from agentboost.sampling.vllm_server import free_port
from agentboost.serving.recording import latest_records
from agentboost.serving.report import ab_report
from agentboost.testing.chaos import Job, stop, temporaries, torn_or_invalid

SESSIONS, USERS, TURNS = 8, 4, 2
BASELINE = "smollm2-135m-instruct"
QUESTIONS = [f"What is {a} + {b}? Answer in one short sentence." for a, b in
             [(2, 3), (4, 4), (1, 6), (5, 2), (3, 3), (7, 1), (2, 6), (4, 5)]]


def session_id(i: int) -> str:
    return f"chaos-s{i}"


def user_of(i: int) -> str:
    return f"chaos-u{i % USERS}"


def reward_of(i: int) -> float:
    return round((i + 1) / (SESSIONS + 1), 4)  # within [0, 1], the built-in rewards' range: distinct per session


def _request(method: str, url: str, body: dict | None = None, headers: dict | None = None,
             timeout: float = 120) -> tuple[int, dict, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), {"error": e.read().decode(errors="replace")[:300]}


def _wait_ready(url: str, server: subprocess.Popen, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited {server.returncode} before it was ready")
        try:
            if _request("GET", url + "/v1/models", timeout=5)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError("the server was not ready in time")


def _memory(path: Path) -> list[dict]:
    """What the application kept: its whole lines (a kill may have torn the last one; read, not cut)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_bytes().split(b"\n")[:-1] if line.strip()]


def main(out: str, experiment: str) -> int:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    memory = out_dir / "app.jsonl"
    kept = _memory(memory)  # its torn line, if any, open_append cuts before the first append
    answers: dict[str, list[str]] = defaultdict(list)  # session -> the answers it got, in turn order
    arms: dict[str, set[str]] = defaultdict(set)
    posted: set[str] = set()
    for row in kept:
        if row["kind"] == "answer":
            answers[row["session"]].append(row["text"])
            arms[row["session"]].add(row["arm"])
        else:
            posted.add(row["session"])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "agentboost.cli", "serve", "--ab", f"baseline={BASELINE}",
                               f"experiment={experiment}", "--split", "0.5", "--record", "--out",
                               str(out_dir / "serve"), "--port", str(port), "--max-tokens", "16",
                               "--max-batch-size", "1"])
    try:
        _wait_ready(url, server)
        with open_append(memory) as app:
            for i in range(SESSIONS):
                sid = session_id(i)
                for turn in range(len(answers[sid]), TURNS):
                    messages = [{"role": "user", "content": QUESTIONS[i]}]
                    for answer in answers[sid]:
                        messages += [{"role": "assistant", "content": answer},
                                     {"role": "user", "content": "And twice that?"}]
                    status, headers, body = _request("POST", url + "/v1/chat/completions",
                                                     {"messages": messages, "user": user_of(i)},
                                                     {"X-Agentboost-Session": sid})
                    if status != 200:
                        raise RuntimeError(f"session {sid} turn {turn}: HTTP {status} {body}")
                    text = body["choices"][0]["message"]["content"] or ""
                    answers[sid].append(text)
                    app.write(json.dumps({"kind": "answer", "session": sid, "turn": turn, "text": text,
                                          "arm": headers.get("X-Agentboost-Arm")}) + "\n")
                    app.flush()
                if sid not in posted:
                    status, _, body = _request("POST", url + "/v1/feedback", {"session_id": sid, "reward": reward_of(i)})
                    if status != 200:
                        raise RuntimeError(f"feedback for {sid}: HTTP {status} {body}")
                    app.write(json.dumps({"kind": "feedback", "session": sid, "reward": reward_of(i)}) + "\n")
                    app.flush()
                    posted.add(sid)
        print(f"chaos_serve: {SESSIONS} sessions served and scored", flush=True)
        return 0
    finally:
        stop(server, 120)  # held sessions are recorded


# -- the job's readings ---------------------------------------------------------------------------
def _events(out: Path) -> list[dict]:
    path = out / "serve" / "ab.jsonl"
    return [row for _, row in iter_jsonl(path)] if path.is_file() else []


def serve_summary(out: Path) -> dict:
    """What does not depend on the arms drawn: the sessions, their outcomes, the report's totals."""
    report = ab_report(out / "serve" / "ab.jsonl")
    records = _latest_by_session(out)
    return {
        "sessions": report["sessions"],
        "outcomes": sum(a["outcomes"] for a in report["arms"].values()),
        "reward_sum": round(sum((a["mean_reward"] or 0) * a["outcomes"] for a in report["arms"].values()), 6),
        "recorded_outcomes": {sid: (rec["metadata"]["served"].get("outcome") or {}).get("reward")
                              for sid, rec in sorted(records.items())},
        "arms_per_user": sorted(Counter(len(v) for v in _user_arms(out).values()).items()),
    }


def _latest_by_session(out: Path) -> dict[str, dict]:
    by_session: dict[str, dict] = {}
    for rec in latest_records(out / "serve" / "sessions.jsonl").values():  # in order: the last one of a session wins
        by_session[rec["metadata"]["served"]["session"]] = rec
    return by_session


def _user_arms(out: Path) -> dict[str, set[str]]:
    arms: dict[str, set[str]] = defaultdict(set)
    for e in _events(out):
        if e.get("event") == "assign":
            arms[e.get("user")].add(e["arm"])
    return arms


def serve_audit(out: Path, reference: dict) -> dict[str, list[str]]:
    events = _events(out)
    assigned = Counter(e["session"] for e in events if e.get("event") == "assign")
    arm_of = {e["session"]: e["arm"] for e in events if e.get("event") == "assign"}
    last_feedback = {e["session"]: e for e in events if e.get("event") == "feedback"}
    app = _memory(out / "app.jsonl")
    records = _latest_by_session(out)
    lost, twice, corrupted = [], [], []
    for i in range(SESSIONS):
        sid = session_id(i)
        if not assigned[sid]:
            lost.append(f"assignment of {sid}")
        seen = {row["arm"] for row in app if row["kind"] == "answer" and row["session"] == sid}
        if assigned[sid] and seen != {arm_of[sid]}:
            lost.append(f"arm of {sid}: answered by {sorted(seen)}, assigned {arm_of[sid]}")
        if (last_feedback.get(sid) or {}).get("reward") != reward_of(i):
            lost.append(f"outcome of {sid} in ab.jsonl")
        rec = records.get(sid)
        if rec is None or rec.get("reward") != reward_of(i):
            lost.append(f"outcome of {sid} in its record ({'none' if rec is None else rec.get('reward')})")
    twice += [f"assignment of {sid} x{n}" for sid, n in assigned.items() if n > 1]
    twice += [f"user {u} on arms {sorted(a)}" for u, a in _user_arms(out).items() if len(a) > 1]
    report = ab_report(out / "serve" / "ab.jsonl")
    counted = sum(a["outcomes"] for a in report["arms"].values())
    if counted > SESSIONS:
        twice.append(f"{counted} outcomes counted for {SESSIONS} sessions")
    corrupted += torn_or_invalid(out) + [f"{p} (left by an interrupted write)" for p in temporaries(out)]
    return {"lost": lost, "twice": twice, "corrupted": corrupted}


def serve_phase(out: Path) -> str:
    events = _events(out)
    if not events:
        return "serve: starting (loading the arms)"
    answered = sum(row["kind"] == "answer" for row in _memory(out / "app.jsonl"))
    calls = sum(e.get("event") == "call" for e in events)
    if calls > answered:
        return "serve: an answer sent, not yet kept by the application"
    if any(e.get("event") == "assign" for e in events):
        return "serve: answering"
    return "serve: ready, before the first session"


def serve_job(experiment: str) -> Job:
    argv = lambda out: [sys.executable, str(Path(__file__).resolve()), str(out), experiment]
    return Job(name="serve --ab with feedback (recorded)", start=argv, resume=argv, summary=serve_summary,
               audit=serve_audit, phase=serve_phase, timeout_s=900,
               tolerance="the arms drawn differ per test (a salt each); equal: the sessions, the outcomes counted, "
                         "their sum, each session's recorded outcome; every session on one arm, each user on one")


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
