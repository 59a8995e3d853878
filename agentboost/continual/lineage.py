"""Versions, their lineage and cost, and the loop's state on disk.

A version is what one arm serves: a checkpoint path (``spec``: ``RUN_DIR:step_NNNNNN``, a model
directory or an embedded model's name) and its ``fingerprint``, the SHA-256 of what the weights are
(a checkpoint's own manifest of its files' hashes and, for a LoRA checkpoint, its base model's).
Every version names its parent, how it was made (``trained`` from sessions, ``proposed``, a
``drill``), the sessions it learned from (``versions/vNNNN/sessions.txt``), what its training, its
offline gate and its live test found and cost in USD, and, when promoted, the points it gained and
the USD each point cost.

Everything is in ``DIR/loop.json``, rewritten atomically after every change (a restart of the loop
reads it and goes on where it was), and every decision is a line of ``DIR/events.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..files import atomic_write_text, file_manifest, iter_jsonl, open_append, sha256_file

STATE = "loop.json"
EVENTS = "events.jsonl"
FORMAT = 1


class LoopInputError(InputError):
    pass


_FINGERPRINTS: dict[str, str] = {}  # spec -> fingerprint: a base model's 500 MB are hashed once a process


def _manifest_digest(files: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def fingerprint(spec: str) -> str:
    """``sha256:<hex>`` of what ``spec`` serves: a run's checkpoint (its manifest's hashes, with its
    base model's fingerprint for a LoRA adapter), a prompt policy file, or a model directory (its
    manifest, else every file's hash)."""
    if spec in _FINGERPRINTS:
        return _FINGERPRINTS[spec]
    import yaml

    from ..models.loading import resolve_model_path
    from ..run.checkpoint import MANIFEST, resolve_checkpoint, split_run_spec
    from ..serving.policies import split_prompt_spec

    model_spec, prompt = split_prompt_spec(spec)
    run, name = split_run_spec(model_spec)
    if prompt is not None:  # the model's, and the prompt policy's file
        digest = hashlib.sha256(json.dumps({"model": fingerprint(model_spec),
                                            "prompt": sha256_file(prompt)}).encode()).hexdigest()
    elif (Path(run) / "config.yaml").is_file():
        ckpt = resolve_checkpoint(run, name)
        files = json.loads((ckpt / MANIFEST).read_text())["files"] if (ckpt / MANIFEST).is_file() \
            else file_manifest(ckpt)
        model = (yaml.safe_load((Path(run) / "config.yaml").read_text()) or {}).get("model") or {}
        base = fingerprint(model.get("path", "smollm2-135m-instruct")) if model.get("lora", True) else None
        digest = hashlib.sha256(json.dumps({"checkpoint": _manifest_digest(files), "base": base}).encode()).hexdigest()
    elif Path(spec).is_file():
        digest = sha256_file(spec)
    else:
        d = Path(resolve_model_path(spec))
        found = sorted(d.glob("*manifest*.json"))
        files = None
        for m in found:
            try:
                files = json.loads(m.read_text()).get("files")
            except (ValueError, AttributeError):
                files = None
            if files:
                break
        digest = _manifest_digest(files or file_manifest(d))
    _FINGERPRINTS[spec] = f"sha256:{digest}"
    return _FINGERPRINTS[spec]


class LoopState:
    """The loop's state (``DIR/loop.json``): its phase, the production version, the candidate
    under test, every version, the machine time spent (``elapsed_s``, summed over restarts)."""

    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir)
        self.path = self.dir / STATE
        self.data: dict[str, Any] = {"format": FORMAT, "phase": "collecting", "production": None, "candidate": None,
                                     "rounds": 0, "elapsed_s": 0.0, "stopped": None, "versions": [], "pending": None,
                                     "counts": {}}

    @classmethod
    def load(cls, out_dir: str | Path) -> "LoopState":
        st = cls(out_dir)
        if st.path.is_file():
            try:
                data = json.loads(st.path.read_text())
            except ValueError as e:
                raise LoopInputError(f"{st.path}: not the loop's state ({e})") from None
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise LoopInputError(f"{st.path}: not a loop state of format {FORMAT}")
            st.data = data
        return st

    @property
    def exists(self) -> bool:
        return self.path.is_file()

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, json.dumps(self.data, indent=1))

    def event(self, event: str, **fields: Any) -> dict[str, Any]:
        row = {"t": time.time(), "event": event, **fields}
        with open_append(self.dir / EVENTS) as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
        return row

    def events(self) -> list[dict[str, Any]]:
        path = self.dir / EVENTS
        return [r for _, r in iter_jsonl(path, growing=True)] if path.is_file() else []

    # -- versions ----------------------------------------------------------------------------
    @property
    def versions(self) -> list[dict[str, Any]]:
        return self.data["versions"]

    def version(self, vid: str | None) -> dict[str, Any] | None:
        return next((v for v in self.versions if v["id"] == vid), None)

    def next_id(self) -> str:
        return f"v{len(self.versions):04d}"

    def add_version(self, spec: str, parent: str | None, origin: str, status: str, **fields: Any) -> dict[str, Any]:
        v = {"id": self.next_id(), "spec": spec, "fingerprint": fingerprint(spec), "parent": parent, "origin": origin,
             "status": status, "created_at": time.time(), "sessions": 0, "usd": {"training": 0.0, "gate": 0.0,
                                                                                 "serving": 0.0}, **fields}
        self.versions.append(v)
        return v

    @property
    def production(self) -> dict[str, Any]:
        return self.version(self.data["production"])

    @property
    def candidate(self) -> dict[str, Any] | None:
        return self.version(self.data["candidate"])

    def sessions_file(self, vid: str) -> Path:
        return self.dir / "versions" / vid / "sessions.txt"

    def learned_from(self) -> set[str]:
        """Every episode a version learned from: none is learned from twice."""
        used: set[str] = set()
        for v in self.versions:
            f = self.sessions_file(v["id"])
            if f.is_file():
                used.update(line for line in f.read_text().splitlines() if line)
        pending = self.data.get("pending") or {}
        used.update(pending.get("sessions") or [])
        return used

    def cost(self, cost_per_hour: float) -> float:
        return self.data["elapsed_s"] / 3600 * cost_per_hour


def usd_per_point(v: dict[str, Any]) -> float | None:
    """What a promoted version cost (training, gate, its share of serving during its test) per
    point it gained live (the difference in the metric, x 100); None without a gain."""
    gain = v.get("points")
    if not gain or gain <= 0:
        return None
    u = v["usd"]
    return (u["training"] + u["gate"] + u.get("test", 0.0)) / gain
