"""Every training configuration key with its type, default, bounds or choices and meaning, read
from the fields alone (``schema.option``: each field's help, bounds and choices; a section's
docstring gives its title), never from a hand-kept copy. ``agentboost config`` prints it;
``docs/configuration.md`` is its markdown, kept equal by ``tests/run/test_config_reference.py``."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from ..schema import bounds_of, choices_of, describe_bounds, help_of, hints, title_of
from .config import TrainConfig


def _type(hint: Any) -> str:
    text = getattr(hint, "__name__", None) if not typing.get_args(hint) else None
    return text or str(hint).replace("typing.", "")


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def sections() -> list[tuple[str, type]]:
    return [(f.name, hints(TrainConfig)[f.name]) for f in dataclasses.fields(TrainConfig)]


def rows() -> list[dict[str, str]]:
    """One row per key: key, type, default, allowed (bounds or choices), meaning."""
    out = []
    for name, cls in sections():
        types, default = hints(cls), cls()
        for f in dataclasses.fields(cls):
            key = f"{name}.{f.name}"
            bounds, choices = bounds_of(f), choices_of(f)
            allowed = describe_bounds(bounds) if bounds else ""  # the words the validation's errors use
            if choices is not None:
                allowed = "one of " + ", ".join(choices)
            elif types[f.name] is float:
                allowed = (allowed + "; " if allowed else "") + "finite"
            out.append({"key": key, "type": _type(types[f.name]), "default": repr(getattr(default, f.name)),
                        "allowed": allowed, "meaning": help_of(f)})
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
            lines += ["", f"## {section}: {_lower_first(title_of(dict(sections())[section]))}", "",
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
