"""Installs agentboost's override modules into an installed rLLM and its veRL fork, safely.

``python apply_patches.py`` (at the repository root) is a thin front for this module.

For each target file of the installed packages the patcher keeps the upstream original beside it
under a stable new name (``agent_execution_engine.py`` -> ``agent_execution_engine_upstream.py``),
which the override module imports, and puts the override in the original's place. It:

- verifies every target by SHA-256 against the upstream versions it knows before touching
  anything, and refuses an unknown version unless forced (a forced patch is recorded with the hash
  it replaced, so that ``--revert`` can still check what it restores);
- writes every file atomically (temporary file in the same directory, fsync, ``os.replace``), so
  each file is at every moment wholly old or wholly new;
- keeps a small journal per package directory while it changes a target; a run that was killed
  leaves the journal behind and the next run (apply or revert) completes that step first. The
  step order makes every intermediate state recoverable: journal -> upstream copy -> override ->
  record (and for revert: journal -> original back in place -> upstream copy removed -> record);
- is idempotent: a second apply is a no-op that says so; ``--status`` reports each file as
  original / patched by this version / patched by another agentboost version / unknown;
  ``--revert`` restores every file byte for byte.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ...files import atomic_write_bytes, remove_durably, sha256_bytes, sha256_file

# The first line of every override module; it tells our files from upstream's and from unknown ones.
OVERRIDE_MARKER = "# agentboost-override"
STATE_NAME = ".agentboost_patches.json"
JOURNAL_NAME = ".agentboost_patch_journal.json"
TMP_SUFFIX = ".agentboost-tmp"

RLLM_COMMIT = "1fc3c4babfe9a63d809d6bf9a9011df777f30c91"
# rLLM pins agentica-project/verl at 1a398434995c8cea19e841ca30b5a3738cc9fc15 as a submodule; that
# commit is not retrievable from any public copy we know, so the fork's hash is taken at its
# nearest retrievable commit (the seed's modified server matches it in every hunk it left alone).
VERL_FORK_COMMIT = "777704aa64c5745c4ccb250ae8977469579ebfc0"


@dataclass(frozen=True)
class Target:
    package: str  # "rllm" or "verl": which installed package holds the file
    relpath: str  # path below the directory that holds the package
    override: str  # our module, relative to the repository root

    @property
    def upstream_relpath(self) -> str:
        p = Path(self.relpath)
        return str(p.with_name(p.stem + "_upstream" + p.suffix))


TARGETS: tuple[Target, ...] = (
    Target("rllm", "rllm/engine/agent_execution_engine.py", "modified_rllm_files/agent_execution_engine.py"),
    Target("rllm", "rllm/trainer/verl/agent_ppo_trainer.py", "modified_rllm_files/agent_ppo_trainer.py"),
    Target("verl", "verl/workers/rollout/vllm_rollout/vllm_async_server.py",
           "modified_verl_files/vllm_async_server.py"),
)

# SHA-256 of the upstream files this patcher knows (computed from the real files at these commits).
KNOWN_UPSTREAM: dict[str, dict[str, str]] = {
    "rllm/engine/agent_execution_engine.py": {
        "e928f7a0db00dea4e2495335933a4b75bec02a9d8e1a04fae7b5606eed0f44f9": f"rllm-org/rllm@{RLLM_COMMIT}",
    },
    "rllm/trainer/verl/agent_ppo_trainer.py": {
        "d6486ad133cfbd16c6b42da3245721615a3d59dd023b77388a5c54db7c699a42": f"rllm-org/rllm@{RLLM_COMMIT}",
    },
    "verl/workers/rollout/vllm_rollout/vllm_async_server.py": {
        "f4ff4ccebf6cb251adc1539b16a329e8c6b50418819a02a10ffa1e7125ed1adc":
            f"agentica-project/verl@{VERL_FORK_COMMIT}",
    },
}

# file states reported by --status
ORIGINAL = "original"
PATCHED = "patched by this version"
PATCHED_OTHER = "patched by another agentboost version"
EDITED = "patched, then edited locally"
UNKNOWN = "unknown"
MISSING = "missing"


class PatchError(RuntimeError):
    """Anything that stops the patcher; the message says what to do."""


# -- locating the installation -------------------------------------------------------------------
@dataclass
class Roots:
    rllm: Path  # the directory that holds the ``rllm`` package (site-packages or the checkout)
    verl: Path  # the directory that holds the ``verl`` package

    def of(self, package: str) -> Path:
        return self.rllm if package == "rllm" else self.verl


def _package_root(name: str, explicit: str | os.PathLike[str] | None, flag: str) -> Path | None:
    if explicit is not None:
        root = Path(explicit).resolve()
        if not (root / name / "__init__.py").is_file():
            raise PatchError(f"{flag} {root}: no {name} package there (expected {root / name / '__init__.py'}); "
                             f"{flag} names the directory that holds the {name}/ package")
        return root
    spec = importlib.util.find_spec(name)  # locates the package without importing it
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("namespace", "built-in"):
        return Path(spec.origin).resolve().parent.parent
    locations = list(spec.submodule_search_locations or [])
    return Path(locations[0]).resolve().parent if locations else None


def find_roots(rllm_root: str | os.PathLike[str] | None = None,
               verl_root: str | os.PathLike[str] | None = None) -> Roots:
    rllm = _package_root("rllm", rllm_root, "--rllm-root")
    if rllm is None:
        raise PatchError(
            f"rLLM is not installed in this Python ({sys.executable}). Install rLLM at commit "
            f"{RLLM_COMMIT[:7]} with its veRL submodule as docs/rllm.md (linked from the README) says "
            "(then run this with that environment's python), or pass --rllm-root DIR.")
    submodule = rllm / "verl"
    if verl_root is None and (rllm / ".gitmodules").is_file() and not (submodule / "verl" / "__init__.py").is_file():
        # an rLLM checkout whose submodule was never fetched: whatever other veRL is installed is
        # not the fork rLLM was written against
        raise PatchError(
            f"rLLM's veRL submodule is missing: {submodule} holds no verl package. In the rLLM checkout run "
            "`git submodule update --init --recursive` and `pip install -e ./verl --no-deps`, "
            "or pass --verl-root DIR.")
    verl = _package_root("verl", verl_root, "--verl-root")
    if verl is None:
        if (submodule / "verl" / "__init__.py").is_file():
            verl = submodule  # checked out but not installed: patch where rLLM's checkout keeps it
        else:
            raise PatchError(
                "veRL (the agentica-project fork that rLLM pins as a submodule) is not installed in this "
                f"Python ({sys.executable}); install it from rLLM's checkout (`pip install -e ./verl --no-deps`) "
                "or pass --verl-root DIR.")
    return Roots(rllm=rllm, verl=verl)


def default_source_root() -> Path:
    """The repository root that holds ``modified_rllm_files/`` and ``modified_verl_files/``."""
    # agentboost/integrations/rllm/patcher.py -> the checkout
    return Path(__file__).resolve().parents[3]


# -- small file primitives (the atomic, durable writes are agentboost.files') ------------------
def _write(path: Path, data: bytes, mode_from: Path | None = None) -> None:
    """Atomic and durable (fsync, ``os.replace``, fsync of the directory), the mode kept; a killed
    write leaves only a ``*TMP_SUFFIX`` file, which ``Patcher.recover`` removes. A symlinked target
    is written through its link (the file it points to changes, the link stays a link)."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    atomic_write_bytes(path, data, mode_from=mode_from, suffix=TMP_SUFFIX)


