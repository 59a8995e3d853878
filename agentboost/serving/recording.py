"""Served sessions as token-exact episodes (``serve --record``; off by default).

A served session goes through the gateway's recorder (``gateway/session.py``), so its record is the
one a gateway episode gets: every call's prompt ids, sampled ids and log-probs, the segments, the
messages, tool calls, split reasons, and the status of what ended it (``incomplete`` when the client
went away mid-answer: never trained on). ``agentboost check`` verifies it from the file alone.

What is stored, in ``OUT/sessions.jsonl`` beside the event log: the conversation as the client sent
it (system prompt, user turns, tool results) and the model's answers, as text and as token ids; the
request's user id, if it named one; the outcome posted to ``/v1/feedback`` (and the task row, when
the outcome was ``{"task": ...}``). Nothing else of the request (headers, addresses, the token).

Each record carries ``metadata["served"]``: the session id, the arm, the policy it was served from
(``spec``: ``RUN_DIR:step_NNNNNN`` or a model; the loop's versions are checkpoints), the user and
the outcome. The task is the feedback's task row where one came; otherwise the session's opening
(system prompt and first user turn) names it (``task_id`` ``prompt:<digest>``), so that sessions
of the same task form a GRPO group whoever sent them.

A session is written when its outcome arrives (a later outcome writes it again: the last line of
an ``episode_id`` counts) and when it ends without one (forgotten past ``max_sessions``, the arms
changed, the server stopped); a session with no outcome is kept, with ``reward`` null, and counted.

Write-ahead: before each answer is sent, the session's record as it stands is written (flushed),
``incomplete`` with ``metadata["served"]["delivery"] = "unconfirmed"``: what a client may have seen
is on disk before it can see it. The session's next record (its outcome, its end) supersedes it; a
server killed in between leaves it as the session's last record, so a session whose last answer may
or may not have reached its client is kept, counted (``unconfirmed_delivery``) and never trained on.
It costs one record written per answer.
An outcome may come after the session left (its user posts it after a swap, or after a restart:
the server scores the session it still holds, or else its record) and writes it again.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from ..episodes.record import Episode, EpisodeWriter, Status
from ..files import iter_jsonl
from ..gateway.session import Session

SESSIONS = "sessions.jsonl"  # in the serving directory, beside ab.jsonl


def opening_task_id(messages: list[dict[str, Any]], system: str | None) -> str:
    """``prompt:<digest>`` of a conversation's system prompt and first user turn: the task a
    session without a task row is grouped by."""
    first = next((m for m in messages if m.get("role") == "user"), None)
    content = (first or {}).get("content")
    if isinstance(content, list):  # Strands content blocks (what every protocol parses to): their text
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    text = json.dumps([system or "", content or ""], sort_keys=True, ensure_ascii=False)
    return "prompt:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def apply_outcome(ep: Episode, reward: float | None, success: bool | None) -> None:
    """A client's outcome as the episode's reward: its ``reward`` (else 1 or 0 from ``success``),
    and ``success`` as the outcome component ``Episode.succeeded`` reads."""
    ep.reward = float(reward) if reward is not None else float(bool(success))
    if success is not None:
        ep.reward_components = {**ep.reward_components, "outcome": float(bool(success))}


# the reason a write-ahead record gives, which is the session's if the server stops before its next record
UNCONFIRMED = ("the server stopped while the answer to call {calls} was being sent: whether the client saw it "
               "is unknown")


def unconfirmed_deliveries(path: str | Path) -> int:
    """Sessions whose last record is a write-ahead one: the server stopped while answering them."""
    return sum(((r.get("metadata") or {}).get("served") or {}).get("delivery") == "unconfirmed"
               for r in latest_records(path).values())


class SessionRecorder:
    """Appends served sessions to ``path`` (flushed line by line: a crash loses no written one).
    Called from the serving loop; ``close`` from another thread."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._writer = EpisodeWriter(self.path)
        self._lock = threading.Lock()
        self._written: dict[str, int] = {}  # session id -> calls in its last written record
        self.written = 0
        self.written_ahead = 0  # write-ahead records (one per answer sent)

    def write(self, s: Session, served: dict[str, Any], episode: Episode | None = None,
              outcome: dict[str, Any] | None = None, final: bool = False) -> Episode:
        """Write session ``s`` (``episode``: its record, already scored by the caller; else built
        here). ``served``: the arm, spec and user it was served under; ``outcome``: the feedback.
        ``final``: the session has left the server (``end`` was called): nothing more to track."""
        ep = episode if episode is not None else self._episode(s)
        if outcome is not None and episode is None:
            apply_outcome(ep, outcome.get("reward"), outcome.get("success"))
        ep.metadata["served"] = {**served, "session": s.id, "outcome": outcome, "recorded_at": time.time()}
        with self._lock:
            if self._writer is None:
                return ep
            self._writer.write(ep)
            if final:  # a later session of the same id (one going on after a swap) is another record
                self._written.pop(s.id, None)
            else:
                self._written[s.id] = s.num_calls() + (s.failure is not None or s.incomplete is not None)
            self.written += 1
        return ep

    @staticmethod
    def _episode(s: Session) -> Episode:
        ep = s.episode()
        if "task_id" not in s.task:
            first = s.lineages[0].model if s.lineages else None
            ep.task_id = ep.group_id = opening_task_id(s.last_messages, first._prev_system if first else None)
        return ep

    def write_ahead(self, s: Session, served: dict[str, Any]) -> None:
        """Before an answer is sent (``Session.before_delivery``): the session as it stands,
        ``incomplete`` until its next record supersedes this one; what a crash leaves is counted and
        never trained on. The session's tracking (``end``'s) is left as it was."""
        ep = self._episode(s)
        ep.status, ep.error = Status.INCOMPLETE, UNCONFIRMED.format(calls=s.num_calls())
        ep.metadata["served"] = {**served, "session": s.id, "outcome": None, "recorded_at": time.time(),
                                 "delivery": "unconfirmed"}
        with self._lock:
            if self._writer is not None:
                self._writer.write(ep)
                self.written_ahead += 1

    def recorded(self, session_id: str) -> tuple[Episode, dict[str, Any]] | None:
        """The latest record of a session that is no longer held (served before a restart), as an
        episode, and what it was served under; None if it was never recorded. Reads the file: for
        the outcome of a session the server no longer holds, which is rare (every line is flushed)."""
        found = None
        for rec in latest_records(self.path).values():
            served = (rec.get("metadata") or {}).get("served") or {}
            if served.get("session") == session_id:
                found = rec  # the last one: a session id used again after a swap is its latest session
        if found is None:
            return None
        served = {k: v for k, v in found["metadata"]["served"].items() if k not in ("outcome", "recorded_at")}
        return Episode.from_dict(found), served

    def rewrite(self, ep: Episode, served: dict[str, Any], outcome: dict[str, Any]) -> None:
        """A recorded session (``recorded``) written again with its outcome (``ep`` scored by the caller)."""
        task = outcome.get("task") or {}
        if isinstance(task.get("task_id"), (str, int)):
            ep.task_id = ep.group_id = str(task["task_id"])  # the feedback's task, as for a held session
        ep.metadata["served"] = {**served, "outcome": outcome, "recorded_at": time.time()}
        with self._lock:
            if self._writer is not None:
                self._writer.write(ep)
                self.written += 1

    def end(self, s: Session, served: dict[str, Any]) -> None:
        """A session leaves the server: written unless its last record already holds every call
        (a session that got its outcome and then nothing more), or it made no call at all; one
        that failed or whose client left before its first answer is written too (its status and
        reason: nothing silently dropped)."""
        ended = s.failure is not None or s.incomplete is not None
        if (s.num_calls() or ended) and self._written.get(s.id) != s.num_calls() + ended:
            self.write(s, served)
        self._written.pop(s.id, None)

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None


def latest_records(path: str | Path) -> dict[str, dict[str, Any]]:
    """The last record of each served episode in a ``sessions.jsonl`` (an episode is written again
    when a later outcome arrives), by ``episode_id``, in the order each first appeared."""
    out: dict[str, dict[str, Any]] = {}
    if not Path(path).is_file():
        return out
    for _, row in iter_jsonl(path, growing=True):
        if isinstance(row, dict) and "episode_id" in row:
            out[row["episode_id"]] = row
    return out
