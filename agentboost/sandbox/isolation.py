"""The filesystem, process and network view of a sandboxed program, built by bubblewrap.

Why bubblewrap (``bwrap``): it is the small, long-audited tool Flatpak and other sandboxes build
on, from the distribution (``apt-get install bubblewrap``, which ``setup.sh`` runs as root); it
makes the mount, PID, network, IPC and UTS namespaces, pivots into a root of its own, mounts a fresh
``/proc`` for the new PID namespace, and it works both as root and, through an unprivileged user
namespace, as an ordinary user. Writing the same with ``unshare``/``pivot_root`` from Python
between fork and exec would repeat that tool's hard-won details (mount propagation, ``/proc`` in a
PID namespace, the reaper, dying with the parent) in code nobody else reviews.

The program's root holds only:

- ``/usr`` and the merged-usr links (``/bin``, ``/lib``, ...), read-only: the interpreter and its
  standard library; the interpreter's own prefix, read-only, when it lives elsewhere (pyenv, conda);
- ``/etc/ld.so.cache``, read-only (nothing else of ``/etc``);
- a minimal ``/dev`` (null, zero, full, random, urandom, tty) and a fresh ``/proc`` that shows only
  the program's own processes;
- ``/sandbox`` (its working directory), ``/tmp`` and ``/dev/shm``: empty tmpfs of ``disk_mb`` each,
  the program's files copied in from memory. The host's project, run, job and home directories,
  its other processes, its unix sockets and its network are not there.

As root, bubblewrap runs without a user namespace and the program then drops, with ``setpriv``, to
a uid leased for the run alone (``identities``): a real unprivileged identity with no capabilities
and ``no_new_privs``. As a user, bubblewrap makes a user namespace (nested ones are refused).
"""

from __future__ import annotations

import os
import shutil
import sys

WORKDIR = "/sandbox"
_MERGED_USR = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_TOOL_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


def bwrap_path() -> str | None:
    return os.environ.get("AGENTBOOST_BWRAP") or shutil.which("bwrap", path=_TOOL_PATH)


def setpriv_path() -> str | None:
    return shutil.which("setpriv", path=_TOOL_PATH)


def prlimit_path() -> str | None:
    return shutil.which("prlimit", path=_TOOL_PATH)


def interpreter() -> str:
    """The Python the sandbox runs: ``AGENTBOOST_SANDBOX_PYTHON``; else the system's interpreter of
    this one's version (``/usr/bin/python3.X``: already in the sandbox's ``/usr``, and a
    distribution build starts several times faster than a pyenv or conda one with a shared
    libpython, 8 ms against 29 ms here: the judge pays it per problem); else this interpreter's
    base (a virtual environment's packages are the trainer's, not the program's)."""
    chosen = os.environ.get("AGENTBOOST_SANDBOX_PYTHON")
    if not chosen:
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        system = [p for p in (f"/usr/bin/{version}", f"/usr/local/bin/{version}") if os.access(p, os.X_OK)]
        chosen = system[0] if system else getattr(sys, "_base_executable", "") or sys.executable
    return os.path.realpath(chosen)


def _prefix_mounts(python: str) -> list[str]:
    """Read-only mounts for an interpreter outside ``/usr``: its installation prefix."""
    real = os.path.realpath(python)
    if real.startswith("/usr/"):
        return []
    prefix = os.path.dirname(os.path.dirname(real))  # <prefix>/bin/python3.x
    target = real if prefix in ("/", "") else prefix
    mounts = []
    # the directories above it are made searchable (bwrap would copy /root's 0700, and the
    # program's uid could not reach its interpreter); they hold nothing else
    parents = []
    d = os.path.dirname(target)
    while d not in ("/", ""):
        parents.append(d)
        d = os.path.dirname(d)
    for d in reversed(parents):
        mounts += ["--perms", "0755", "--dir", d]
    return mounts + ["--ro-bind", target, target]


def command(bwrap: str, python: str, files: dict[str, int], disk_mb: int, network: bool,
            drop_to_uid: int | None, argv: list[str], nproc_inside: int | None = None,
            seccomp_fd: int | None = None) -> list[str]:
    """The bwrap command line that runs ``python -I <argv>`` in ``WORKDIR``. ``files``: name ->
    readable file descriptor whose content is copied in (pass them to the child).
    ``drop_to_uid``: as root, the leased uid the program becomes (``setpriv``); None as a user.
    ``nproc_inside``: a process limit set inside the user namespace (``prlimit``), where the kernel
    (5.14 and later) counts only the namespace's own processes against it; set outside, it would
    count every process of the user's, the trainer's included. ``seccomp_fd``: a readable descriptor
    holding the compiled filter of ``sandbox.seccomp`` (no keyring), loaded before the program starts."""
    size = str(disk_mb << 20)
    cmd = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
           "--unshare-cgroup-try"]
    if not network:
        cmd.append("--unshare-net")
    if drop_to_uid is None:
        cmd += ["--unshare-user", "--disable-userns"]
    cmd += ["--ro-bind", "/usr", "/usr"]
    for name in _MERGED_USR:
        path = "/" + name
        if os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            cmd += ["--ro-bind", path, path]
    cmd += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    cmd += _prefix_mounts(python)
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    for d in ("/tmp", "/dev/shm", WORKDIR):
        cmd += ["--perms", "1777", "--size", size, "--tmpfs", d]
    for name, fd in files.items():
        cmd += ["--perms", "0644", "--file", str(fd), f"{WORKDIR}/{name}"]
    # the root and /dev (in a user namespace the sandbox's uid owns that tmpfs) read-only: what a
    # program may write is in the three tmpfs above, which the judge empties after each test
    cmd += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", WORKDIR]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    cmd.append("--")
    if drop_to_uid is not None:
        cmd += [setpriv_path() or "/usr/bin/setpriv", f"--reuid={drop_to_uid}", f"--regid={drop_to_uid}",
                "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    if nproc_inside is not None:
        cmd += [prlimit_path() or "/usr/bin/prlimit", f"--nproc={nproc_inside}:{nproc_inside}", "--"]
    return cmd + [python, "-I", *argv]