def _drop_bytecode(path: Path) -> None:
    """Cached bytecode is keyed by the source's mtime and size; drop it so nothing stale runs."""
    cache = path.parent / "__pycache__"
    if cache.is_dir():
        for pyc in cache.glob(f"{path.stem}.*.pyc"):
            try:
                pyc.unlink()
            except OSError:
                pass


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise PatchError(f"{path}: unreadable ({e}); remove it only if you know no patch is half done") from e


def _write_json(path: Path, data: dict) -> None:
    _write(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())


# -- the patcher -------------------------------------------------------------------------------
@dataclass
class FileStatus:
    target: Target
    path: Path
    state: str
    detail: str = ""


class Patcher:
    """``known`` maps each target's relpath to {sha256: description}; ``step_hook(stage)`` is called
    after every durable step (tests use it to kill the process at each stage)."""

    def __init__(self, roots: Roots, source_root: Path | None = None,
                 known: Mapping[str, Mapping[str, str]] | None = None,
                 targets: tuple[Target, ...] = TARGETS, out: Callable[[str], None] = print,
                 step_hook: Callable[[str], None] | None = None):
        self.roots = roots
        self.source_root = Path(source_root) if source_root is not None else default_source_root()
        self.known = {k: dict(v) for k, v in (known if known is not None else KNOWN_UPSTREAM).items()}
        self.targets = targets
        self.out = out
        self.step_hook = step_hook or (lambda stage: None)
        from ... import __version__

        self.version = __version__

    # paths
    def path(self, t: Target) -> Path:
        return self.roots.of(t.package) / t.relpath

    def upstream_path(self, t: Target) -> Path:
        return self.roots.of(t.package) / t.upstream_relpath

    def _pkg_dir(self, t: Target) -> Path:
        return self.roots.of(t.package) / t.package

    def _state_path(self, t: Target) -> Path:
        return self._pkg_dir(t) / STATE_NAME

    def _journal_path(self, t: Target) -> Path:
        return self._pkg_dir(t) / JOURNAL_NAME

    def override_bytes(self, t: Target) -> bytes:
        p = self.source_root / t.override
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            raise PatchError(f"override module {p} is missing: run apply_patches.py from an agentboost "
                             "checkout (it installs the files under modified_rllm_files/ and modified_verl_files/)") from None
        if not data.startswith(OVERRIDE_MARKER.encode()):
            raise PatchError(f"override module {p} does not start with {OVERRIDE_MARKER!r}")
        return data

    def state_error(self, t: Target) -> str | None:
        """Why the state file of ``t``'s package cannot be read, or None."""
        try:
            state = _read_json(self._state_path(t))
        except PatchError as e:
            return str(e)
        if not isinstance(state, dict) or not isinstance(state.get("targets", {}), dict):
            return f"{self._state_path(t)}: not a patch record"
        return None

    def _record(self, t: Target) -> dict | None:
        """What the state file says of ``t`` (None when it says nothing or cannot be read: callers
        that need it check ``state_error``)."""
        if self.state_error(t):
            return None
        rec = _read_json(self._state_path(t)).get("targets", {}).get(t.relpath)
        return rec if isinstance(rec, dict) else None

    def _known_upstream(self, t: Target, sha: str) -> str | None:
        if sha in self.known.get(t.relpath, {}):
            return self.known[t.relpath][sha]
        rec = self._record(t)
        if rec and rec.get("forced") and rec.get("upstream_sha256") == sha:
            return f"forced patch of an unknown version (recorded {rec.get('patched_at', '?')})"
        return None

    # status
    def status_of(self, t: Target) -> FileStatus:
        p, up = self.path(t), self.upstream_path(t)
        if not p.is_file():
            return FileStatus(t, p, MISSING, f"{p} does not exist")
        data = p.read_bytes()
        sha = sha256_bytes(data)
        if data.startswith(OVERRIDE_MARKER.encode()):
            up_sha = sha256_file(up) if up.is_file() else None
            origin = self._known_upstream(t, up_sha) if up_sha else None
            if up_sha is None:
                detail = f"the upstream copy {up.name} is missing"
            elif origin is None:
                detail = f"the upstream copy {up.name} has an unknown hash {up_sha[:12]}"
            else:
                detail = f"upstream kept as {up.name} ({origin})"
            if data == self.override_bytes(t):
                return FileStatus(t, p, PATCHED, detail)
            first = data.split(b"\n", 1)[0].decode(errors="replace")
            rec = self._record(t)
            if rec and rec.get("override_sha256") not in (None, sha):
                return FileStatus(t, p, EDITED, f"differs from the override agentboost "
                                                f"{rec.get('agentboost_version', '?')} installed; {detail}")
            if rec is None:  # no record of what was installed: an older version's, or edited
                detail += "; no record of which version installed it (it may have been edited)"
            else:
                detail += f"; installed by agentboost {rec.get('agentboost_version', '?')}"
            return FileStatus(t, p, PATCHED_OTHER, f"{first!r}; {detail}")
        origin = self._known_upstream(t, sha)
        if origin is not None:
            extra = f"; an upstream copy {up.name} is left over (run --revert to clean it)" if up.is_file() else ""
            return FileStatus(t, p, ORIGINAL, origin + extra)
        return FileStatus(t, p, UNKNOWN, f"sha256 {sha}")

    def status(self) -> list[FileStatus]:
        return [self.status_of(t) for t in self.targets]

    # journal recovery
    def _journals(self) -> list[tuple[Target, dict]]:
        found, seen = [], set()
        for t in self.targets:
            jp = self._journal_path(t)
            if jp in seen:
                continue
            seen.add(jp)
            j = _read_json(jp)
            if j:
                match = [x for x in self.targets if x.relpath == j.get("target")]
                if not match:
                    raise PatchError(f"{jp} names an unknown target {j.get('target')!r}")
                found.append((match[0], j))
        return found

    def recover(self) -> None:
        """Complete a step that a killed run left half done (its journal says which)."""
        for t, j in self._journals():
            self.out(f"completing an interrupted {j['op']} of {self.path(t)}")
            if j["op"] == "apply":
                self._finish_apply(t, j)
            elif j["op"] == "revert":
                self._finish_revert(t, j)
            else:
                raise PatchError(f"{self._journal_path(t)}: unknown op {j['op']!r}")
        for t in self.targets:  # temporary files a killed write left behind
            for tmp in self.path(t).parent.glob(f".*{TMP_SUFFIX}"):
                tmp.unlink(missing_ok=True)

    # apply
    def apply(self, force: bool = False, dry_run: bool = False) -> int:
        self._prepare(dry_run)
        plan: list[tuple[Target, str]] = []
        problems: list[str] = sorted({f"{e}; it cannot be updated: run `python apply_patches.py --revert` "
                                      "(it sets an unreadable record aside once every file is safely restored)"
                                      for t in self.targets if (e := self.state_error(t))})
        for st in self.status():
            t = st.target
            self.override_bytes(t)  # a missing override is an error before anything is written
            if st.state == PATCHED:
                self.out(f"already patched: {st.path} ({st.detail})")
            elif st.state == ORIGINAL:
                plan.append((t, st.detail))
            elif st.state == EDITED:
                problems.append(f"{st.path} was patched and then edited locally ({st.detail}): keep your edits "
                                "elsewhere, then `python apply_patches.py --revert --force` restores upstream")
            elif st.state == PATCHED_OTHER:
                problems.append(f"{st.path} was patched by another agentboost version ({st.detail}): run "
                                "`python apply_patches.py --revert` first (it restores the upstream file whichever "
                                "agentboost version patched it), then apply again")
            elif st.state == UNKNOWN and force:
                plan.append((t, f"FORCED over an unknown version ({st.detail})"))
            elif st.state == UNKNOWN:
                known = ", ".join(self.known.get(t.relpath, {}).values()) or "none"
                problems.append(f"{st.path} is an unknown version ({st.detail}); known versions: {known}. "
                                "Install the pinned versions, or pass --force to patch it anyway "
                                "(recorded, and revertible)")
            else:
                problems.append(f"{st.path} is missing: is this the rLLM commit / veRL fork agentboost targets? "
                                f"({t.package} root: {self.roots.of(t.package)})")

        def journal(t: Target, why: str) -> dict:
            return {"op": "apply", "target": t.relpath, "upstream_sha256": sha256_file(self.path(t)),
                    "override_sha256": sha256_bytes(self.override_bytes(t)), "forced": why.startswith("FORCED"),
                    "upstream_version": why}

        return self._carry_out(
            plan, problems, dry_run, nothing="nothing to do: every file is already patched by this version",
            announce=lambda t, why: (f"{'would patch' if dry_run else 'patching'} {self.path(t)} [{why}]; "
                                     f"upstream kept as {self.upstream_path(t).name}"),
            done="patched", journal=journal, finish=self._finish_apply)

    def _finish_apply(self, t: Target, j: dict) -> None:
        p, up = self.path(t), self.upstream_path(t)
        override = self.override_bytes(t)
        cur = p.read_bytes()
        if sha256_bytes(cur) == j["upstream_sha256"]:
            if not up.is_file() or sha256_file(up) != j["upstream_sha256"]:
                _write(up, cur, mode_from=p)
            self.step_hook("upstream_copy")
            _write(p, override)
            _drop_bytecode(p)
            self.step_hook("override")
        elif cur.startswith(OVERRIDE_MARKER.encode()):
            if not up.is_file() or sha256_file(up) != j["upstream_sha256"]:
                raise PatchError(f"{p} holds an override but its upstream copy {up} is missing or changed; "
                                 "reinstall rLLM/veRL and apply again")
            if cur != override:
                _write(p, override)
                _drop_bytecode(p)
                self.step_hook("override")
        else:
            raise PatchError(f"{p} changed since the interrupted run began (sha256 {sha256_bytes(cur)}); "
                             f"remove {self._journal_path(t)} after checking the file")
        state = _read_json(self._state_path(t))
        state.setdefault("targets", {})[t.relpath] = {
            "upstream_sha256": j["upstream_sha256"], "upstream_version": j.get("upstream_version", ""),
            "override_sha256": sha256_bytes(override), "forced": bool(j.get("forced")),
            "agentboost_version": self.version, "patched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        _write_json(self._state_path(t), state)
        self.step_hook("record")
        remove_durably(self._journal_path(t))
        self.step_hook("done")

    # revert
    def revert(self, dry_run: bool = False, force: bool = False) -> int:
        self._prepare(dry_run)
        plan, problems = [], []
        for st in self.status():
            t, up = st.target, self.upstream_path(st.target)
            unreadable = self.state_error(t)
            if st.state in (PATCHED, PATCHED_OTHER, EDITED):
                up_sha = sha256_file(up) if up.is_file() else None
                if up_sha is None or self._known_upstream(t, up_sha) is None:
                    problems.append(f"{st.path}: cannot revert, {st.detail}"
                                    + (f" ({unreadable}: a forced patch's record may be in it)" if unreadable else ""))
                elif st.state == EDITED and not force:
                    problems.append(f"{st.path} was edited after it was patched ({st.detail}): --revert would "
                                    "discard those edits; keep them elsewhere, then --revert --force")
                elif st.state == PATCHED_OTHER and unreadable and not force:
                    problems.append(f"{st.path} is not this version's override and the patch record is unreadable "
                                    f"({unreadable}), so local edits cannot be told apart: check the file, then "
                                    "--revert --force")
                else:
                    plan.append((t, up_sha))
            elif st.state == ORIGINAL:
                if up.is_file() and sha256_file(up) == sha256_file(st.path):
                    plan.append((t, sha256_file(up)))  # a revert was interrupted after the restore
                else:
                    self.out(f"already original: {st.path}")
            elif st.state == UNKNOWN:
                problems.append(f"{st.path} is neither an agentboost override nor a known upstream version "
                                f"({st.detail}); left alone")
            else:
                problems.append(f"{st.path} is missing")
        return self._carry_out(
            plan, problems, dry_run, nothing="nothing to revert: every file is the upstream original",
            announce=lambda t, _: (f"{'would restore' if dry_run else 'restoring'} {self.path(t)} "
                                   f"from {self.upstream_path(t).name}"),
            done="restored", journal=lambda t, up_sha: {"op": "revert", "target": t.relpath, "upstream_sha256": up_sha},
            finish=self._finish_revert, tail=" byte for byte", after=None if dry_run else self._set_aside_unreadable)

    def _set_aside_unreadable(self) -> None:
        """After a revert: an unreadable record whose package holds no patched file any more is
        renamed aside (kept for inspection), so the next run starts clean."""
        for path in {self._state_path(t) for t in self.targets}:
            ts = [t for t in self.targets if self._state_path(t) == path]
            if path.is_file() and self.state_error(ts[0]) and all(self.status_of(t).state == ORIGINAL for t in ts):
                aside = path.with_name(path.name + f".unreadable-{time.strftime('%Y%m%d-%H%M%S')}")
                os.replace(path, aside)
                self.out(f"the unreadable patch record {path.name} was set aside as {aside.name}")

    def _finish_revert(self, t: Target, j: dict) -> None:
        p, up = self.path(t), self.upstream_path(t)
        if not p.is_file() or sha256_file(p) != j["upstream_sha256"]:
            if not up.is_file() or sha256_file(up) != j["upstream_sha256"]:
                raise PatchError(f"cannot finish reverting {p}: its upstream copy {up} is missing or changed")
            _write(p, up.read_bytes(), mode_from=up)
            _drop_bytecode(p)
            self.step_hook("restore")
        remove_durably(up)
        self.step_hook("remove_upstream")
        if not self.state_error(t):  # an unreadable record is set aside when the revert is done
            state = _read_json(self._state_path(t))
            state.get("targets", {}).pop(t.relpath, None)
            if state.get("targets"):
                _write_json(self._state_path(t), state)
            else:
                remove_durably(self._state_path(t))
        self.step_hook("record")
        remove_durably(self._journal_path(t))
        self.step_hook("done")

    # what apply and revert share
    def _prepare(self, dry_run: bool) -> None:
        if not dry_run:
            self._check_writable()
            self.recover()

    def _carry_out(self, plan: list[tuple[Target, Any]], problems: list[str], dry_run: bool, *, nothing: str,
                   announce: Callable[[Target, Any], str], done: str, journal: Callable[[Target, Any], dict],
                   finish: Callable[[Target, dict], None], tail: str = "",
                   after: Callable[[], None] | None = None) -> int:
        """Once apply or revert has planned: refuse the whole plan on any problem, say each step
        (or ``nothing``), stop there on a dry run, else carry out each step under its journal
        (written before anything else, removed by ``finish`` last)."""
        if problems:
            raise PatchError("nothing was changed:\n  " + "\n  ".join(problems))
        if not plan:
            self.out(nothing)
            if after is not None:
                after()
            return 0
        for t, x in plan:
            self.out(announce(t, x))
        if dry_run:
            self.out(f"dry run: {len(plan)} file(s) would be {done}, nothing was written")
            return 0
        for t, x in plan:
            j = journal(t, x)
            _write_json(self._journal_path(t), j)
            self.step_hook("journal")
            finish(t, j)
        self.out(f"{done} {len(plan)} file(s){tail}")
        if after is not None:
            after()
        return 0

    def _check_writable(self) -> None:
        for t in self.targets:
            d = self.path(t).parent
            if d.is_dir() and not os.access(d, os.W_OK | os.X_OK):
                raise PatchError(f"cannot write to {d} (the installed {t.package} package): run apply_patches.py "
                                 "as the user that owns that environment, or install rLLM into a virtual "
                                 "environment you own; nothing was changed")


# -- command line ----------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="apply_patches.py",
        description="Install agentboost's override modules into rLLM "
                    f"(at {RLLM_COMMIT[:7]}) and its veRL fork: hash-verified, atomic, idempotent, revertible.")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--status", action="store_true", help="report each target file's state and change nothing")
    mode.add_argument("--revert", action="store_true", help="restore every upstream file byte for byte")
    ap.add_argument("--dry-run", action="store_true", help="say what would change and write nothing")
    ap.add_argument("--force", action="store_true",
                    help="patch files whose hash matches no known upstream version (recorded, revertible); with "
                         "--revert, restore files edited after they were patched (the edits are lost)")
    ap.add_argument("--rllm-root", help="directory holding the rllm/ package (default: where Python finds it)")
    ap.add_argument("--verl-root", help="directory holding the verl/ package (default: where Python finds it, "
                                        "else rLLM's verl/ submodule)")
    return ap


