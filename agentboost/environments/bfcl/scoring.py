"""BFCL's scoring of an episode, with BFCL's own checkers (``bfcl-eval``'s ``ast_checker`` and
``multi_turn_checker``), exactly as its evaluation runner calls them for a function-calling model.

An episode's stored messages give the model's output in BFCL's terms:

- single-call: the tool calls of the model's one response, in order, each ``{tool name: arguments}``
  (BFCL's FC decoding); a response without a call is text, which BFCL fails to decode. Relevance
  categories score whether there was a call (``irrelevance``: none; ``live_relevance``: some), the
  others go through ``ast_checker`` after BFCL's format check, with the entry's function docs as its
  evaluation reads them (no language hints) and agentboost's model entry (``package.MODEL_NAME``:
  dots of function names offered as underscores);
- multi-turn: per turn, per step, the calls as BFCL's FC decoder writes them
  (``name(key=repr(value),...)``); steps without a call are left out, as BFCL leaves out a response
  it cannot decode; an episode with fewer turns than the entry is force-terminated (invalid), and
  the rest goes to ``multi_turn_checker``, which replays the calls and the ground truth on fresh
  instances of BFCL's API classes and compares their state and responses after every turn.

``multi_turn_checker`` keeps its instances in a module-level table keyed by model and entry, so that
two scorings of one entry in a process would share (and corrupt) their state: each scoring uses a
model name of its own and removes its instances afterwards. It also ``eval``s each call string; a
call is handed to it only when its name is one of the entry's functions or an undefined name (which
BFCL answers with a ``NameError``), and its argument names are identifiers; other calls (a Python
builtin such as ``open``, or a key that is not a name) are left out of the replay, which BFCL
would execute. The values are JSON values, whose ``repr`` is a literal.
"""

from __future__ import annotations

import builtins
import uuid
from typing import Any

from ...rewards.registry import RewardResult
from . import package
from .tools import tool_name

_IDENT = __import__("re").compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def scorer_version() -> str:
    return f"bfcl-eval {package.bfcl().version}"


# -- the model's output, from the stored messages ------------------------------------------------
def _assistant_calls(message: dict) -> list[tuple[str, dict]]:
    return [(b["toolUse"]["name"], dict(b["toolUse"].get("input") or {}))
            for b in message.get("content") or [] if "toolUse" in b]


def _text(message: dict) -> str:
    return "".join(b.get("text", "") for b in message.get("content") or [] if "text" in b)


def _is_turn_start(message: dict) -> bool:
    blocks = message.get("content") or []
    return message["role"] == "user" and not any("toolResult" in b for b in blocks)


def single_call_output(messages: list[dict], initial: int = 0) -> list[dict] | str:
    """The model's one response as BFCL's FC decoder reads it: a list of ``{name: arguments}``, or
    its text when it called nothing."""
    for m in messages[initial:]:
        if m["role"] == "assistant":
            calls = _assistant_calls(m)
            return [{name: args} for name, args in calls] if calls else _text(m)
    return ""


def call_string(name: str, arguments: dict) -> str:
    """BFCL's FC decoder's text of a call (``model_handler.utils.convert_to_function_call``)."""
    return f"{name}({','.join(f'{k}={v!r}' for k, v in arguments.items())})"


def multi_turn_output(messages: list[dict], initial: int = 0) -> list[list[list[tuple[str, dict]]]]:
    """Per turn (a user message that is no tool result starts one), per step with calls, the calls."""
    turns: list[list[list[tuple[str, dict]]]] = []
    for m in messages[initial:]:
        if _is_turn_start(m):
            turns.append([])
        elif m["role"] == "assistant" and turns:
            calls = _assistant_calls(m)
            if calls:
                turns[-1].append(calls)
    return turns


def _replayable(name: str, arguments: dict, functions: set[str]) -> bool:
    if not _IDENT.match(name) or not all(isinstance(k, str) and _IDENT.match(k) for k in arguments):
        return False
    if name in functions:
        return True
    checker_globals = vars(package.bfcl().multi_turn_utils)
    return name not in checker_globals and not hasattr(builtins, name)


