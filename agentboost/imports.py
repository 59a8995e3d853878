"""Import paths given as text (``pkg.mod:attr``, ``pkg.mod.attr``, ``pkg.mod``): tools, agent
factories, rewards and sampler scripts are all named this way in configurations."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

from .errors import InputError


class ImportPathError(InputError):
    """An import path that is malformed or does not import; the message says which and why."""


def add_user_paths(*directories: str | os.PathLike[str]) -> None:
    """Make the user's own modules importable where users put them: beside their config file and in
    the working directory. Added to ``sys.path`` here and to ``PYTHONPATH`` for the processes this
    one starts (rollout workers, a job's trainer), which import tools and rewards by name too."""
    for d in reversed([str(Path(d).resolve()) for d in directories]):
        if d not in sys.path:
            sys.path.insert(0, d)
        parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if d not in parts:
            os.environ["PYTHONPATH"] = os.pathsep.join([d, *parts])


def import_object(path: str, what: str = "object") -> Any:
    """Import ``pkg.mod:attr``, ``pkg.mod.attr`` or ``pkg.mod``."""
    if not isinstance(path, str) or not path.strip():
        raise ImportPathError(f"{what} import path must be a non-empty string, got {path!r}")
    if ":" in path:
        mod_name, _, attr = path.partition(":")
        candidates = [(mod_name, attr)]
    else:
        mod_name, _, attr = path.rpartition(".")
        candidates = [(path, "")] + ([(mod_name, attr)] if mod_name else [])
    errors = []
    for mod, attr in candidates:
        try:
            obj = importlib.import_module(mod)
        except ImportError as e:
            errors.append(f"import {mod!r}: {e}")
            continue
        if not attr:
            return obj
        for part in attr.split("."):
            if not hasattr(obj, part):
                errors.append(f"module {mod!r} has no attribute {attr!r}")
                break
            obj = getattr(obj, part)
        else:
            return obj
    raise ImportPathError(f"{what} {path!r} does not import: " + "; ".join(errors))
