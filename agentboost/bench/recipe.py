"""A benchmark as a versioned recipe: where its tasks come from, the agent and the configuration that
runs it, its scorer, its protocol, its sizes and its published reference figures.

A recipe is a YAML mapping (the built-in ones are in ``bench/recipes/``; a user's is a file of their
own, ``docs/benchmarks.md`` shows one):

    name: my-calculator          # what `agentboost bench run` takes
    version: 1                   # raise it when the tasks, agent, scorer or protocol change
    description: two-step arithmetic with a calculator
    licence: CC0-1.0              # of the tasks
    source: {file: data/test.jsonl}          # relative to this file; or {prepare: NAME, options: {...}, file: F}
    config: config.yaml          # a training config (agent, reward, sampling), relative to this file
    overrides: {agent.max_model_calls: 3}    # dotted keys over that config
    scorer: {name: exact_answer, official: false}
    protocol: {samples: 1, temperature: 0.0, max_new_tokens: 64}
    sizes: {smoke: {tasks: 8}, full: {tasks: null}}   # null: every task
    reference: [{model: ..., value: 0.5, metric: accuracy, source: "..."}]

Everything is checked when the recipe is read: a malformed recipe is one line naming the file, the
field and what was expected.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError

SIZES = ("smoke", "full")
REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout: where the examples' task files are


class BenchmarkError(InputError):
    pass


@dataclass(frozen=True)
class Source:
    """Tasks from a file (``file``), or made by ``agentboost data prepare`` (``prepare``: its dataset name,
    ``options``: its options, ``file``: which of the files it writes), or from the repository
    (``repo``: a path under the checkout, for the examples' tasks)."""

    file: str | None = None
    prepare: str | None = None
    options: dict = field(default_factory=dict)
    repo: str | None = None
    package: str | None = None  # the package that ships the data, for `bench list` and the docs
    module: str | None = None  # a module that must import (the package's), checked before anything runs
    install: str | None = None  # how to get it

    def describe(self) -> str:
        if self.prepare:
            return f"{self.package or self.prepare} (data prepare {self.prepare})"
        if self.repo:
            return f"repository: {self.repo}"
        return f"file: {self.file}"


@dataclass(frozen=True)
class Recipe:
    name: str
    version: int
    description: str
    licence: str
    source: Source
    config: str | None  # a training YAML (absolute once read), or None: the defaults
    overrides: dict[str, Any]
    scorer: dict[str, Any]
    protocol: dict[str, Any]
    sizes: dict[str, dict[str, Any]]
    reference: list[dict[str, Any]]
    path: Path  # the recipe file
    homepage: str = ""
    notes: str = ""

    @property
    def digest(self) -> str:
        """What makes two runs of the recipe the same benchmark (a resumed run checks it)."""
        text = json.dumps({k: v for k, v in self.as_dict().items() if k not in ("path", "notes", "reference")},
                          sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "description": self.description, "licence": self.licence,
                "source": {k: v for k, v in self.source.__dict__.items() if v}, "config": self.config,
                "overrides": self.overrides, "scorer": self.scorer, "protocol": self.protocol, "sizes": self.sizes,
                "reference": self.reference, "homepage": self.homepage, "path": str(self.path)}


_FIELDS = {"name", "version", "description", "licence", "source", "config", "overrides", "scorer", "protocol",
           "sizes", "reference", "homepage", "notes"}
_PROTOCOL = {"samples", "temperature", "top_p", "max_new_tokens", "max_model_calls", "turns", "user", "trials",
             "split", "notes"}


def _need(path: Path, data: dict, key: str, kind, what: str):
    if key not in data:
        raise BenchmarkError(f"{path}: recipe field {key!r} is missing ({what})")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise BenchmarkError(f"{path}: recipe field {key!r} must be {what}, got {value!r}")
    return value


def read_recipe(path: str | Path) -> Recipe:
    """Read and check a recipe file; every error is one line naming the file and the field."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise BenchmarkError(f"{path}: cannot read the recipe ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise BenchmarkError(f"{path}: not YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise BenchmarkError(f"{path}: a recipe is a YAML mapping (name, version, source, ...), got {type(data).__name__}")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise BenchmarkError(f"{path}: unknown recipe field(s) {', '.join(unknown)}; expected {', '.join(sorted(_FIELDS))}")
    name = _need(path, data, "name", str, "a name such as my-bench")
    if not name or any(c.isspace() or c in "/:" for c in name):
        raise BenchmarkError(f"{path}: recipe field 'name' must be a word without spaces, '/' or ':', got {name!r}")
    version = _need(path, data, "version", int, "an integer, raised when the benchmark changes")
    src = _need(path, data, "source", dict, "a mapping: {file: PATH}, {prepare: DATASET, ...} or {repo: PATH}")
    bad = sorted(set(src) - set(Source.__dataclass_fields__))
    if bad:
        raise BenchmarkError(f"{path}: unknown source field(s) {', '.join(bad)}; expected {', '.join(Source.__dataclass_fields__)}")
    if sum(bool(src.get(k)) for k in ("prepare", "repo")) > 1 or not (src.get("file") or src.get("prepare") or src.get("repo")):
        raise BenchmarkError(f"{path}: source needs one of file, prepare (with file) or repo")
    if src.get("prepare") and not src.get("file"):
        raise BenchmarkError(f"{path}: source.prepare needs source.file: which of the prepared files holds the tasks")
    if src.get("options") is not None and not isinstance(src["options"], dict):
        raise BenchmarkError(f"{path}: source.options must be a mapping, got {src['options']!r}")
    source = Source(**{**src, "options": dict(src.get("options") or {})})
    if source.file and not source.prepare:  # the user's own file, relative to the recipe
        source = Source(**{**source.__dict__, "file": str((path.parent / source.file).resolve())})
    config = data.get("config")
    if config is not None:
        if not isinstance(config, str):
            raise BenchmarkError(f"{path}: recipe field 'config' must be a path to a training YAML, got {config!r}")
        config = str((path.parent / config).resolve()) if not config.startswith("repo:") else str(REPO_ROOT / config[5:])
    overrides = data.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise BenchmarkError(f"{path}: recipe field 'overrides' must be a mapping of dotted keys, got {overrides!r}")
    scorer = data.get("scorer") or {}
    if not isinstance(scorer, dict) or not isinstance(scorer.get("name"), str):
        raise BenchmarkError(f"{path}: recipe field 'scorer' must be a mapping with a name, got {scorer!r}")
    protocol = data.get("protocol") or {}
    if not isinstance(protocol, dict):
        raise BenchmarkError(f"{path}: recipe field 'protocol' must be a mapping, got {protocol!r}")
    bad = sorted(set(protocol) - _PROTOCOL)
    if bad:
        raise BenchmarkError(f"{path}: unknown protocol field(s) {', '.join(bad)}; expected {', '.join(sorted(_PROTOCOL))}")
    samples = protocol.get("samples", 1)
    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
        raise BenchmarkError(f"{path}: protocol.samples must be an integer >= 1, got {samples!r}")
    sizes = data.get("sizes") or {"smoke": {"tasks": 8}, "full": {"tasks": None}}
    if not isinstance(sizes, dict) or set(sizes) - set(SIZES) or not all(isinstance(v, dict) for v in sizes.values()):
        raise BenchmarkError(f"{path}: recipe field 'sizes' must map smoke and full to {{tasks: N or null, samples: N}}, got {sizes!r}")
    for size, spec in sizes.items():
        for k, v in spec.items():
            if k not in ("tasks", "samples") or (v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1)):
                raise BenchmarkError(f"{path}: sizes.{size}.{k}: expected tasks or samples, an integer >= 1 (tasks may be null), got {v!r}")
    reference = data.get("reference") or []
    if not isinstance(reference, list) or not all(isinstance(r, dict) and "value" in r for r in reference):
        raise BenchmarkError(f"{path}: recipe field 'reference' must be a list of {{model, metric, value, source}}")
    return Recipe(name=name, version=version, description=str(data.get("description") or ""),
                  licence=str(data.get("licence") or "unknown"), source=source, config=config,
                  overrides=dict(overrides), scorer=dict(scorer), protocol=dict(protocol),
                  sizes={k: dict(v) for k, v in sizes.items()}, reference=list(reference), path=path,
                  homepage=str(data.get("homepage") or ""), notes=str(data.get("notes") or ""))
