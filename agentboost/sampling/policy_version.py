"""Which weights serve the policy now: a small JSON file the trainer rewrites atomically when the
weights change, and that samplers in worker processes read before each request.

``{"model": "<name requests must give>", "version": <weight version>}``. A file (not a message to
the workers) because workers are separate processes that outlive a step and must never see half
an update: ``os.replace`` makes the switch atomic.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..files import atomic_write_text


@dataclass(frozen=True)
class PolicyVersion:
    model: str
    version: int


def write_policy_version(path: str | os.PathLike[str], current: PolicyVersion) -> None:
    atomic_write_text(path, json.dumps({"model": current.model, "version": current.version}))


def read_policy_version(path: str | os.PathLike[str]) -> PolicyVersion:
    try:
        data = json.loads(Path(path).read_text())
        return PolicyVersion(str(data["model"]), int(data["version"]))
    except FileNotFoundError:
        raise FileNotFoundError(f"policy version file {path} does not exist") from None
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"policy version file {path}: expected {{\"model\": text, \"version\": integer}}: {e}") from None
