"""Every training configuration key with its type, default, bounds or choices and meaning, read
from the schema itself (``run/config.py``: the dataclasses, their comments, ``BOUNDS`` and the
choices the validation checks), never from a hand-kept copy. ``agentboost config`` prints it;
``docs/configuration.md`` is its markdown, kept equal by ``tests/run/test_config_reference.py``."""

from __future__ import annotations

import dataclasses
import inspect
import io
import tokenize
import typing
from typing import Any

from . import config as schema

_SECTIONS = {
    "model": "the policy model and its adapter",
    "data": "the tasks",
    "agent": "the Strands agent that runs each episode",
    "reward": "how episodes are scored",
    "env": "the episode's environment",
    "sampling": "training samples",
    "validation": "held-out evaluation during and after training",
    "warm_start": "supervised steps on demonstrations before the first GRPO step",
    "algorithm": "advantages and the policy loss (veRL's registries); what training changes",
    "prompt": "the prompt policy (algorithm.policy: prompt): candidates and the held-out gate",
    "optim": "the optimizer and the update",
    "run": "budgets, checkpoints, logging and workers",
    "rollout": "the engine that samples the policy",
    "sandbox": "the sandbox for model-written code",
    "verify": "that the policy served is the policy trained: weight fingerprints, log-prob parity",
}


def _comments(cls) -> dict[str, str]:
    """Each field's comment: the one on its line, else the block of comment lines just above it."""
    source = inspect.getsource(cls)
    lines = source.splitlines()
    trailing: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and lines[tok.start[0] - 1].strip() != tok.string.strip():
            trailing[tok.start[0]] = tok.string.lstrip("#").strip()
    out = {}
    for i, line in enumerate(lines, start=1):
        name = line.strip().split(":", 1)[0]
        if not line.startswith("    ") or line.startswith("     ") or not name.isidentifier() or ":" not in line:
            continue
        text = trailing.get(i, "")
        if not text:
            above, j = [], i - 1
            while j >= 1 and lines[j - 1].strip().startswith("#"):
                above.insert(0, lines[j - 1].strip().lstrip("#").strip())
                j -= 1
            text = " ".join(above)
        out[name] = text
    return out


def _type(hint: Any) -> str:
    text = getattr(hint, "__name__", None) if not typing.get_args(hint) else None
    return text or str(hint).replace("typing.", "")


def _bounds(key: str) -> str:
    b = schema.BOUNDS.get(key)
    return schema._describe_bounds(*b) if b is not None else ""  # the words the validation's errors use


def rows() -> list[dict[str, str]]:
    """One row per key: key, type, default, allowed (bounds or choices), meaning."""
    choices = schema._choices()
    out = []
    for section in dataclasses.fields(schema.TrainConfig):
        cls = section.type if isinstance(section.type, type) else typing.get_type_hints(schema.TrainConfig)[section.name]
        hints, comments, default = typing.get_type_hints(cls), _comments(cls), cls()
        for f in dataclasses.fields(cls):
            key = f"{section.name}.{f.name}"
            allowed = _bounds(key)
            if key in choices:
                allowed = "one of " + ", ".join(choices[key])
            elif hints[f.name] is float:
                allowed = (allowed + "; " if allowed else "") + "finite"
            out.append({"key": key, "type": _type(hints[f.name]), "default": repr(getattr(default, f.name)),
                        "allowed": allowed, "meaning": comments.get(f.name, "")})
    return out


def markdown() -> str:
    lines = ["# Configuration reference", "",
             "Every key of a training configuration (`agentboost train CONFIG key=value ...`, the Python "
             "API's `GRPOConfig.overrides`, the job service's `config.overrides`), generated from the schema "
             "by `agentboost config --markdown`; a test keeps this page equal to it. Floats must be finite; "
             "a value outside its bounds or choices is refused before anything starts.", "",
             "```bash", "agentboost config              # the same, as text", "```", ""]
    current = None
    for r in rows():
        section = r["key"].split(".")[0]
        if section != current:
            current = section
            lines += ["", f"## {section}: {_SECTIONS.get(section, '')}", "",
                      "| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
        cells = [f"`{r['key']}`", r["type"], f"`{r['default']}`", r["allowed"], r["meaning"]]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines).replace("\n\n\n", "\n\n") + "\n"


def text() -> str:
    out = []
    for r in rows():
        allowed = f" [{r['allowed']}]" if r["allowed"] else ""
        out.append(f"{r['key']} ({r['type']}, default {r['default']}){allowed}\n    {r['meaning']}")
    return "\n".join(out)