def main(argv: list[str] | None = None, *, source_root: Path | None = None,
         known: Mapping[str, Mapping[str, str]] | None = None,
         step_hook: Callable[[str], None] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        roots = find_roots(args.rllm_root, args.verl_root)
        patcher = Patcher(roots, source_root=source_root, known=known, step_hook=step_hook)
        if args.status:
            print(f"rllm root: {roots.rllm}\nverl root: {roots.verl}")
            try:
                journals = patcher._journals()
            except PatchError as e:
                journals = []
                print(f"unreadable journal: {e}")
            for st in patcher.status():
                print(f"{st.state:<40} {st.path}  ({st.detail})")
            for t, j in journals:
                print(f"interrupted {j['op']} of {patcher.path(t)}: run the same command again to complete it")
            for error in sorted({e for t in patcher.targets if (e := patcher.state_error(t))}):
                print(f"unreadable patch record: {error}; it matters only for forced patches: --revert restores "
                      "files whose upstream copies are known versions and then sets the record aside")
            return 0
        if args.revert:
            return patcher.revert(dry_run=args.dry_run, force=args.force)
        return patcher.apply(force=args.force, dry_run=args.dry_run)
    except PatchError as e:
        print(f"apply_patches: error: {e}", file=sys.stderr)
        return 1
