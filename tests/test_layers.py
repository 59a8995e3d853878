"""The package's imports go one way (agentboost/layers.py) and form no circle; the layout page (docs/layout.md)
section names every module that exists and nothing that does not."""

import ast
import re
from pathlib import Path

from agentboost.layers import LAYERS, layer_of

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "agentboost"


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """(imported agentboost module, line) for every import statement, function-local ones too."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # "from pkg import submodule" imports the submodule
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # "import agentboost.x.y.attr" -> the module part
                t = t.rpartition(".")[0]
            if t.startswith("agentboost") and t != name:
                found.append((t, node.lineno))
    return found


def graph() -> dict[str, list[tuple[str, int]]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def test_every_module_is_in_a_layer():
    missing = [m for m in modules() if layer_of(m) is None]
    assert not missing, f"modules in no layer of agentboost/layers.py: {missing}"


def test_no_upward_import():
    upward = []
    for mod, deps in graph().items():
        for dep, line in deps:
            if dep == "agentboost":  # the package itself: only its version
                continue
            if layer_of(dep) > layer_of(mod):
                upward.append(f"{modules()[mod].relative_to(ROOT)}:{line} imports {dep} "
                              f"(layer '{LAYERS[layer_of(dep)][0]}' is above '{LAYERS[layer_of(mod)][0]}')")
    assert not upward, "imports from a lower layer up to a higher one:\n" + "\n".join(upward)


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    edges = {m: {d for d, _ in deps if d != "agentboost"} for m, deps in graph().items()}
    cycles = find_cycles(edges)
    assert not cycles, f"import circles: {cycles}"


def test_the_checker_finds_upward_imports_and_circles():
    # the checks above must be able to fail
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer_of("agentboost.sampling.protocol") < layer_of("agentboost.sampling.hf_engine")
    assert layer_of("agentboost.trainer.loss") > layer_of("agentboost.rollout.episode_runner")


def test_the_layout_page_matches_the_tree():
    # docs/layout.md (linked from the README's index) was the README's "Layout" section
    section = (ROOT / "docs" / "layout.md").read_text()
    listed = set(re.findall(r"`(agentboost/[\w/]+\.py)`", section))
    files = {str(p.relative_to(ROOT)) for p in PKG.rglob("*.py") if p.name != "__init__.py"}
    assert files - listed == set(), f"modules missing from docs/layout.md: {sorted(files - listed)}"
    assert listed - files == set(), f"docs/layout.md names modules that do not exist: {sorted(listed - files)}"


# A module named for a concept lives in that concept's folder (issue 24): the prefix is the folder.
CONCEPT_FOLDERS = {"tau2_": "agentboost/environments/tau2", "rllm_": "agentboost/integrations/rllm",
                   "verl_": "agentboost/integrations/verl"}


def misplaced(paths: list[str]) -> list[str]:
    """Modules whose file name starts with a concept prefix but that sit outside its folder."""
    out = []
    for p in paths:
        name = p.rsplit("/", 1)[-1]
        for prefix, folder in CONCEPT_FOLDERS.items():
            if name.startswith(prefix) and not p.startswith(folder + "/"):
                out.append(f"{p} (belongs in {folder}/)")
    return out


def test_concept_modules_live_in_their_concept_folder():
    paths = [str(p.relative_to(ROOT)) for p in PKG.rglob("*.py")]
    assert misplaced(paths) == []
    # the check can fail: the layout before issue 24 had these
    assert misplaced(["agentboost/tools/tau2_airline.py", "agentboost/integrations/rllm_rows.py",
                      "agentboost/environments/tau2/domain.py"]) == [
        "agentboost/tools/tau2_airline.py (belongs in agentboost/environments/tau2/)",
        "agentboost/integrations/rllm_rows.py (belongs in agentboost/integrations/rllm/)"]


def test_tests_mirror_the_package():
    """tests/<folder>/ is named for the package folder it covers (tests/examples/ for examples/)."""
    stray = []
    for path in (ROOT / "tests").rglob("test_*.py"):
        folder = path.parent.relative_to(ROOT / "tests")
        if folder.parts and not ((PKG / folder).is_dir() or folder.parts[0] == "examples"):
            stray.append(str(path.relative_to(ROOT)))
    assert not stray, f"test files in folders that mirror no package folder: {stray}"


def test_the_trainer_is_imported_only_by_the_entry_points_that_train():
    # issue 43: the run (config, checkpoints, metrics, health, the assembly) and evaluation have homes
    # of their own; only the commands that start training reach into trainer/
    outside = sorted({m for m, deps in graph().items() if not m.startswith("agentboost.trainer")
                      for d, _ in deps if d.startswith("agentboost.trainer")})
    # the continual loop trains its candidates with the trainer's own update and supervised loop (issue 48)
    assert outside == ["agentboost.api", "agentboost.cli.train", "agentboost.continual.candidates"], outside
