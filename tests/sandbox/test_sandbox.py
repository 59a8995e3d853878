"""Containment: hostile programs are contained and reported; the host and this process are unaffected."""

import os
import socket
import subprocess
import sys
import time

import pytest

from agentboost.sandbox.judge import outputs_match, values_match
from agentboost.sandbox.identities import UID_BASE, UID_COUNT, processes_of_uid
from agentboost.sandbox.judge import close_idle_harnesses
from agentboost.sandbox.runner import (
    SandboxLimits,
    protections,
    run_python,
)

LIMITS = SandboxLimits(cpu_s=2, wall_s=4, memory_mb=256, processes=16)
FULL = protections()["drop_user"] and protections()["network_namespace"]
needs_full = pytest.mark.skipif(not FULL, reason="uid/namespace protections need Linux and root "
                                                 "(CI runs as root and checks them)")


def test_plain_run_and_stdin():
    r = run_python("import sys\nprint(sys.stdin.read().upper())", stdin="hello\n", limits=LIMITS)
    assert r.verdict == "ok" and r.stdout == "HELLO\n\n" and r.exit_status == 0


def test_runtime_error_and_exit_code():
    r = run_python("raise ValueError('boom')", limits=LIMITS)
    assert r.verdict == "runtime_error" and r.exit_status == 1 and "ValueError: boom" in r.stderr


def test_infinite_loop_is_stopped():
    t0 = time.perf_counter()
    r = run_python("while True:\n    pass", limits=LIMITS)
    assert r.verdict == "timeout" and time.perf_counter() - t0 < LIMITS.wall_s + 2


def test_memory_bomb_is_stopped():
    r = run_python("x = bytearray(8 * 1024**3)\nprint('allocated')", limits=LIMITS)
    assert r.verdict == "memory_limit" and "allocated" not in r.stdout


def test_output_flood_is_capped():
    r = run_python("import sys\nfor _ in range(10**6):\n    sys.stdout.write('x' * 100)",
                   limits=SandboxLimits(cpu_s=5, wall_s=8, output_bytes=10_000))
    assert r.verdict == "output_limit" and len(r.stdout) <= 10_000


def test_parent_secrets_are_not_visible(monkeypatch):
    monkeypatch.setenv("AGENTBOOST_TEST_SECRET_TOKEN", "s3cr3t-value")
    r = run_python("import os\nprint(dict(os.environ))\n"
                   "try:\n    print(open(f'/proc/{os.getppid()}/environ').read())\nexcept OSError as e:\n    print('denied', e)",
                   limits=LIMITS)
    assert "s3cr3t-value" not in r.stdout and "AGENTBOOST_TEST_SECRET_TOKEN" not in r.stdout


def test_scratch_directory_is_fresh_and_removed():
    r = run_python("import os\nprint(os.getcwd())\nprint(sorted(os.listdir('.')))\nopen('out.txt', 'w').write('x')",
                   limits=LIMITS)
    cwd, listing = r.stdout.splitlines()[:2]
    assert listing == "['main.py']"
    assert not os.path.exists(cwd)


@needs_full
def test_fork_bomb_is_contained(leased_uids):
    r = run_python("import os\nwhile True:\n    os.fork()", limits=LIMITS)
    assert r.verdict in ("runtime_error", "timeout")
    assert "Resource temporarily unavailable" in r.stderr or r.verdict == "timeout"
    assert subprocess.run([sys.executable, "-c", "pass"], timeout=60).returncode == 0  # this process still forks fine
    assert _processes_of_uids_none_left(leased_uids)


@pytest.fixture
def leased_uids(monkeypatch):
    """The uids this test's runs lease. Another test may be running sandboxed programs at the same
    time (two workers), each on a uid leased to it alone: what is checked is this test's."""
    from agentboost.sandbox import runner

    uids = []

    class RecordedLease(runner.UidLease):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            uids.append(self.uid)

    monkeypatch.setattr(runner, "UidLease", RecordedLease)
    return uids


def _processes_of_uids_none_left(uids):
    # no process of the run's uid survives it (the judge's idle harnesses, warm for the next
    # problem, are ended first: they are not runs)
    close_idle_harnesses()
    assert uids, "the run leased no uid"
    assert all(UID_BASE <= uid < UID_BASE + UID_COUNT for uid in uids), uids
    return not [pid for uid in uids for pid in processes_of_uid(uid)]


@needs_full
def test_child_that_outlives_the_program_is_killed(tmp_path, leased_uids):
    # the child leaves the process group, then the program itself sleeps past its wall time
    code = ("import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(120)'])\n"
            "time.sleep(0.5)\nprint('started', flush=True)\ntime.sleep(120)")
    r = run_python(code, limits=LIMITS)
    assert r.stdout.strip() == "started" and r.verdict == "timeout"
    # the same program without the child, also past its wall time: the sweep kills exactly one more
    # (what else the sweep counts, the program and bubblewrap's processes, depends on the mode)
    alone = run_python("import time\nprint('started', flush=True)\ntime.sleep(120)", limits=LIMITS)
    assert alone.verdict == "timeout" and r.killed_processes == alone.killed_processes + 1
    assert _processes_of_uids_none_left(leased_uids)


@needs_full
def test_writing_outside_the_scratch_directory_is_contained(tmp_path):
    target = tmp_path / "escape.txt"
    home = os.path.expanduser("~/agentboost-escape.txt")
    repo = os.path.join(os.path.dirname(__file__), "escape.txt")
    code = "\n".join(
        f"try:\n    open({p!r}, 'w').write('x')\n    print('wrote', {p!r})\nexcept OSError as e:\n    print('denied', {p!r})"
        for p in (str(target), home, repo, "/tmp/agentboost-escape.txt"))
    r = run_python(code, limits=LIMITS)
    for p in (str(target), home, repo):
        assert f"denied {p}" in r.stdout or f"wrote {p}" not in r.stdout
        assert not os.path.exists(p)
    assert not os.path.exists("/tmp/agentboost-escape.txt")  # a private /tmp, gone with the run


@needs_full
def test_network_is_unreachable():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        r = run_python(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('connected')",
                       limits=LIMITS)
    finally:
        server.close()
    assert r.verdict == "runtime_error" and "connected" not in r.stdout
    assert "unreachable" in r.stderr.lower() or "refused" in r.stderr.lower()


@needs_full
def test_signalling_the_parent_is_refused():
    r = run_python(f"import os, signal\nos.kill({os.getpid()}, signal.SIGKILL)\nprint('sent')", limits=LIMITS)
    # its own PID namespace has no such process (without one: another uid's, refused)
    assert r.verdict == "runtime_error" and "sent" not in r.stdout
    assert "ProcessLookupError" in r.stderr or "PermissionError" in r.stderr
    r = run_python("import os, signal\nos.kill(os.getppid(), signal.SIGTERM)", limits=LIMITS)
    assert r.verdict == "runtime_error" and "sent" not in r.stdout
    assert os.getpid()  # still here


def test_output_comparison():
    assert outputs_match("1 2\n3\n", "1 2   \n3\n\n\n")
    assert not outputs_match("1 2\n3", "1 2\n4")
    assert not outputs_match("0.333333", "0.3333")
    assert outputs_match("0.333333 x", "0.3333 x", float_tol=1e-3)
    assert not outputs_match("0.33", "0.5", float_tol=1e-3)
    assert values_match([1, [2.0000000001]], [1, [2.0]]) and not values_match({"a": 1}, {"a": 2})
