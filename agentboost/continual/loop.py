"""The loop: serve, collect, improve, A/B test, promote or roll back, within a budget.

``ContinualLoop(cfg, out_dir).run()`` (``agentboost continual run``) serves the production version
behind ``serve``'s router (``serving/router.py``: sessions recorded, reconfigurable) and, every
``loop.poll_s``:

1. reads what was served (``sessions.ServedLog``: the recorded sessions, their outcomes) and, with
   ``loop.judge``, scores the sessions that got no outcome within ``loop.feedback_wait_s``;
2. collecting: once ``loop.sessions_per_round`` rewarded sessions of the production version that
   no version learned from have come, trains a candidate from them (``candidates.py``); a proposal
   in ``DIR/inbox`` (``agentboost continual propose``: a checkpoint to try, or a noised copy of
   production for a rollback drill) goes first;
3. gates the candidate offline: ``eval`` of candidate against parent on the held-out tasks
   (``loop.gate_file``); more than ``loop.gate_max_drop`` worse keeps it out of live traffic;
4. testing: serves it to ``loop.split`` of new sessions beside production, and reads the live test
   (``decision.py``) after every poll: promoted when significantly better (the sequential test's
   always-valid p-value at ``loop.alpha``), rolled back when significantly worse, when a guard
   trips, or when ``loop.window`` outcomes leave it undecided. A swap loads the new arm beside the
   serving ones and closes a policy only after the answers it is giving (no request fails);
5. books the machine time (hours x ``run.cost_per_hour``) to the versions (training, gate, serving
   by their share of tokens) and stops at ``loop.max_cost``, or after ``loop.max_rounds``
   candidates, or at SIGTERM.

Everything is on disk as it happens (``lineage.LoopState``: ``loop.json``, ``events.jsonl``,
``versions/``; the router's ``serve/ab.jsonl`` and ``serve/sessions.jsonl``), so a loop started
again with ``--resume`` goes on where it stopped: the test in progress keeps its assignments and
outcomes, a candidate whose training or gate was cut short is made again from the same sessions.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from ..files import atomic_write_text, open_append
from ..run.config import TrainConfig, load_config, save_config
from .decision import live_test, rows_of_test
from .lineage import LoopInputError, LoopState, usd_per_point
from .sessions import JUDGED, ServedLog

SERVE_DIR = "serve"
INBOX = "inbox"
CONFIG = "config.yaml"


class LoopStopped(Exception):
    pass


def check_budget(cfg: TrainConfig, state: LoopState) -> None:
    """Refuse to start a loop whose budget cannot bind or is already spent (one line)."""
    loop = cfg.loop
    if loop.max_cost and not cfg.run.cost_per_hour:
        raise LoopInputError("loop.max_cost needs run.cost_per_hour (what an hour of this machine costs, in USD): "
                             "without it the loop costs nothing and the budget never binds")
    spent = state.cost(cfg.run.cost_per_hour) + state.data.get("judge_usd", 0.0)
    if loop.max_cost and spent >= loop.max_cost:
        raise LoopInputError(f"loop.max_cost {loop.max_cost:g} USD is already spent: {state.path} records "
                             f"{spent:.4f} USD ({state.data['elapsed_s'] / 3600:.3f} h at {cfg.run.cost_per_hour:g}/h"
                             f"{' + the judge' if state.data.get('judge_usd') else ''}); raise loop.max_cost to go on")


def propose(out_dir: str | Path, spec: str | None = None, noise: float | None = None, skip_gate: bool = False,
            by: str = "agentboost continual propose", seed: int = 0) -> Path:
    """A proposal for the loop in ``out_dir`` (running or not): ``spec``, a checkpoint to try as
    the next candidate, or ``noise``, a copy of production with noise of that standard deviation
    (a rollback drill); ``skip_gate``: straight to the live test. Written atomically into the
    inbox, which the loop reads at its next poll."""
    out = Path(out_dir)
    if not (out / "loop.json").is_file():
        raise LoopInputError(f"{out} holds no loop (no loop.json): start one with `agentboost continual run`")
    if (spec is None) == (noise is None):
        raise LoopInputError("propose a checkpoint (SPEC) or a noised copy of production (--noise STD), not both")
    if spec is not None:
        from ..run.checkpoint import resolve_checkpoint, split_run_spec
        from ..serving.policies import split_prompt_spec, with_prompt

        weights, prompt = split_prompt_spec(spec)
        run, name = split_run_spec(weights)
        if (Path(run) / "config.yaml").is_file():
            weights = f"{Path(run).resolve()}:{resolve_checkpoint(run, name).name}"  # one step, now
        spec = with_prompt(weights, Path(prompt).resolve()) if prompt else weights
    if noise is not None and not noise > 0:
        raise LoopInputError(f"--noise must be > 0, got {noise}")
    inbox = out / INBOX
    inbox.mkdir(parents=True, exist_ok=True)
    path = inbox / f"{time.time():.6f}-{uuid.uuid4().hex[:8]}.json"
    atomic_write_text(path, json.dumps({"spec": spec, "noise": noise, "skip_gate": skip_gate, "by": by,
                                        "seed": seed}))
    return path


class ContinualLoop:
    def __init__(self, cfg: TrainConfig | None, out_dir: str | Path, resume: bool = False, host: str = "127.0.0.1",
                 port: int = 0, token: str | None = None, engine: str = "hf", max_batch_size: int = 8,
                 overrides: list[str] = (), log=print):
        """``resume``: go on with the loop in ``out_dir`` (its own configuration, with ``overrides``,
        e.g. a larger ``loop.max_cost``); else ``cfg`` starts a new one there."""
        self.out = Path(out_dir)
        self.log = log
        self._last = time.perf_counter()
        state = LoopState.load(self.out)
        if resume:
            if not state.exists:
                raise LoopInputError(f"{self.out} holds no loop to resume (no loop.json)")
            cfg = load_config(str(self.out / CONFIG), list(overrides), for_training=False)  # its own
            if overrides:
                save_config(cfg, self.out / CONFIG)
                state.event("config_changed", overrides=list(overrides))
        elif state.exists:
            raise LoopInputError(f"{self.out} already holds a loop (loop.json): resume it with --resume, or give "
                                 "another --out")
        if cfg is None:
            raise LoopInputError("a loop needs a configuration (CONFIG), or --resume DIR")
        self.cfg, self.state = cfg, state
        check_budget(cfg, state)
        self.gate_tasks = self._gate_tasks()
        self.host, self.port, self.engine, self.max_batch_size = host, port, engine, max_batch_size
        self.token = token or os.environ.get("AGENTBOOST_SERVE_TOKEN") or self._token_file()
        self.stop_requested: str | None = None
        self.router = None
        self.url: str | None = None
        self.served = ServedLog(self.out / SERVE_DIR, self.out)
        if not state.exists:  # a new loop: its configuration and the production version, before anything runs
            self.out.mkdir(parents=True, exist_ok=True)
            save_config(cfg, self.out / CONFIG)
            production = cfg.loop.production or cfg.model.path
            v = state.add_version(production, None, "production", "production")
            state.data["production"] = v["id"]
            state.event("start", production=v["id"], spec=production, fingerprint=v["fingerprint"])
            state.save()

    def _token_file(self) -> str:
        """A bearer token of the loop's own (its router is reconfigurable: token holders change its
        arms), kept owner-only in ``DIR/token`` for its clients."""
        path = self.out / "token"
        if path.is_file():
            return path.read_text().strip()
        self.out.mkdir(parents=True, exist_ok=True)
        token = secrets.token_urlsafe(24)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        return token

    def _gate_tasks(self) -> list[dict[str, Any]]:
        from ..tasks import load_tasks

        loop = self.cfg.loop
        path = loop.gate_file or self.cfg.data.val_file
        if not path:
            raise LoopInputError("the offline gate needs held-out tasks: set loop.gate_file (or data.val_file)")
        tasks = load_tasks(path, question_field=self.cfg.data.question_field)[: loop.gate_tasks]
        if len(tasks) < 2:
            raise LoopInputError(f"{path}: the offline gate needs at least 2 held-out tasks, found {len(tasks)}")
        return tasks

    # -- serving ----------------------------------------------------------------------------
    def arms(self) -> tuple[dict[str, str], float | None]:
        p, c = self.state.production, self.state.candidate
        if self.state.data["phase"] == "testing" and c is not None:
            return {"baseline": p["spec"], "experiment": c["spec"]}, self.cfg.loop.split
        return {"baseline": p["spec"]}, None

    def start_serving(self) -> str:
        from ..serving.router import build_router

        arms, split = self.arms()
        self.router = build_router(arms, engine=self.engine, config=str(self.out / CONFIG), overrides=[],
                                   max_batch_size=self.max_batch_size, split=split, out_dir=self.out / SERVE_DIR,
                                   token=self.token, reconfigurable=True, record=True, log=self.log)
        self.url = self.router.start_in_thread(self.host, self.port)
        self.state.data["url"] = self.url + "/v1"
        self.state.save()
        self.log(f"serving {', '.join(f'{n}={s}' for n, s in arms.items())} at {self.url}/v1 "
                 f"(sessions recorded in {self.out / SERVE_DIR / 'sessions.jsonl'})")
        return self.url

    def _swap(self, arms: dict[str, str], split: float | None, by: str) -> None:
        body = json.dumps({"arms": arms, "split": split, "by": f"continual loop: {by}"}).encode()
        req = urllib.request.Request(self.url + "/v1/admin/arms", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=3600) as r:
                json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"the router refused the arms {arms}: {e.code} {e.read()[:500]!r}") from None

    # -- the loop ---------------------------------------------------------------------------
    def request_stop(self, reason: str) -> None:
        self.stop_requested = reason

    def stop_on_signals(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.request_stop("stopped by SIGTERM"))

    def run(self) -> dict[str, Any]:
        st = self.state
        st.data["stopped"] = None
        if st.data["phase"] == "stopped":
            st.data["phase"] = "collecting"
        st.event("run", resumed=len(st.versions) > 1 or st.data["elapsed_s"] > 0)
        self.start_serving()
        self._last = time.perf_counter()
        try:
            while True:
                reason = self._step()
                if reason is not None:
                    break
                time.sleep(self.cfg.loop.poll_s)
            self._stop(reason)
            self._account()
            st.save()
            return self.report()
        finally:
            self._account()
            st.save()
            if self.router is not None:
                self.router.close()
                self.router = None

    def _account(self, busy_s: float = 0.0, booked_to: dict[str, Any] | None = None, kind: str = "") -> None:
        """Book the machine time since the last call: ``busy_s`` of it to ``booked_to``'s ``kind``
        (training, gate), the rest to serving, split between the arms by their tokens."""
        now = time.perf_counter()
        dt, self._last = now - self._last, now
        st, rate = self.state, self.cfg.run.cost_per_hour / 3600
        st.data["elapsed_s"] += dt
        if booked_to is not None:
            booked_to["usd"][kind] = booked_to["usd"].get(kind, 0.0) + busy_s * rate
        serving = max(0.0, dt - busy_s) * rate
        c = st.candidate if st.data["phase"] == "testing" else None
        if c is None:
            st.production["usd"]["serving"] += serving
            return
        rows = rows_of_test(self.served.ab_rows, st.production["spec"], c["spec"]) or []
        tokens = {a: sum(int(r.get("prompt_tokens", 0)) + int(r.get("completion_tokens", 0)) for r in rows
                         if r.get("event") == "call" and r.get("arm") == a) for a in ("baseline", "experiment")}
        share = tokens["experiment"] / sum(tokens.values()) if sum(tokens.values()) else self.cfg.loop.split
        c["usd"]["test"] = c["usd"].get("test", 0.0) + serving * share
        st.production["usd"]["serving"] += serving * (1 - share)

    def _spent(self) -> float:
        return self.state.cost(self.cfg.run.cost_per_hour) + self.state.data.get("judge_usd", 0.0)

    def _budget_reason(self) -> str | None:
        if self.stop_requested:
            return self.stop_requested
        loop = self.cfg.loop
        if loop.max_cost and self._spent() >= loop.max_cost:
            return f"reached loop.max_cost {loop.max_cost:g} USD ({self._spent():.4f} spent)"
        if self.cfg.run.max_wall_s and self.state.data["elapsed_s"] >= self.cfg.run.max_wall_s:
            return f"reached run.max_wall_s {self.cfg.run.max_wall_s:g} s"
        return None

    def _step(self) -> str | None:
        """One poll; the reason to stop, or None."""
        st = self.state
        self.served.poll()
        self._judge()
        self._account()
        st.data["counts"] = self.served.counts()
        reason = self._budget_reason()
        if reason is not None:
            return reason
        if st.data["phase"] == "testing":
            self._test()
        elif st.data.get("pending"):
            self._build(st.data["pending"])
        else:
            rounds_left = not self.cfg.loop.max_rounds or st.data["rounds"] < self.cfg.loop.max_rounds
            proposal = self._next_proposal() if rounds_left else None
            if proposal is not None:
                st.data["pending"] = proposal
                st.save()
                self._build(proposal)
            elif rounds_left:
                self._maybe_round()
            else:
                return f"reached loop.max_rounds {self.cfg.loop.max_rounds}"
        st.save()
        return self._budget_reason()

    # -- candidates -------------------------------------------------------------------------
    def _next_proposal(self) -> dict[str, Any] | None:
        inbox = self.out / INBOX
        for path in sorted(inbox.glob("*.json")) if inbox.is_dir() else []:
            try:
                p = json.loads(path.read_text())
            except ValueError as e:
                self.state.event("proposal_refused", file=path.name, reason=f"not JSON: {e}")
                path.rename(path.with_suffix(".refused"))
                continue
            path.rename(path.with_suffix(".taken"))
            kind = "drill" if p.get("noise") else "proposed"
            return {"kind": kind, "spec": p.get("spec"), "noise": p.get("noise"), "skip_gate": bool(p.get("skip_gate")),
                    "by": p.get("by"), "seed": int(p.get("seed") or 0), "sessions": []}
        return None

    def _maybe_round(self) -> None:
        st = self.state
        fresh = self.served.candidates_for(st.production["spec"], st.learned_from())
        if len(fresh) < self.cfg.loop.sessions_per_round:
            return
        pending = {"kind": "trained", "sessions": [s.episode_id for s in fresh], "skip_gate": False}
        st.data["pending"] = pending
        st.event("round", round=st.data["rounds"] + 1, sessions=len(fresh), parent=st.production["id"])
        st.save()
        self._build(pending)

    def _build(self, pending: dict[str, Any]) -> None:
        """Make the pending candidate (again, after a restart: from the same sessions), gate it,
        start its live test; or record why not."""
        from .candidates import NothingToLearn, noised_candidate, train_candidate

        st, cfg = self.state, self.cfg
        parent = st.production
        v = st.version(pending.get("version"))
        if v is None:
            vid = st.next_id()
            vdir = self.out / "versions" / vid
            t0 = time.perf_counter()
            try:
                if pending["kind"] == "trained":
                    episodes = [self.served.episode(self.served.sessions[e]) for e in pending["sessions"]
                                if e in self.served.sessions]
                    res = train_candidate(cfg, parent["spec"], episodes, vdir, seed=cfg.run.seed + st.data["rounds"],
                                          log=self.log)
                elif pending["kind"] == "drill":
                    res = noised_candidate(cfg, parent["spec"], float(pending["noise"]), vdir, seed=pending["seed"])
                else:
                    res = {"spec": pending["spec"], "method": "proposed"}
            except NothingToLearn as e:
                self._account(time.perf_counter() - t0, parent, "training")
                self._write_sessions(vid, pending["sessions"])  # looked at: never again
                st.data["rounds"] += 1
                st.data["pending"] = None
                st.event("nothing_to_learn", round=st.data["rounds"], reason=str(e), sessions=len(pending["sessions"]))
                self.log(f"round {st.data['rounds']}: {e}")
                st.add_version(parent["spec"], parent["id"], "trained", "skipped", reason=str(e),
                               sessions=len(pending["sessions"]))
                return
            except Exception as e:  # an unusable proposal: said, and the loop goes on serving
                st.data["pending"] = None
                st.data["rounds"] += 1
                st.event("candidate_failed", kind=pending["kind"], reason=f"{type(e).__name__}: {e}")
                self.log(f"warning: the candidate could not be made ({type(e).__name__}: {e}); production goes on")
                return
            train_s = time.perf_counter() - t0
            st.data["rounds"] += 1
            v = st.add_version(res["spec"], parent["id"], pending["kind"], "candidate", method=res.get("method"),
                               sessions=len(pending["sessions"]),
                               train={k: res[k] for k in ("trained_on", "rows", "groups", "first", "last",
                                                          "noise_std") if k in res} | {"wall_s": train_s})
            self._write_sessions(v["id"], pending["sessions"])
            if pending["kind"] != "proposed":
                self._account(train_s, v, "training")
            pending["version"] = v["id"]
            st.event("candidate", version=v["id"], parent=parent["id"], spec=v["spec"], kind=pending["kind"],
                     method=v.get("method"), sessions=v["sessions"], wall_s=train_s)
            self.log(f"candidate {v['id']} ({pending['kind']}, {v.get('method')}) from {parent['id']}: {v['spec']}")
            st.save()
        if pending.get("skip_gate"):
            v["gate"] = {"skipped": f"proposed with skip_gate by {pending.get('by')}"}
        else:
            passed = self._gate(v, parent)
            if not passed:
                v["status"] = "gated_out"
                st.data["pending"] = None
                st.save()
                return
        st.data["pending"] = None
        self._start_test(v)

    def _write_sessions(self, vid: str, sessions: list[str]) -> None:
        f = self.state.sessions_file(vid)
        f.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(f, "".join(f"{e}\n" for e in sessions))

    def _gate(self, v: dict[str, Any], parent: dict[str, Any]) -> bool:
        from ..evaluation.evaluate import evaluate

        from ..serving.policies import split_prompt_spec

        loop = self.cfg.loop
        t0 = time.perf_counter()
        (model, prompt), (base, base_prompt) = split_prompt_spec(v["spec"]), split_prompt_spec(parent["spec"])
        res = evaluate(model, base, self.gate_tasks, self.cfg, samples=loop.gate_samples, seed=self.cfg.run.seed,
                       slots=min(16, len(self.gate_tasks) * loop.gate_samples),
                       out_dir=self.out / "versions" / v["id"] / "gate", log=self.log, prompt_policy=prompt,
                       baseline_prompt_policy=base_prompt)
        wall = time.perf_counter() - t0
        self._account(wall, v, "gate")
        d = res["difference"]
        passed = d["mean_difference"] >= -loop.gate_max_drop
        v["gate"] = {"candidate": res["model"]["success_rate"], "parent": res["baseline"]["success_rate"],
                     "difference": d["mean_difference"], "ci95": d["ci95"], "p_value": d["p_value"],
                     "tasks": res["tasks"], "samples": loop.gate_samples, "passed": passed, "wall_s": wall}
        self.state.event("gate", version=v["id"], passed=passed, **{k: v["gate"][k] for k in
                                                                   ("candidate", "parent", "difference", "p_value")})
        self.log(f"gate {v['id']}: held-out success {res['model']['success_rate']:.3f} against its parent's "
                 f"{res['baseline']['success_rate']:.3f} ({d['mean_difference']:+.3f}, p = {d['p_value']:.4f}): "
                 f"{'passed' if passed else f'kept out (more than loop.gate_max_drop {loop.gate_max_drop:g} worse)'}")
        return passed

    # -- the live test ----------------------------------------------------------------------
    def _start_test(self, v: dict[str, Any]) -> None:
        st = self.state
        st.data["candidate"], st.data["phase"] = v["id"], "testing"
        v["status"] = "testing"
        v["test"] = {"started_at": time.time(), "split": self.cfg.loop.split}
        st.save()  # a restart from here serves the test (its arms), whatever the router got
        self._swap({"baseline": st.production["spec"], "experiment": v["spec"]}, self.cfg.loop.split,
                   f"live test of {v['id']}")
        st.event("test_started", version=v["id"], baseline=st.production["id"], split=self.cfg.loop.split)
        self.log(f"live test: {v['id']} on {self.cfg.loop.split:.0%} of new sessions against {st.production['id']}")

    def _test(self) -> None:
        st = self.state
        c, p = st.candidate, st.production
        rows = rows_of_test(self.served.ab_rows, p["spec"], c["spec"])
        if rows is None:
            return
        result = live_test(rows, self.cfg.loop)
        c["test"].update({k: result[k] for k in ("outcomes", "arms", "sequential", "metric")})
        if result["decision"] is None:
            return
        self._account()
        c["test"].update(decision=result["decision"], reason=result["reason"], ended_at=time.time(),
                         wall_s=time.time() - c["test"]["started_at"])
        if result["decision"] == "promote":
            self._swap({"baseline": c["spec"]}, None, f"promote {c['id']}")
            c["status"], p["status"] = "production", "retired"
            c["points"] = 100 * result["sequential"]["mean_difference"]
            c["usd_per_point"] = usd_per_point(c)
            st.data["production"] = c["id"]
        else:
            self._swap({"baseline": p["spec"]}, None, f"roll back {c['id']}")
            c["status"] = "rolled_back"
        c["reason"] = result["reason"]
        st.data["candidate"], st.data["phase"] = None, "collecting"
        st.event("promoted" if result["decision"] == "promote" else "rolled_back", version=c["id"],
                 reason=result["reason"], outcomes=result["outcomes"], p_value=result["sequential"]["p_value"],
                 difference=result["sequential"]["mean_difference"])
        self.log(f"{'promoted' if result['decision'] == 'promote' else 'rolled back'} {c['id']}: {result['reason']}")

    def _stop(self, reason: str) -> None:
        st = self.state
        c = st.candidate
        if st.data["phase"] == "testing" and c is not None and not self.stop_requested:
            # the budget or the rounds end the loop: a test still undecided ends with production as it was
            self._swap({"baseline": st.production["spec"]}, None, f"roll back {c['id']}: the loop stops")
            c.update(status="rolled_back", reason=f"undecided when the loop stopped ({reason})")
            c["test"].update(decision="rollback", reason=c["reason"], ended_at=time.time())
            st.data["candidate"], st.data["phase"] = None, "collecting"
            st.event("rolled_back", version=c["id"], reason=c["reason"])
        st.data["stopped"] = reason
        if not self.stop_requested:
            st.data["phase"] = "stopped" if st.data["phase"] != "testing" else st.data["phase"]
        st.event("stopped", reason=reason, spent_usd=self._spent())
        self.log(f"loop stopped: {reason}")

    # -- the judge --------------------------------------------------------------------------
    def _judge(self, limit: int = 16) -> None:
        loop = self.cfg.loop
        if not loop.judge:
            return
        from ..rewards.judge import judge_config, judge_episode

        cfg = judge_config(loop.judge, "loop.judge")
        for s in self.served.unjudged(loop.feedback_wait_s)[:limit]:
            ep = self.served.episode(s)
            row: dict[str, Any] = {"episode_id": s.episode_id, "session": s.session}
            try:
                result = judge_episode(cfg, {"task_id": s.task_id}, ep)
                row.update(reward=result.reward, reason=(result.metadata.get("judge") or {}).get("reason"))
                self.state.data["judge_usd"] = self.state.data.get("judge_usd", 0.0) + \
                    (result.metadata.get("judge") or {}).get("cost_usd", 0.0)
            except Exception as e:  # a judge that fails leaves the session unrewarded: counted, never trained on
                row.update(reward=None, error=f"{type(e).__name__}: {e}")
            with open_append(self.out / JUDGED) as f:
                f.write(json.dumps(row) + "\n")
        self.served.poll()

    # -- the report -------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        return loop_report(self.out)


def loop_report(out_dir: str | Path) -> dict[str, Any]:
    """The loop's state for ``continual status`` and the job service: versions with their lineage,
    figures and cost, the production version, the counts of sessions."""
    st = LoopState.load(out_dir)
    if not st.exists:
        raise LoopInputError(f"{out_dir} holds no loop (no loop.json)")
    cfg = load_config(str(Path(out_dir) / CONFIG), for_training=False) if (Path(out_dir) / CONFIG).is_file() else None
    rate = cfg.run.cost_per_hour if cfg is not None else 0.0
    gained = sum(v.get("points") or 0.0 for v in st.versions if v.get("points"))
    spent = st.cost(rate) + st.data.get("judge_usd", 0.0)
    return {"dir": str(Path(out_dir)), "phase": st.data["phase"], "stopped": st.data.get("stopped"),
            "url": st.data.get("url"), "production": st.data["production"], "candidate": st.data["candidate"],
            "rounds": st.data["rounds"], "spent_usd": spent, "max_cost": cfg.loop.max_cost if cfg else None,
            "points_gained": gained, "usd_per_point": spent / gained if gained > 0 else None,
            "sessions": st.data.get("counts") or {}, "versions": st.versions}


def report_text(r: dict[str, Any]) -> str:
    c = r["sessions"]
    lines = [f"loop {r['dir']}: {r['phase']}" + (f" ({r['stopped']})" if r.get("stopped") else "")
             + f"; production {r['production']}" + (f", testing {r['candidate']}" if r.get("candidate") else ""),
             f"sessions: {c.get('served', 0)} served, {c.get('recorded', 0)} recorded, rewarded "
             f"{', '.join(f'{n} by {k}' for k, n in (c.get('rewarded') or {}).items()) or '0'}, "
             f"{c.get('unrewarded', 0)} without a reward and {c.get('not_trainable', 0)} incomplete or failed "
             + (f"({c['unconfirmed_delivery']} being answered when a server stopped) " if c.get("unconfirmed_delivery")
                else "") + "(never trained on)",
             f"cost: {r['spent_usd']:.4f} USD" + (f" of {r['max_cost']:g}" if r.get("max_cost") else "")
             + (f"; {r['points_gained']:+.1f} points gained, {r['usd_per_point']:.4f} USD a point"
                if r.get("usd_per_point") else "")]
    for v in r["versions"]:
        u = v["usd"]
        gate = v.get("gate") or {}
        test = v.get("test") or {}
        seq = test.get("sequential") or {}
        line = (f"{v['id']} {v['status']:<11} parent {v['parent'] or '-':<5} {v['origin']:<10} "
                f"{(v.get('method') or '-'):<8} sessions {v.get('sessions', 0):>4}  "
                f"usd train {u['training']:.4f} gate {u['gate']:.4f} serve {u['serving'] + u.get('test', 0.0):.4f}")
        if "passed" in gate:
            line += f"  gate {gate['difference']:+.3f} (p {gate['p_value']:.3f})"
        elif "skipped" in gate:
            line += "  gate skipped"
        if seq:
            line += (f"  live {seq.get('mean_difference') if seq.get('mean_difference') is None else format(seq['mean_difference'], '+.3f')}"
                     f" p {seq['p_value']:.4g} over {test.get('outcomes', 0)} outcomes")
        if v.get("usd_per_point"):
            line += f"  {v['usd_per_point']:.4f} USD/point"
        lines.append(line)
        if v.get("reason"):
            lines.append(f"      {v['reason']}")
    return "\n".join(lines)
