"""agentboost's scoring of a tau2 trajectory, written from tau2's documented rules (not its code):
the reward is the product of the checks of the task's reward basis.

- DB: the agent's (and in telecom the user's) database after replaying every tool call of the
  trajectory on a fresh environment in the task's initial state has the same tau2 hash as after
  replaying the gold actions on another fresh one (a gold action that errors is skipped, as tau2 does).
  The trajectory's calls replay as tau2 ran them live, each followed by the environment's sync
  (telecom: the user's device state, line status, roaming and data limit, into the databases); the
  gold actions replay as tau2's evaluator replays them, with no sync after them. In telecom the two
  databases then differ whenever a gold action changes what the sync would copy (e.g.
  ``refuel_data``: the device still shows the data limit exceeded), so tau2 gives a trajectory that
  makes exactly the gold calls a DB check of 0 there; agentboost gives the same, as tau2 is what
  users compare with.
- ENV_ASSERTION: each assertion function, run on the replayed environment, returns its asserted value.
- ACTION: each gold action is among the trajectory's tool calls (same name; the action's
  ``compare_args``, or all of the call's arguments when it has none, equal).
- COMMUNICATE: each required string is in some assistant text message (case-insensitive, with the
  message's commas removed).
- NL_ASSERTION needs an LLM judge (``NLAssertionJudge``: any chat model through its Strands
  provider, asked with tau2's own judge prompt, read from the installed package; every assertion
  must be met). Without one the basis is reduced (the metric is then named for what it measures,
  e.g. ``tau2_retail_db_comm``, and is not the official score).

An ending other than a user or agent stop scores 0; a task without evaluation criteria scores 1.

Trajectory format: a list of messages ``{"role": "assistant"|"user"|"tool", "content": ...}``;
assistant/user messages may carry ``tool_calls`` ``[{"id", "name", "arguments", "requestor"}]``,
each followed by its ``{"role": "tool", "id", "content"}`` result. It includes the task's initial
message history, if any (as tau2's simulations do)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...reasoning import block_content
from ...rewards.registry import RewardResult
from .domain import (
    Tau2Error,
    initial_environment,
    tool_calls_with_results,
)

STOP_REASONS = ("user_stop", "agent_stop")
TERMINATION_REASONS = ("user_stop", "agent_stop", "judge_stop", "max_steps", "too_many_errors", "agent_error", "user_error")
_SHORT = {"DB": "db", "ENV_ASSERTION": "env", "ACTION": "action", "COMMUNICATE": "comm", "NL_ASSERTION": "nl"}
_ORDER = ("DB", "ENV_ASSERTION", "ACTION", "COMMUNICATE", "NL_ASSERTION")


@dataclass
class Tau2Score:
    reward: float
    metric: str  # "tau2_<domain>" when the task's whole basis was scored, else "tau2_<domain>_<checks>"
    official: bool
    basis: list[str]  # the checks that were scored
    breakdown: dict[str, float] = field(default_factory=dict)
    note: str = ""


def metric_name(domain: str, basis: list[str], reduced: bool) -> str:
    if not reduced:
        return f"tau2_{domain}"
    return f"tau2_{domain}_" + "_".join(_SHORT[b] for b in _ORDER if b in basis)


def _all_tool_calls(messages: list[dict]) -> list[dict]:
    return [c for m in messages if m["role"] in ("assistant", "user") for c in (m.get("tool_calls") or [])]


def action_matches(action: dict, call: dict) -> bool:
    if action["name"] != call["name"]:
        return False
    keys = action.get("compare_args")
    if keys is None:
        keys = list(call["arguments"])
    return ({k: v for k, v in call["arguments"].items() if k in keys}
            == {k: v for k, v in action["arguments"].items() if k in keys})


def communicated(info: str, messages: list[dict]) -> bool:
    for m in messages:
        text = m.get("content")
        if m["role"] == "assistant" and isinstance(text, str) and text.strip():
            if info.lower() in text.lower().replace(",", ""):
                return True
    return False


def _db_and_assertions(row: dict, messages: list[dict], crit: dict, solo_mode: bool) -> tuple[float, float]:
    actions, assertions = crit.get("actions"), crit.get("env_assertions")
    if actions is None and assertions is None:
        return 1.0, 1.0
    predicted = initial_environment(row, solo_mode=solo_mode, history=messages)
    gold = initial_environment(row)
    for a in actions or []:
        # tau2's evaluator calls the gold actions with make_tool_call, which does not sync the
        # environment (a live call, as in the trajectory's replay, does): no sync here either, or the
        # DB check differs from tau2's in telecom
        try:
            gold.make_tool_call(a["name"], requestor=a.get("requestor", "assistant"), **a["arguments"])
        except Exception:  # a gold action that raises is skipped, as tau2 skips it (its changes so far stay)
            pass
    db = float(gold.get_db_hash() == predicted.get_db_hash()
               and gold.get_user_db_hash() == predicted.get_user_db_hash())
    env = 1.0
    for a in assertions or []:
        kit = predicted.user_tools if a["env_type"] == "user" else predicted.tools
        result = getattr(kit, a["func_name"])(**a["arguments"])
        predicted.sync_tools()
        if not isinstance(result, bool):
            raise Tau2Error(f"task {row['task_id']}: assertion {a['func_name']} returned {type(result).__name__}, "
                            "not a bool")
        env *= float(result == a.get("assert_value", True))
    return db, env


def score(row: dict, messages: list[dict], termination: str, judge=None, solo_mode: bool = False,
          all_nl_assertions: bool = False) -> Tau2Score:
    """Score a trajectory of task ``row`` (a ``data prepare tau2`` row). ``judge`` (a callable
    ``(row, messages) -> float`` in [0, 1]) scores NL_ASSERTION; without it that check is left out
    of the basis and the score is named as reduced. ``all_nl_assertions`` (with a judge): the
    task's NL assertions are scored even where its basis does not name them (a stricter metric,
    named so, not the official score)."""
    domain = row["domain"]
    if termination not in TERMINATION_REASONS:
        raise Tau2Error(f"unknown termination reason {termination!r}; expected one of {', '.join(TERMINATION_REASONS)}")
    crit = row.get("evaluation_criteria")
    full = list((crit or {}).get("reward_basis") or [])
    basis = [b for b in full if b != "NL_ASSERTION" or judge is not None]
    if judge is not None and all_nl_assertions and (crit or {}).get("nl_assertions") and "NL_ASSERTION" not in basis:
        basis.append("NL_ASSERTION")
    reduced = basis != full
    name = metric_name(domain, basis, reduced)
    if termination not in STOP_REASONS:
        return Tau2Score(0.0, name, not reduced, basis, note=f"terminated: {termination}")
    if crit is None:
        return Tau2Score(1.0, name, True, basis, note="no evaluation criteria")
    tool_calls_with_results(messages)  # a malformed trajectory is an error, not a score
    breakdown: dict[str, float] = {}
    if {"DB", "ENV_ASSERTION"} & set(basis):
        db, env = _db_and_assertions(row, messages, crit, solo_mode)
        if "DB" in basis:
            breakdown["DB"] = db
        if "ENV_ASSERTION" in basis:
            breakdown["ENV_ASSERTION"] = env
    if "ACTION" in basis:
        calls = _all_tool_calls(messages)
        breakdown["ACTION"] = float(all(any(action_matches(a, c) for c in calls) for a in crit.get("actions") or []))
    if "COMMUNICATE" in basis:
        breakdown["COMMUNICATE"] = float(all(communicated(s, messages) for s in crit.get("communicate_info") or []))
    if "NL_ASSERTION" in basis:
        breakdown["NL_ASSERTION"] = float(judge(row, messages)) if crit.get("nl_assertions") else 1.0
    reward = 1.0
    for v in breakdown.values():
        reward *= v
    return Tau2Score(reward, name, not reduced, basis, breakdown)


class NLAssertionJudge:
    """tau2's NL_ASSERTION judge on any chat model through its Strands provider
    (``agentboost.models.chat``): tau2's own judge prompt (the installed package's text), the
    trajectory as tau2 writes it (``role: content`` lines), the assertions; 1.0 when the judge says
    every assertion is met. ``checks`` keeps each assertion's verdict and reasoning. A reply that is
    not the JSON tau2 asks for raises (the episode errs, with the reply in its error); an outage
    propagates (the episode is aborted)."""

    def __init__(self, chat: Any, max_tokens: int = 1024):
        from ...models.chat import chat_model_spec

        self.chat = chat_model_spec(chat, "tau2 judge")
        self.max_tokens = max_tokens
        self.checks: list[dict[str, Any]] = []
        self.calls = 0

    def prompt(self, row: dict, messages: list[dict]) -> tuple[str, str]:
        assertions = (row.get("evaluation_criteria") or {}).get("nl_assertions") or []
        trajectory = "\n".join(f"{m['role']}: {m.get('content')}" for m in messages)
        return nl_judge_system_prompt(), f"conversation:\n{trajectory}\n\nexpectedOutcomes:\n{assertions}"

    def __call__(self, row: dict, messages: list[dict]) -> float:
        system, user = self.prompt(row, messages)
        assertions = (row.get("evaluation_criteria") or {}).get("nl_assertions") or []
        self.calls += 1
        text, _ = self.chat.ask(system, user, self.max_tokens)
        if text is None:
            raise Tau2Error(f"the NL-assertion judge's reply was cut at {self.max_tokens} tokens")
        results = _judge_results(text)
        self.checks = [{"assertion": r.get("expectedOutcome"), "met": r.get("metExpectation") is True,
                        "reasoning": r.get("reasoning")} for r in results]
        # every assertion graded and met; a judge that skipped one has not said it was met
        return float(len(self.checks) >= len(assertions) and all(c["met"] for c in self.checks))


def _judge_results(text: str) -> list[dict]:
    from ...models.chat import json_object

    data = json_object(text)
    if not isinstance(data, dict) or not isinstance(data.get("results"), list) or \
            not all(isinstance(r, dict) for r in data["results"]):
        raise Tau2Error(f"the NL-assertion judge did not answer with tau2's JSON results: {text[:300]!r}")
    return data["results"]


def nl_judge_system_prompt() -> str:
    """tau2's NL-assertion judge prompt, read from the installed package (a local variable of its
    evaluator, which imports litellm and so is read, not imported)."""
    import ast
    import inspect
    from pathlib import Path

    import tau2

    src = Path(tau2.__file__).parent / "evaluator" / "evaluator_nl_assertions.py"
    for node in ast.walk(ast.parse(src.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "system_prompt" for t in node.targets) \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return inspect.cleandoc(node.value.value)
    raise Tau2Error(f"the installed tau2 has no NL-assertion judge prompt in {src} (another tau2 version?)")


def trajectory_from_strands(messages: list[dict]) -> list[dict]:
    """Strands messages (an episode's ``messages``) in the trajectory format above. Tool results
    are put in the order of their calls."""
    out: list[dict] = []
    for m in messages:
        blocks = m.get("content") or []
        text = "".join(b["text"] for b in blocks if "text" in b) or None
        uses = [b["toolUse"] for b in blocks if "toolUse" in b]
        results = {b["toolResult"]["toolUseId"]: b["toolResult"] for b in blocks if "toolResult" in b}
        if m["role"] == "assistant":
            msg = {"role": "assistant", "content": block_content(blocks) or None}  # its reasoning left out
            if uses:
                msg["tool_calls"] = [{"id": u["toolUseId"], "name": u["name"], "arguments": dict(u.get("input") or {}),
                                      "requestor": "assistant"} for u in uses]
            out.append(msg)
            continue
        if results:
            order = [c["id"] for c in (out[-1].get("tool_calls") or [])] if out else []
            for rid in order + [r for r in results if r not in order]:
                if rid in results:
                    r = results[rid]
                    out.append({"role": "tool", "id": rid, "requestor": "assistant", "error": r.get("status") == "error",
                                "content": "".join(c.get("text", "") for c in r.get("content") or [])})
        if text is not None:
            out.append({"role": "user", "content": text})
    return out


def solo_stop(messages: list[dict]) -> list[dict]:
    """A solo run's trajectory as tau2 records it: an assistant message calling ``done`` becomes the
    stop message ``###STOP###`` (its tool call and result removed)."""
    out, drop = [], set()
    for m in messages:
        calls = m.get("tool_calls") or []
        if m["role"] == "assistant" and any(c["name"] == "done" for c in calls):
            drop |= {c["id"] for c in calls}
            out.append({"role": "assistant", "content": "###STOP###"})
        elif m["role"] == "tool" and m["id"] in drop:
            continue
        else:
            out.append(m)
    return out


def tau2_reward(task: dict, episode) -> RewardResult:
    """A reward function (``--reward agentboost.environments.tau2.evaluator:tau2_reward``) for an episode
    that ran to its end on a tau2 row. A conversation (``tau2_conversation``) gives its termination;
    a single-prompt, ticket-style run is scored as an agent stop."""
    conv = episode.metadata.get("conversation") or {}
    termination = conv.get("termination", "agent_stop")
    traj = trajectory_from_strands(episode.messages)
    if conv.get("solo"):
        traj = solo_stop(traj)
    judge = NLAssertionJudge(conv["judge"]) if conv.get("judge") else None
    s = score(task, traj, termination, judge=judge, solo_mode=bool(conv.get("solo")),
              all_nl_assertions=conv.get("nl_assertions") == "all")
    meta = {"metric": s.metric, "official": s.official, "termination": termination}
    if judge is not None and judge.calls:
        meta["nl_assertions"] = judge.checks
        meta["judge"] = {"model": judge.chat.describe(), "calls": judge.calls}
    if not conv:
        # tau2's protocol has a user simulator (solo mode only in telecom): a run without one is a
        # training proxy, whatever its basis
        meta["protocol"] = "ticket (no user simulator): a training proxy"
    else:
        meta["user_signal"] = conv.get("user_signal")
        meta["tool_errors"] = conv.get("tool_errors")
        meta["protocol"] = (("solo mode (tau2's, no user)" if conv.get("solo") else f"conversation, {conv['user']} user")
                            + ("" if conv.get("user_official") else
                            ": a training proxy") + ("" if conv.get("official_prompt") else
                            ", non-official system prompt"))
        meta["official"] = s.official and bool(conv.get("user_official")) and bool(conv.get("official_prompt"))
    return RewardResult(s.reward, {k.lower(): v for k, v in s.breakdown.items()} or {"outcome": s.reward}, meta)
