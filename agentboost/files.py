"""Files: the one JSONL reader, the one way to append to one (``open_append``), the JSON reader of request bodies (``loads_json``), atomic (and durable) writes of files and directories, SHA-256
hashes and manifests.

Everything agentboost publishes (checkpoints, model directories, datasets, pointers) is written
under a temporary name in the same directory and renamed into place, so a process killed at any
moment leaves either the old version or the new one, never a half-written one.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import os
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import IO, Any, Iterator


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (no JSON number is NaN or infinite)")


def loads_json(text: str | bytes) -> Any:
    """A JSON document from a client (an HTTP request's body): ``ValueError`` with the reason for text
    that is not JSON, that nests deeper than the parser can follow (a 100,000-deep array would raise
    ``RecursionError``, which a server would answer 500) or that writes ``NaN`` / ``Infinity``, which
    JSON has no words for and which would enter rewards and statistics as numbers. The servers pass
    it to aiohttp: ``await request.json(loads=loads_json)``."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("the JSON nests too deeply") from None


def iter_jsonl(path: str | os.PathLike[str], error: type[Exception] = ValueError,
               growing: bool = False) -> Iterator[tuple[int, Any]]:
    """(line number, value) for every non-blank line; ``.gz`` files are read compressed. A line
    that is not JSON raises ``error`` naming the file and line; with ``growing`` (a file another
    process is appending to) it ends the reading instead: it is the line being written."""
    p = Path(path)
    opener = gzip.open if p.name.endswith(".gz") else open
    try:
        with opener(p, "rb") as f:  # bytes, decoded line by line: an encoding error names its line
            for lineno, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise error(f"{p}:{lineno}: not UTF-8 text ({e.reason} at byte {e.start})") from None
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as e:
                    if growing:
                        return
                    raise error(f"{p}:{lineno}: invalid JSON: {e.msg}") from None
                except RecursionError:
                    raise error(f"{p}:{lineno}: JSON nested too deeply") from None
                if "\\u" in line and _has_lone_surrogate(value):
                    # JSON may escape half a UTF-16 pair; Python reads it, and only a later write fails
                    raise error(f"{p}:{lineno}: text holds a lone surrogate (an escaped \\ud800-\\udfff without its "
                                "pair), which cannot be written as UTF-8") from None
                yield lineno, value
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise error(f"{p}: not a readable gzip file ({e})") from None


def read_parquet_rows(path: str | os.PathLike[str], error: type[Exception] = ValueError) -> list[dict[str, Any]]:
    """The rows of a parquet file; a corrupt, truncated or non-parquet file is ``error`` naming the
    file and what is wrong (pyarrow's own exceptions are not the user's to read)."""
    import pyarrow
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except (pyarrow.ArrowException, OSError) as e:
        raise error(f"{path}: not a readable parquet file ({str(e).splitlines()[0][:300]})") from None


def _has_lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def is_temporary(name: str) -> bool:
    """A name an atomic write uses before its rename (``.NAME.tmp-*``, ``.NAME.stale-*``), never a published one."""
    return name.startswith(".") and (".tmp-" in name or ".stale-" in name)


def clean_temporaries(directory: str | os.PathLike[str]) -> list[str]:
    """Remove what an interrupted atomic write left in ``directory`` (``.NAME.tmp-*`` and
    ``.NAME.stale-*`` files and directories: never a published name); returns their names."""
    d = Path(directory)
    removed = []
    if not d.is_dir():
        return removed
    for entry in d.iterdir():
        if is_temporary(entry.name):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry.name)
    return removed


