"""Job events for the outside world: webhooks (subscribe with a URL and event names; delivered in
order per subscription, retried, signed) and the events of one job as a server-sent-events stream.

The durable record is each run's ``events.jsonl`` (written by the trainer: progress, checkpoint,
warning, budget_warning, compare_to_base, resume, completed / cancelled / failed). A job whose process died without saying
how it ended gets a ``failed`` event here, and a job cancelled before it started a ``cancelled`` one
(so every stream of a job that ended ends). Delivery offsets are kept in
``<root>/webhooks.json`` after each delivery, so a restarted service skips none, and repeats only
the one a kill caught between the receiver's 2xx and that write (same ``X-Agentboost-Delivery``:
receivers dedupe on it).

Subscriptions take agentboost's event names or the GRPO guide's (``training.job.progress``,
``training.budget.warning``, ...: ``GUIDE_EVENTS``). Each delivery is a POST of
``{"job_id", "seq", "event", "type", "event_type", ...}`` with ``X-Agentboost-Event``,
``X-Agentboost-Delivery`` (job:seq) and ``X-Agentboost-Signature: sha256=<HMAC-SHA256 of the
body with the subscription's secret>``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import uuid
from typing import Any

import aiohttp

from ..files import atomic_write_text, iter_jsonl
from .store import JobError, JobStore

# every event the trainer writes: a subscription to all of them sees every seq, with no gap
EVENTS = ("progress", "checkpoint", "best_checkpoint", "warning", "budget_warning", "compare_to_base", "resume",
          "restart", "warm_start", "parity", "prompt_candidate", "completed", "cancelled", "failed")
TERMINAL = ("completed", "cancelled", "failed")
RETRIES = 3
# the GRPO guide's webhook event names for the same events (it names the first two; the rest follow
# its pattern); a subscription may use either name, and every event carries both
GUIDE_EVENTS = {"training.job.progress": "progress", "training.budget.warning": "budget_warning",
                "training.checkpoint.saved": "checkpoint", "training.checkpoint.best": "best_checkpoint",
                "training.job.warning": "warning",
                "training.evaluation.completed": "compare_to_base", "training.job.resumed": "resume",
                "training.job.restarted": "restart", "training.warm_start.completed": "warm_start",
                "training.verification.parity": "parity", "training.prompt.candidate": "prompt_candidate",
                "training.job.completed": "completed", "training.job.cancelled": "cancelled",
                "training.job.failed": "failed"}
GUIDE_NAME = {v: k for k, v in GUIDE_EVENTS.items()}


def with_guide_fields(event: dict[str, Any]) -> dict[str, Any]:
    """An event with the guide's fields beside agentboost's: ``type`` (the live-update stream's name,
    the same as ``event``), ``event_type`` (the webhook name), and for ``progress`` ``iteration``
    (steps done), ``total`` (steps configured), ``loss`` (already there); for ``checkpoint`` and
    ``best_checkpoint`` ``checkpoint_id`` (the checkpoint's directory name, ``step_NNNNNN``)."""
    out = {**event, "type": event["event"], "event_type": GUIDE_NAME.get(event["event"], event["event"])}
    if event["event"] == "progress":
        out.update(iteration=event.get("step"), total=event.get("total_steps"))
    elif event["event"] in ("checkpoint", "best_checkpoint"):
        out["checkpoint_id"] = event.get("checkpoint")
    return out


def job_events(store: JobStore, job_id: str) -> list[dict[str, Any]]:
    """The job's events in order, each with its sequence number; a ``failed`` event is added for a
    job whose process ended without one."""
    d = store.root / job_id
    path = d / "run" / "events.jsonl"
    # the trainer is appending to it: a partial last line is read next time
    events = [e for _, e in iter_jsonl(path, growing=True)] if path.is_file() else []
    if not any(e.get("event") in TERMINAL for e in events):
        status = store.status(job_id)
        if status["state"] == "failed":
            events.append({"event": "failed", "error": status.get("error", "")[-500:]})
        elif status["state"] == "cancelled":  # cancelled while queued: no trainer ever wrote an event
            events.append({"event": "cancelled", "step": 0, "stopped": "cancelled before it started"})
    return [with_guide_fields({"job_id": job_id, "seq": i, **e}) for i, e in enumerate(events)]


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class UnknownSubscription(JobError):
    pass


def _refused_address(url: str) -> str | None:
    """Why ``url`` may not receive deliveries (its host is, or resolves to, a loopback, private,
    link-local, multicast or reserved address), or None."""
    import ipaddress
    import socket
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError as e:
        return f"not a valid URL ({e})"
    if not host:
        return "the URL names no host"
    try:
        infos = socket.getaddrinfo(host, port or 80, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as e:
        return f"its host {host!r} does not resolve ({e})"
    for info in infos:
        addr = ipaddress.ip_address(info[4][0].split("%")[0])
        if (addr.is_loopback or addr.is_private or addr.is_link_local or addr.is_multicast or addr.is_reserved
                or addr.is_unspecified):
            return f"its host {host!r} is the non-public address {addr}"
    return None


class Webhooks:
    def __init__(self, store: JobStore, allow_private: bool = False):
        self.store = store
        self.allow_private = allow_private
        self.path = store.root / "webhooks.json"
        self.state = json.loads(self.path.read_text()) if self.path.is_file() else {"subscriptions": {}}
        self.delivered = 0
        self.failed_attempts = 0

    def _save(self) -> None:
        atomic_write_text(self.path, json.dumps(self.state, indent=1))
        self.path.chmod(0o600)  # it holds the secrets

    def subscribe(self, url: Any, events: Any, secret: Any = None) -> dict[str, Any]:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise JobError(f"url must be an http(s) URL, got {url!r}")
        if events is not None and (not isinstance(events, list) or not all(isinstance(e, str) for e in events)):
            raise JobError(f"events must be a list of event names, got {events!r}")
        events = [GUIDE_EVENTS.get(e, e) for e in (events or EVENTS)]  # the guide's names, as agentboost's
        unknown = [e for e in events if e not in EVENTS]
        if unknown:
            raise JobError(f"unknown events {unknown}; known: {', '.join(EVENTS)} (or the guide's names: "
                           f"{', '.join(GUIDE_EVENTS)})")
        events = list(dict.fromkeys(events))
        if secret is not None and (not isinstance(secret, str) or len(secret) < 16):
            raise JobError("secret must be text of at least 16 characters")
        if not self.allow_private:
            why = _refused_address(url)
            if why:
                raise JobError(f"webhook url {url!r} refused: {why} (start the service with "
                               "--allow-private-webhooks to deliver there)")
        sub_id = uuid.uuid4().hex[:12]
        secret = secret or secrets.token_urlsafe(24)
        # existing events are not replayed to a new subscriber: it starts at each job's current end
        offsets = {j["job_id"]: len(job_events(self.store, j["job_id"])) for j in self.store.list()}
        self.state["subscriptions"][sub_id] = {"url": url, "events": events, "secret": secret, "offsets": offsets}
        self._save()
        return {"id": sub_id, "url": url, "events": events, "secret": secret}

    def unsubscribe(self, sub_id: str) -> None:
        if self.state["subscriptions"].pop(sub_id, None) is None:
            raise UnknownSubscription(f"no webhook subscription {sub_id!r}")
        self._save()

    def list(self) -> list[dict[str, Any]]:
        return [{"id": k, "url": v["url"], "events": v["events"]} for k, v in self.state["subscriptions"].items()]

    async def _post(self, session: aiohttp.ClientSession, sub: dict[str, Any], event: dict[str, Any]) -> bool:
        if not self.allow_private:  # checked again at delivery: a name may resolve elsewhere by now
            why = await asyncio.get_running_loop().run_in_executor(None, _refused_address, sub["url"])
            if why:
                self.failed_attempts += 1
                return False
        body = json.dumps(event).encode()
        headers = {"Content-Type": "application/json", "X-Agentboost-Event": event["event"],
                   "X-Agentboost-Delivery": f"{event['job_id']}:{event['seq']}",
                   "X-Agentboost-Signature": signature(sub["secret"], body)}
        for attempt in range(RETRIES):
            try:
                async with session.post(sub["url"], data=body, headers=headers,
                                        timeout=aiohttp.ClientTimeout(total=10)) as r:
                    if r.status < 300:
                        self.delivered += 1
                        return True
            except (aiohttp.ClientError, asyncio.TimeoutError):
                pass
            self.failed_attempts += 1
            await asyncio.sleep(0.2 * 2 ** attempt)
        return False

    async def deliver_once(self, session: aiohttp.ClientSession) -> None:
        """Every subscription, every job: the events past its offset, in order; an event that
        cannot be delivered after the retries stops that job's queue until the next round."""
        jobs = [j["job_id"] for j in self.store.list()] if self.state["subscriptions"] else []
        for sub in list(self.state["subscriptions"].values()):
            for job_id in jobs:
                events = job_events(self.store, job_id)
                start = sub["offsets"].get(job_id, 0)
                for event in events[start:]:
                    if event["event"] in sub["events"] and not await self._post(session, sub, event):
                        break
                    sub["offsets"][job_id] = event["seq"] + 1
                    self._save()

    async def run(self, every_s: float = 0.5) -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                try:
                    await self.deliver_once(session)
                except Exception as e:  # a bad file or receiver must not end deliveries: said, retried
                    print(f"agentboost jobs: webhook delivery round failed: {type(e).__name__}: {e}", flush=True)
                await asyncio.sleep(every_s)
