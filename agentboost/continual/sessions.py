"""The served sessions the loop learns from, and their outcomes.

``serve`` (with ``record``) writes each session as an episode to ``sessions.jsonl`` and every
assignment, call and outcome to ``ab.jsonl`` (``serving/recording.py``, ``serving/router.py``).
``ServedLog`` reads both as they grow (each poll reads only the new lines) and knows, per session:
the policy that served it, its status, its task, and its reward: the outcome its record holds,
else the last outcome ``ab.jsonl`` has for it (a session forgotten before its feedback came), else
a judge's score (``loop.judge``, for sessions that got no outcome within ``loop.feedback_wait_s``).
Sessions with none of these are kept and counted, and never trained on; so are ``incomplete`` ones
(the client went away mid-answer) and failed ones (the server failed them: no sample of the policy
to learn from).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..episodes.record import NEVER_TRAINED, Episode, Status
from ..serving.recording import SESSIONS
from ..serving.router import EVENTS as AB_EVENTS

JUDGED = "judged.jsonl"  # in the loop's directory: the judge's score of each session that got no outcome


@dataclass
class Served:
    episode_id: str
    session: str
    spec: str
    arm: str
    status: str
    task_id: str
    offset: int  # byte offset of its latest record in sessions.jsonl
    recorded_at: float
    reward: float | None = None  # from its record's outcome
    source: str | None = None
    unconfirmed: bool = False  # its last record is a write-ahead one: the server stopped while answering it


class Tail:
    """A JSON-lines file read as it grows: each ``read`` returns the complete lines added since
    the last one, with their byte offsets (a line still being written waits for the next read)."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0

    def read(self) -> list[tuple[int, dict[str, Any]]]:
        if not self.path.is_file():
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        out, pos = [], 0
        while True:
            end = data.find(b"\n", pos)
            if end < 0:
                break
            line = data[pos:end]
            if line.strip():
                try:
                    row = json.loads(line)
                except ValueError:  # not JSON: a torn line from a crash; what follows is still read
                    row = None
                if isinstance(row, dict):
                    out.append((self.offset + pos, row))
            pos = end + 1
        self.offset += pos
        return out


class ServedLog:
    def __init__(self, serve_dir: str | Path, loop_dir: str | Path):
        self.serve_dir, self.loop_dir = Path(serve_dir), Path(loop_dir)
        self._records = Tail(self.serve_dir / SESSIONS)
        self._events = Tail(self.serve_dir / AB_EVENTS)
        self._judged = Tail(self.loop_dir / JUDGED)
        self.sessions: dict[str, Served] = {}  # episode id -> its latest record
        self.feedback: dict[str, dict[str, Any]] = {}  # session id -> its last outcome in ab.jsonl
        self.judged: dict[str, dict[str, Any]] = {}  # episode id -> the judge's score (or why none)
        self.assigned = 0  # sessions the server assigned an arm (served), across every test
        self.ab_rows: list[dict[str, Any]] = []  # ab.jsonl, in order (the live test reads it)

    def poll(self) -> None:
        for offset, r in self._records.read():
            if not isinstance(r.get("episode_id"), str):
                continue  # not an episode record
            served = (r.get("metadata") or {}).get("served") or {}
            outcome = served.get("outcome") or {}
            self.sessions[r["episode_id"]] = Served(
                episode_id=r["episode_id"], session=served.get("session", ""), spec=served.get("spec", ""),
                arm=served.get("arm", ""), status=str(r.get("status")), task_id=str(r.get("task_id")), offset=offset,
                recorded_at=float(served.get("recorded_at") or time.time()),
                reward=r.get("reward") if outcome else None, source=outcome.get("source"),
                unconfirmed=served.get("delivery") == "unconfirmed")
        for _, r in self._events.read():
            self.ab_rows.append(r)
            if r.get("event") == "assign":
                self.assigned += 1
            elif r.get("event") == "feedback":
                self.feedback[r["session"]] = r
        for _, r in self._judged.read():
            self.judged[r["episode_id"]] = r

    def reward(self, s: Served) -> tuple[float | None, str | None]:
        """A session's reward and where it came from (None: no outcome yet)."""
        if s.reward is not None:
            return float(s.reward), s.source or "feedback"
        fb = self.feedback.get(s.session)
        if fb is not None and fb.get("arm") == s.arm:
            value = fb.get("reward") if fb.get("reward") is not None else float(bool(fb.get("success")))
            return float(value), fb.get("source") or "feedback"
        j = self.judged.get(s.episode_id)
        if j is not None and j.get("reward") is not None:
            return float(j["reward"]), "judge"
        return None, None

    def trainable(self, s: Served) -> bool:
        """A sample of the policy that ran to an end: not incomplete, not failed by the server."""
        try:
            st = Status(s.status)
        except ValueError:  # a record that names no status is no episode to train on
            return False
        return st not in NEVER_TRAINED and not st.failed and not st.aborted

    def candidates_for(self, spec: str, used: set[str]) -> list[Served]:
        """The rewarded, trainable sessions ``spec`` served that no version learned from yet."""
        return [s for s in self.sessions.values()
                if s.spec == spec and s.episode_id not in used and self.trainable(s) and self.reward(s)[0] is not None]

    def unjudged(self, wait_s: float, now: float | None = None) -> list[Served]:
        """Trainable sessions that got no outcome within ``wait_s`` of their record and have no score."""
        now = time.time() if now is None else now
        return [s for s in self.sessions.values() if self.trainable(s) and self.reward(s)[0] is None
                and s.episode_id not in self.judged and now - s.recorded_at >= wait_s]

    def episode(self, s: Served) -> Episode:
        """The session's latest record as an episode, with the reward ``reward`` resolves."""
        with open(self.serve_dir / SESSIONS, "rb") as f:
            f.seek(s.offset)
            ep = Episode.from_dict(json.loads(f.readline()))
        reward, source = self.reward(s)
        if ep.reward is None and reward is not None:
            from ..serving.recording import apply_outcome

            fb = self.feedback.get(s.session) if source != "judge" else None
            apply_outcome(ep, reward, fb.get("success") if fb is not None else None)
            if source == "judge":
                ep.reward_components = {"outcome": reward}
        ep.metadata.setdefault("served", {})["reward_source"] = source
        return ep

    def counts(self) -> dict[str, Any]:
        """Every session, counted: served (assigned an arm), recorded, rewarded by source,
        unrewarded (kept, never trained on), and not trainable (incomplete or failed; of them, those a
        stopped server was answering: ``unconfirmed_delivery``)."""
        by_source: dict[str, int] = {}
        unrewarded = untrainable = unconfirmed = 0
        for s in self.sessions.values():
            if not self.trainable(s):
                untrainable += 1
                unconfirmed += s.unconfirmed
                continue
            _, source = self.reward(s)
            if source is None:
                unrewarded += 1
            else:
                key = "judge" if source == "judge" else "feedback"
                by_source[key] = by_source.get(key, 0) + 1
        return {"served": self.assigned, "recorded": len(self.sessions), "rewarded": by_source,
                "unrewarded": unrewarded, "not_trainable": untrainable, "unconfirmed_delivery": unconfirmed,
                "not_recorded_yet": max(0, self.assigned - len(self.sessions))}