# -- scoring ---------------------------------------------------------------------------------
def score_single_call(bfcl_id: str, output: list[dict] | str) -> dict[str, Any]:
    """BFCL's verdict on one single-call output: ``{"valid": bool, "error_type", "error"}``."""
    b = package.bfcl()
    category = package.category_of(bfcl_id)
    decoded = output if isinstance(output, list) else None  # text: BFCL's FC decoding fails
    if category in ("irrelevance", "live_irrelevance", "live_relevance"):
        called = decoded is not None and not b.utils.is_empty_output(decoded)
        ok = not called if "irrelevance" in category else called
        if ok:
            return {"valid": True}
        return ({"valid": False, "error_type": "irrelevance_error:decoder_success",
                 "error": "Valid syntax. Successfully decode AST when it should not."} if "irrelevance" in category else
                {"valid": False, "error_type": "relevance_error:decoder_failed",
                 "error": "Invalid syntax. Failed to decode AST when it should have."})
    if decoded is None:
        return {"valid": False, "error_type": "ast_decoder:decoder_failed", "error": "Invalid syntax. Failed to decode AST."}
    if not b.utils.is_function_calling_format_output(decoded):
        return {"valid": False, "error_type": "ast_decoder:decoder_wrong_output_format",
                "error": "Did not output in the specified format."}
    from bfcl_eval.constants.enums import Language

    lang = {"java": Language.JAVA, "javascript": Language.JAVASCRIPT}.get(package.language(category), Language.PYTHON)
    entry = package.entry(bfcl_id, hints=False)
    result = b.ast_checker.ast_checker(entry["function"], decoded, package.ground_truth(bfcl_id), lang, category,
                                       package.MODEL_NAME)
    if result["valid"]:
        return {"valid": True}
    return {"valid": False, "error_type": result.get("error_type"), "error": "; ".join(map(str, result.get("error") or []))}


def score_multi_turn(bfcl_id: str, turns: list[list[list[tuple[str, dict]]]]) -> dict[str, Any]:
    b = package.bfcl()
    truth = package.ground_truth(bfcl_id)
    if len(turns) != len(truth):
        return {"valid": False, "error_type": "multi_turn:force_terminated",
                "error": f"the model's turns ({len(turns)}) do not match the ground truth's ({len(truth)})"}
    entry = package.entry(bfcl_id, hints=False)
    functions = {doc["name"] for doc in entry["function"]}
    functions |= {doc["name"] for docs in (entry.get("missed_function") or {}).values() for doc in docs}
    decoded = [[[call_string(n, a) for n, a in step if _replayable(n, a, functions)] for step in turn] for turn in turns]
    decoded = [[step for step in turn if step] for turn in decoded]
    model_name = f"agentboost_{uuid.uuid4().hex}"  # a table slot of its own (see the module's docstring)
    table = vars(b.multi_turn_utils)
    try:
        result = b.multi_turn_checker.multi_turn_checker(decoded, truth, entry, package.category_of(bfcl_id), model_name)
    finally:
        for key in [k for k in table if k.startswith(model_name)]:
            del table[key]
    if result["valid"]:
        return {"valid": True}
    return {"valid": False, "error_type": result.get("error_type"), "error": str(result.get("error_message", ""))}


def score_messages(task: dict, messages: list[dict], conversation: dict | None = None) -> dict[str, Any]:
    """BFCL's verdict on an episode's messages (``conversation``: its record, for where the agent's
    own messages start)."""
    bfcl_id = task.get("bfcl_id")
    if not bfcl_id:
        raise package.BfclError(f"task {task.get('task_id')!r} is not a BFCL row (no bfcl_id)")
    want = task.get("data_digest")
    if want and want != package.digest(bfcl_id):
        raise package.BfclError(f"task {task.get('task_id')!r} was made from other BFCL data than the installed "
                                f"bfcl-eval {package.bfcl().version}; prepare the tasks again")
    initial = int((conversation or {}).get("initial_messages", 0))
    if package.is_multi_turn(package.category_of(bfcl_id)):
        return score_multi_turn(bfcl_id, multi_turn_output(messages, initial))
    return score_single_call(bfcl_id, single_call_output(messages, initial))


def bfcl_reward(task: dict, episode) -> RewardResult:
    """The reward (``reward.name: agentboost.environments.bfcl.scoring:bfcl_reward``): 1 when BFCL's
    checker accepts the episode's output, else 0; the checker's error type and message are kept."""
    conv = episode.metadata.get("conversation") or {}
    verdict = score_messages(task, episode.messages, conv)
    # BFCL's figure only from BFCL's protocol (every function offered, its step limit)
    meta = {"bfcl_id": task["bfcl_id"], "scorer": scorer_version(), "valid": verdict["valid"],
            "official": bool(conv.get("official"))}
    if not verdict["valid"]:
        meta.update(error_type=verdict.get("error_type"), error=str(verdict.get("error", ""))[:500])
    score = 1.0 if verdict["valid"] else 0.0
    return RewardResult(score, {"outcome": score}, meta)


__all__ = ["bfcl_reward", "call_string", "multi_turn_output", "score_messages", "score_multi_turn",
           "score_single_call", "scorer_version", "single_call_output", "tool_name"]
