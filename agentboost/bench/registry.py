"""The benchmarks agentboost knows: the built-in recipes (``bench/recipes/*.yaml``), the recipes named
by ``AGENTBOOST_BENCHMARKS`` (``os.pathsep``-separated recipe files, or folders whose ``*.bench.yaml``
files are recipes: a folder also holds the recipes' configs and tasks), and a recipe file given by its
path wherever a benchmark's name is taken."""

from __future__ import annotations

import os
from pathlib import Path

from .recipe import BenchmarkError, Recipe, read_recipe

BUILTIN = Path(__file__).parent / "recipes"
ENV = "AGENTBOOST_BENCHMARKS"


def _recipe_files() -> list[Path]:
    files = sorted(BUILTIN.glob("*.yaml"))
    for entry in filter(None, os.environ.get(ENV, "").split(os.pathsep)):
        p = Path(entry).expanduser()
        if p.is_dir():
            files += sorted(p.glob("*.bench.yaml")) + sorted(p.glob("*.bench.yml"))
        elif p.is_file():
            files.append(p)
        else:
            raise BenchmarkError(f"{ENV}: {entry} is neither a recipe file nor a folder of them")
    return files


def benchmarks() -> dict[str, Recipe]:
    """Every registered benchmark by name; a user's recipe may not take a built-in's name."""
    found: dict[str, Recipe] = {}
    for path in _recipe_files():
        r = read_recipe(path)
        if r.name in found:
            raise BenchmarkError(f"{path}: benchmark {r.name!r} is already registered by {found[r.name].path}; "
                                 "give the recipe another name")
        found[r.name] = r
    return found


def get_benchmark(name: str) -> Recipe:
    """A registered benchmark by name, or a recipe file by path."""
    if name.endswith((".yaml", ".yml")) or os.sep in name:
        if not Path(name).is_file():
            raise BenchmarkError(f"no recipe file {name}")
        return read_recipe(name)
    known = benchmarks()
    if name not in known:
        raise BenchmarkError(f"unknown benchmark {name!r}; `agentboost bench list` shows the {len(known)} registered "
                             f"({', '.join(sorted(known))}), or give a recipe file's path")
    return known[name]