def drop_torn_tail(path: str | os.PathLike[str]) -> int:
    """Cut an append-only file (JSONL) back to its last complete line: a process killed in the middle
    of an append leaves a line without its newline, which the next append would run into (one line
    that is neither record). Returns the bytes removed."""
    p = Path(path)
    try:
        with open(p, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if not size:
                return 0
            keep, block = size, 4096
            while keep > 0:  # find the last newline from the end, a block at a time
                start = max(0, keep - block)
                f.seek(start)
                chunk = f.read(keep - start)
                i = chunk.rfind(b"\n")
                if i >= 0:
                    keep = start + i + 1
                    break
                keep = start
            if keep == size:
                return 0
            f.truncate(keep)
            return size - keep
    except FileNotFoundError:
        return 0


_APPENDING: set[str] = set()  # the append-only files this process has opened (their tails checked)


def open_append(path: str | os.PathLike[str]) -> IO[str]:
    """Open an append-only JSONL file for appending (its folder made). The first time this process
    opens ``path``, a torn last line a killed writer left is cut first (``drop_torn_tail``), with a
    warning: the next append would run into it. Only the first time: a line this process is writing
    (another thread's, or one longer than a buffer, written in pieces) is never taken for torn."""
    p = Path(path)
    key = str(p.resolve())
    if key not in _APPENDING:
        _APPENDING.add(key)
        if (cut := drop_torn_tail(p)):
            logging.getLogger("agentboost").warning("%s: removed a torn last line (%d bytes, left by a writer that "
                                                    "was stopped mid-append)", p, cut)
    p.parent.mkdir(parents=True, exist_ok=True)
    return open(p, "a", encoding="utf-8")


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``path`` to write (``.<name>.tmp-XXXX<suffix>``, created with
    mode 0600); renamed to ``path`` when the block succeeds, removed when it fails."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.tmp-", suffix=suffix, dir=p.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """``text`` (UTF-8) to ``path`` atomically, flushed to disk before the rename."""
    with atomic_file(path) as tmp:
        _write_synced(tmp, text.encode("utf-8"))


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a rename or removal in directory ``path`` durable (best effort: some file systems and
    platforms cannot open or sync a directory)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, mode_from: str | os.PathLike[str] | None = None,
                       suffix: str = "") -> None:
    """``data`` to ``path`` so that ``path`` is at every moment wholly old or wholly new, durably:
    the temporary file (``suffix``: see ``atomic_file``) is fsynced before the rename and the
    directory after it. The permission bits are those of ``mode_from`` when it exists, else of the
    file being replaced; a new file without either keeps 0600."""
    p = Path(path)
    with atomic_file(p, suffix=suffix) as tmp:
        _write_synced(tmp, data)
        source = next((Path(s) for s in (mode_from, p) if s is not None and Path(s).exists()), None)
        if source is not None:
            os.chmod(tmp, source.stat().st_mode & 0o7777)
    fsync_dir(p.parent)


def remove_durably(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` (nothing when it is already gone) and make the removal durable."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    fsync_dir(Path(path).parent)


@contextlib.contextmanager
def atomic_directory(final: str | os.PathLike[str], replace: bool = True) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``final``; when the block succeeds it is renamed
    to ``final`` (an existing ``final`` is moved aside first and removed after, when ``replace``),
    when it fails it is removed. Readers never see a partly written ``final``."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists() and not replace:
        raise FileExistsError(f"{final} already exists")
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        yield tmp
        stale = None
        if final.exists():
            stale = final.with_name(f".{final.name}.stale-{os.getpid()}")
            shutil.rmtree(stale, ignore_errors=True)
            os.rename(final, stale)
        os.rename(tmp, final)
        if stale is not None:
            shutil.rmtree(stale, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# -- manifests: what a published directory holds, checked before it is trusted ----------------
def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_manifest(root: str | os.PathLike[str], exclude: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Every file below ``root`` (relative path -> size and SHA-256), but those named in ``exclude``."""
    root = Path(root)
    return {str(p.relative_to(root)): {"size": p.stat().st_size, "sha256": sha256_file(p)}
            for p in sorted(root.rglob("*")) if p.is_file() and p.name not in exclude}


def check_manifest(root: str | os.PathLike[str], files: dict[str, dict[str, Any]], hashes: bool = True) -> str | None:
    """None when every listed file is present with its size (and, with ``hashes``, its SHA-256);
    else what is wrong, naming the file."""
    root = Path(root)
    for rel, meta in files.items():
        f = root / rel
        if not f.is_file():
            return f"{rel} is missing"
        if f.stat().st_size != meta["size"]:
            return f"{rel} has {f.stat().st_size} bytes, the manifest says {meta['size']}"
        if hashes and sha256_file(f) != meta["sha256"]:
            return f"{rel} does not match its SHA-256 in the manifest"
    return None
