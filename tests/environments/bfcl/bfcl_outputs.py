"""Model outputs for BFCL entries, right and wrong, in two forms: bfcl-eval's result format for a
function-calling model (what `bfcl evaluate` reads) and the Strands messages an agentboost episode
stores (what agentboost's scorer reads). Built from the entries' ground truth, then changed in the
ways models get calls wrong: a wrong value, a missing or an extra argument, a wrong function, a
missing or a repeated call, text instead of a call, a turn left out."""

from __future__ import annotations

import ast
import inspect
import json

from agentboost.environments.bfcl import package
from agentboost.environments.bfcl.tools import ApiSession, tool_name

RELEVANCE = ("irrelevance", "live_irrelevance", "live_relevance")


# -- single-call ------------------------------------------------------------------------------
def _first(options):
    """The first accepted value of a possible answer (BFCL lists the accepted values; "" = may be left out)."""
    for v in options:
        if v != "":
            return _value(v), True
    return None, False


def _value(v):
    if isinstance(v, dict):
        out = {}
        for k, opts in v.items():
            val, present = _first(opts) if isinstance(opts, list) else (opts, True)
            if present:
                out[k] = val
        return out
    return v


def _truth_calls(gt) -> list[tuple[str, dict]]:
    calls = []
    for call in gt:
        (name, params), = call.items()
        args = {}
        for k, opts in params.items():
            val, present = _first(opts)
            if present:
                args[k] = val
        calls.append((tool_name(name), args))
    return calls


def _wrong(v):
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return v + 7
    if isinstance(v, str):
        return v + "_changed"
    if isinstance(v, list):
        return v + [v[0]] if v else ["x"]
    if isinstance(v, dict):
        return {**v, "unexpected": 1}
    return "changed"


def single_call_variants(e: dict) -> list[list[tuple[str, dict]] | str]:
    """Outputs for one entry: each a list of (tool name, arguments), or a text."""
    gt = package.ground_truth(e["id"])
    category = package.category_of(e["id"])
    if category in RELEVANCE:
        if not e["function"]:  # a few live_irrelevance entries offer no function at all
            return ["I cannot help with that using the functions I have.", [], [("get_weather", {"city": "Boston"})]]
        doc = e["function"][0]
        args = {k: "x" for k in (doc["parameters"].get("required") or [])}
        return ["I cannot help with that using the functions I have.", [], [(tool_name(doc["name"]), args)]]
    calls = _truth_calls(gt)
    out: list = [calls]
    # a wrong value in the last call's first argument, or an extra one where it has none
    name, args = calls[-1]
    if args:
        k = sorted(args)[0]
        out.append(calls[:-1] + [(name, {**args, k: _wrong(args[k])})])
        out.append(calls[:-1] + [(name, {kk: vv for kk, vv in args.items() if kk != k})])  # one left out
    out.append(calls[:-1] + [(name, {**args, "unexpected_argument": 1})])
    out.append([(name + "_other", args)] + calls[1:])  # a function that does not exist
    out.append(calls + [calls[0]] if len(calls) > 1 else calls * 2)  # one call too many
    out.append("Sure: " + json.dumps([{n: a} for n, a in calls]))  # the call as text, not a call
    return out


# -- multi-turn -------------------------------------------------------------------------------
def _bind(methods: dict, text: str) -> tuple[str, dict]:
    call = ast.parse(text, mode="eval").body
    name = call.func.id
    args = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    if call.args:
        params = list(inspect.signature(methods[name]).parameters)
        for p, a in zip(params, call.args):
            args[p] = ast.literal_eval(a)
    return name, args


def multi_turn_variants(e: dict) -> list[list[list]]:
    """Outputs for one entry: per turn a list of steps; a step is a list of (name, arguments) or a text."""
    gt = package.ground_truth(e["id"])
    methods = ApiSession(e["involved_classes"], e.get("initial_config") or {}).methods
    methods.update({n: m for d in (e.get("missed_function") or {}).values() for n, m in [(x["name"], None) for x in d]
                    if n not in methods})
    truth = [[_bind(methods, c) for c in turn] for turn in gt]
    # as a model answers: the turn's calls one step at a time, then a text
    right = [[[c] for c in turn] + ["Done."] for turn in truth]
    out = [right]
    last = max((i for i, t in enumerate(truth) if t), default=None)
    if last is not None:
        v = [list(t) for t in right]
        v[last] = [[c] for c in truth[last][:-1]] + ["Done."]  # the last call of a turn missing
        out.append(v)
        name, args = truth[last][-1]
        if args:
            k = sorted(args)[0]
            v = [list(t) for t in right]
            v[last] = [[c] for c in truth[last][:-1]] + [[(name, {**args, k: _wrong(args[k])})], "Done."]
            out.append(v)  # a wrong argument
        v = [list(t) for t in right]
        v[last] = [[c for c in truth[last]]] + ["Done."]  # all of a turn's calls in one step: still right
        out.append(v)
        v = [list(t) for t in right]
        v[last] = [[c] for c in truth[last]] + [[truth[last][0]], "Done."]  # a call repeated
        out.append(v)
    out.append(right[:-1])  # a turn left out: force-terminated
    empty = next((i for i, t in enumerate(truth) if not t), None)
    if empty is not None and last is not None:  # a call where the user left something out (miss_param/func)
        v = [list(t) for t in right]
        v[empty] = [[truth[last][0]], "Done."]
        out.append(v)
    return out


# -- the two forms ----------------------------------------------------------------------------
def fc_single(output) -> list[dict] | str:
    return output if isinstance(output, str) else [{n: json.dumps(a)} for n, a in output]


def fc_multi(output) -> list[list]:
    return [[step if isinstance(step, str) else [{n: json.dumps(a)} for n, a in step] for step in turn]
            for turn in output]


def _assistant(step, ids) -> list[dict]:
    if isinstance(step, str):
        return [{"role": "assistant", "content": [{"text": step}]}]
    uses = [{"toolUse": {"toolUseId": f"t{next(ids)}", "name": n, "input": a}} for n, a in step]
    results = [{"toolResult": {"toolUseId": u["toolUse"]["toolUseId"], "status": "success",
                               "content": [{"text": "ok"}]}} for u in uses]
    msgs = [{"role": "assistant", "content": uses}]
    if uses:
        msgs.append({"role": "user", "content": results})
    return msgs


def messages_single(e: dict, output) -> list[dict]:
    import itertools

    step = output if isinstance(output, str) else output
    return [{"role": "user", "content": [{"text": "the question"}]}] + _assistant(step, itertools.count())[:1]


def messages_multi(e: dict, output) -> list[dict]:
    import itertools

    ids = itertools.count()
    msgs = []
    for i, turn in enumerate(output):
        msgs.append({"role": "user", "content": [{"text": f"turn {i}"}]})
        for step in turn:
            msgs.extend(_assistant(step, ids))
    return msgs
