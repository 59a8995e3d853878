"""Reward integrity: programs that try to read the hidden answers, or to reach past their run, get
no answer and no reward; honest programs still pass.

Every task here expects a random hex secret that appears nowhere but the task file (world-readable,
in a world-readable directory, named on a host process's command line) and, for some, a host unix
socket or another sandboxed run's files. Each attack prints what it finds. The attacks run:
- through ``agentboost score --reward code`` (the reward users train with) and the code tool's
  check, as root here;
- through the judge as an unprivileged user in a user namespace (``setpriv`` to ``nobody``, the
  system Python), where the machine allows it; the skip says why when it does not;
- on the host without the sandbox, for the attacks that need no sandbox to exist: there they find
  the secret, so a pass here is the sandbox's doing.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from helpers import REPO, cli

from agentboost.sandbox.judge import run_tests
from agentboost.sandbox.runner import SandboxLimits, protections

ISOLATED = protections()["isolated"]
needs_isolation = pytest.mark.skipif(not ISOLATED, reason="no isolating sandbox here: "
                                     + "; ".join(map(str, protections()["missing"])))
LIMITS = SandboxLimits(cpu_s=4, wall_s=8, memory_mb=256, processes=8, disk_mb=16)

_FIND_IN_TASKS = '''
import json
def from_task_file(path):
    for line in open(path, encoding="utf-8"):
        t = json.loads(line)
        if t.get("task_id") == TASK_ID:
            tests = json.loads(t["tests"]) if isinstance(t["tests"], str) else t["tests"]
            return tests["hidden"][0]["output"].strip()
'''

ATTACKS = {
    # the task file named on a host process's command line (the scorer's, the trainer's)
    "proc_cmdline": _FIND_IN_TASKS + '''
import os
found = None
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        for a in args:
            a = a.decode(errors="replace")
            if a.endswith(".jsonl"):
                try:
                    found = found or from_task_file(a)
                except Exception:
                    pass
print(found)
''',
    # every *.jsonl / *.parquet the program can see
    "walk_root": _FIND_IN_TASKS + '''
import os, re
found = None
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/usr", "/dev")]
    for f in files:
        p = os.path.join(root, f)
        if f.endswith(".jsonl"):
            try:
                found = found or from_task_file(p)
            except Exception:
                pass
        elif f.endswith(".parquet"):
            try:
                data = open(p, "rb").read()
                if TASK_ID.encode() in data:
                    found = found or re.findall(rb"[0-9a-f]{32}", data)[0].decode()
            except Exception:
                pass
print(found)
''',
    # the project, the run directory and the task file by their host paths
    "host_paths": _FIND_IN_TASKS + '''
import os
seen = []
for p in (REPO + "/README.md", REPO + "/agentboost/__init__.py", RUN_DIR, os.path.expanduser("~root")):
    if os.path.exists(p):
        seen.append(p)
try:
    print(from_task_file(TASKS))
except Exception:
    print("not found", seen)
''',
    # a world-writable unix socket on the host's filesystem, and an abstract one
    "unix_socket": '''
import socket
for address in (SOCKET_PATH, "\\0" + ABSTRACT):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(address)
        print(s.recv(100).decode())
        break
    except OSError:
        pass
else:
    print("no socket")
''',
    # what else runs here: the decoy's command line names the task file
    "list_processes": '''
import os
names = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            names.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode())
        except OSError:
            pass
hits = [n for n in names if DECOY in n]
print(hits[0] if hits else "nothing of the host", len(names))
''',
    # more memory than the run's limit, in many children (each under the per-process limit)
    "memory_children": '''
import os, time
pids = []
for i in range(12):
    try:
        pid = os.fork()
    except OSError:  # the process limit
        break
    if pid == 0:
        try:
            b = bytearray(180 << 20)
            b[::4096] = b"x" * len(b[::4096])
            time.sleep(1.5)
            os._exit(0)
        except BaseException:
            os._exit(1)
    pids.append(pid)
ok = sum(os.waitpid(p, 0)[1] == 0 for p in pids)
print(f"{ok} of 12 children held 180 MB")
''',
    # more data than the disk limit, everywhere the program can write
    "fill_disk": '''
import os
total = 0
chunk = b"x" * (1 << 20)
for d in (".", "/tmp", "/dev/shm", "/var/tmp", "/"):
    for i in range(400):
        try:
            with open(os.path.join(d, f"fill-{i}"), "wb") as f:
                f.write(chunk * 8)
            total += 8
        except OSError:
            break
print(f"wrote {total} MB")
''',
}
# what a successful attack would print: the secret, or a figure no limit lets it reach
UNREACHABLE = {"memory_children": "12 of 12 children held 180 MB", "fill_disk": "wrote 16000 MB"}
CONTROLS = {
    "echo": ("import sys\nprint(sys.stdin.read().strip()[::-1])\n", "abc\n", "cba"),
    "sum": ("print(sum(range(10)))\n", "", "45"),
}


class Scene:
    """A task file of secrets in a world-readable directory, a decoy process naming it, a host unix
    socket that hands out a secret; removed afterwards."""

    def __init__(self, tmp_base: str = "/var/tmp"):
        self.dir = tempfile.mkdtemp(prefix="agentboost-attack-", dir=tmp_base)
        os.chmod(self.dir, 0o755)
        self.tasks_path = os.path.join(self.dir, "tasks.jsonl")
        self.secrets = {name: secrets.token_hex(16) for name in ATTACKS}
        self.decoy_tag = f"decoy-{secrets.token_hex(4)}"
        rows = []
        for name, secret in self.secrets.items():
            output = UNREACHABLE.get(name, secret)
            rows.append({"task_id": f"attack-{name}", "question": "q", "answer": None,
                         "tests": json.dumps({"public": [],
                                              "hidden": [{"kind": "stdio", "input": "", "output": output}]})})
        for name, (_, stdin, out) in CONTROLS.items():
            rows.append({"task_id": f"control-{name}", "question": "q", "answer": None,
                         "tests": json.dumps({"public": [], "hidden": [{"kind": "stdio", "input": stdin, "output": out}]})})
        Path(self.tasks_path).write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.chmod(self.tasks_path, 0o644)
        self.decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", self.tasks_path,
                                       self.decoy_tag])
        self.socket_path = os.path.join(self.dir, "host.sock")
        self.abstract = f"agentboost-attack-{secrets.token_hex(4)}"
        self.servers = []
        for address in (self.socket_path, "\0" + self.abstract):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(address)
            s.listen(8)
            self.servers.append(s)
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()
        os.chmod(self.socket_path, 0o777)

    def _serve(self, server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(self.secrets["unix_socket"].encode())
            conn.close()

    def program(self, name: str) -> str:
        consts = {"TASK_ID": f"attack-{name}", "TASKS": self.tasks_path, "REPO": str(REPO), "RUN_DIR": self.dir,
                  "SOCKET_PATH": self.socket_path, "ABSTRACT": self.abstract, "DECOY": self.decoy_tag}
        return "".join(f"{k} = {v!r}\n" for k, v in consts.items()) + ATTACKS[name]

    def task(self, task_id: str) -> dict:
        for line in open(self.tasks_path):
            t = json.loads(line)
            if t["task_id"] == task_id:
                return t
        raise KeyError(task_id)

    def close(self) -> None:
        self.decoy.kill()
        self.decoy.wait()
        for s in self.servers:
            s.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def scene():
    s = Scene()
    yield s
    s.close()


def _leaked(scene: Scene, name: str, stdout: str) -> bool:
    return scene.secrets[name] in stdout or UNREACHABLE.get(name, "\0") in stdout


def test_the_attacks_find_the_secret_without_the_sandbox(scene):
    # the same programs run on the host as a plain process: these attacks work there, so their
    # failure in the sandbox below is the sandbox's doing
    for name in ("proc_cmdline", "host_paths", "unix_socket", "list_processes"):
        r = subprocess.run([sys.executable, "-c", scene.program(name)], capture_output=True, text=True, timeout=60)
        if name == "list_processes":
            assert scene.decoy_tag in r.stdout, (name, r.stdout, r.stderr)
        else:
            assert scene.secrets[name] in r.stdout, (name, r.stdout, r.stderr)


@needs_isolation
def test_attacks_through_score_get_no_reward(scene, tmp_path):
    answers = tmp_path / "answers.jsonl"
    rows = [{"task_id": f"attack-{n}", "answer": f"```python\n{scene.program(n)}```"} for n in ATTACKS]
    rows += [{"task_id": f"control-{n}", "answer": f"```python\n{code}```"} for n, (code, _, _) in CONTROLS.items()]
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = tmp_path / "results.jsonl"
    r = cli("score", "--reward", "code", "--tasks", scene.tasks_path, "--answers", answers, "--results", results,
            "--jobs", "2", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"passed={len(CONTROLS)} total={len(rows)}" in r.stdout, r.stdout
    scores = {row["task_id"]: row["score"] for row in map(json.loads, results.read_text().splitlines())}
    assert all(scores[f"control-{n}"] == 1.0 for n in CONTROLS)
    assert all(scores[f"attack-{n}"] == 0.0 for n in ATTACKS), scores


@needs_isolation
def test_attacks_through_the_code_tool_are_not_verified(scene):
    from agentboost.tools.strands_code_tool import check_code

    for name in ATTACKS:
        # the tool runs the public example (its expected output is shown to the agent: it is in the
        # prompt); the secret is the hidden test's, and what the program printed is in the result
        task = dict(scene.task(f"attack-{name}"))
        task["tests"] = json.dumps({"public": [{"kind": "stdio", "input": "", "output": "public-example"}],
                                    "hidden": json.loads(task["tests"])["hidden"]})
        outcome, text = check_code(scene.program(name), task)
        assert outcome == "wrong_output", (name, text)
        assert scene.secrets[name] not in text and UNREACHABLE.get(name, "\0") not in text, (name, text)


@needs_isolation
def test_what_the_attacks_see(scene):
    # beyond "no reward": what each attack saw, so a regression names the protection that broke
    out = {}
    for name in ATTACKS:
        o = run_tests(scene.program(name), [{"kind": "stdio", "input": "", "output": "-"}], limits=LIMITS)
        out[name] = o[0].detail
    assert "None" in out["proc_cmdline"] and "None" in out["walk_root"]
    assert "not found []" in out["host_paths"]  # not the project, the run dir, nor root's home
    assert "no socket" in out["unix_socket"]
    assert "nothing of the host" in out["list_processes"]
    held = int(out["memory_children"].split("got '")[1].split(" of")[0])
    assert held * 180 < 256 + 180  # all of them together stayed within the run's memory
    wrote = int(out["fill_disk"].split("wrote ")[1].split(" MB")[0])
    assert wrote <= 3 * LIMITS.disk_mb  # the work dir, /tmp and /dev/shm, each of disk_mb


@needs_isolation
def test_another_runs_files_and_processes_are_out_of_reach(scene):
    # a victim run writes its secret where it may and stays alive; an attacker run, at the same
    # time, looks for the secret and kills whatever process it can name
    secret = secrets.token_hex(16)
    victim = ("import os, time\n"
              f"for d in ('.', '/tmp', '/dev/shm'):\n    open(os.path.join(d, 'secret'), 'w').write({secret!r})\n"
              "time.sleep(2.5)\nprint('alive')\n")
    attacker = '''
import os, signal
found = []
for base in ("/tmp", "/dev/shm", "/sandbox", "/run", "/var/tmp"):
    for root, dirs, files in os.walk(base):
        for f in files:
            try:
                found.append(open(os.path.join(root, f)).read(100))
            except OSError:
                pass
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for sub in ("cwd", "root"):
            try:
                for f in os.listdir(f"/proc/{pid}/{sub}"):
                    found.append(f)
            except OSError:
                pass
for pid in range(2, 70000):
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
print(found)
'''
    results = {}
    t = threading.Thread(target=lambda: results.setdefault("victim", run_tests(
        victim, [{"kind": "stdio", "input": "", "output": "alive"}], limits=LIMITS)))
    t.start()
    time.sleep(0.8)
    got = run_tests(attacker, [{"kind": "stdio", "input": "", "output": "-"}], limits=LIMITS)[0]
    t.join(30)
    assert secret not in got.detail
    assert results["victim"][0].passed, results["victim"][0]


@needs_isolation
def test_a_script_tests_assertions_are_out_of_the_programs_reach():
    # HumanEval-style: the check holds the expected value; the program reads its caller's frame,
    # its own process and its parent's memory, and answers what it found
    secret = secrets.randbelow(10 ** 12)
    program = '''
import os, sys, gc
def answer(x):
    found = []
    f = sys._getframe(1)
    while f is not None:
        found += [c for c in f.f_code.co_consts if isinstance(c, int) and c > 1000]
        f = f.f_back
    for o in gc.get_objects():
        if isinstance(o, str) and "assert" in o:
            found.append(o)
    for pid in ("1", str(os.getppid())) + tuple(os.listdir("/proc")):
        try:
            open(f"/proc/{pid}/mem", "rb").read(1)
            found.append(f"read {pid}")
        except (OSError, ValueError):
            pass
    ints = [v for v in found if isinstance(v, int)]
    return ints[0] if ints else -1
'''
    check = f"def check(candidate):\n    assert candidate(3) == {secret}\n\ncheck(answer)\n"
    o = run_tests(program, [{"kind": "script", "code": check}], limits=LIMITS)[0]
    assert not o.passed and o.verdict == "wrong_output", o
    # the same check on the program that reads its own frame, run as one process, would pass:
    # the split is what stops it
    r = subprocess.run([sys.executable, "-c", program + "\n" + check], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_leased_uids_never_collide_across_processes(tmp_path):
    # the scheme before leases gave processes whose PIDs were equal modulo 10,000 the same uids, and
    # one run's sweep killed the other's program; both processes here report the same PID
    if os.geteuid() != 0:
        pytest.skip("sandbox uids are leased only when the trainer runs as root")
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import os, sys, json\nos.getpid = lambda: 4242\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from agentboost.sandbox.runner import run_python, SandboxLimits\n"
        "role = sys.argv[1]\nuids, verdicts = set(), []\n"
        "if role == 'long':\n"
        "    r = run_python('import os, time\\nprint(os.getuid())\\ntime.sleep(3)\\nprint(\"alive\")', "
        "limits=SandboxLimits(cpu_s=5, wall_s=10))\n"
        "    print(json.dumps({'out': r.stdout, 'verdict': r.verdict}))\n"
        "else:\n"
        "    for _ in range(15):\n"
        "        r = run_python('import os\\nprint(os.getuid())', limits=SandboxLimits())\n"
        "        uids.add(r.stdout.strip()); verdicts.append(r.verdict)\n"
        "    print(json.dumps({'uids': sorted(uids), 'verdicts': verdicts}))\n")
    long = subprocess.Popen([sys.executable, str(driver), "long"], stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    short = subprocess.run([sys.executable, str(driver), "short"], capture_output=True, text=True, timeout=120)
    out, _ = long.communicate(timeout=120)
    a, b = json.loads(out.strip().splitlines()[-1]), json.loads(short.stdout.strip().splitlines()[-1])
    assert a["verdict"] == "ok" and a["out"].split()[1] == "alive", a
    assert a["out"].split()[0] not in b["uids"] and set(b["verdicts"]) == {"ok"}


_UNPRIVILEGED_DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from agentboost.sandbox.judge import run_tests
from agentboost.sandbox.runner import SandboxLimits, protections
job = json.load(open(sys.argv[2]))
limits = SandboxLimits(**job["limits"])
out = {"protections": {k: v for k, v in protections().items() if isinstance(v, (bool, str))}}
for name, (code, tests) in job["programs"].items():
    o = run_tests(code, tests, limits=limits)[0]
    out[name] = {"passed": o.passed, "verdict": o.verdict, "detail": o.detail}
print(json.dumps(out))
'''


def _system_python() -> str | None:
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.isfile(p) and os.access(p, os.X_OK):
            v = subprocess.run([p, "-c", "import sys; print(sys.version_info >= (3, 10))"], capture_output=True,
                               text=True)
            if v.stdout.strip() == "True":
                return p
    return None


def test_attacks_as_an_unprivileged_user_in_a_user_namespace(scene, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("becoming another user needs root; as a user, the tests above already run unprivileged")
    python, setpriv = _system_python(), shutil.which("setpriv")
    if python is None or setpriv is None or shutil.which("bwrap") is None:
        pytest.skip(f"needs a system Python >= 3.10 ({python}), setpriv ({setpriv}) and bwrap ({shutil.which('bwrap')})")
    # a world-readable copy of the package: the checkout may sit where nobody cannot read
    home = tempfile.mkdtemp(prefix="agentboost-unpriv-", dir="/var/tmp")
    try:
        shutil.copytree(REPO / "agentboost", Path(home) / "agentboost", ignore=shutil.ignore_patterns("__pycache__"))
        programs = {name: (scene.program(name), [{"kind": "stdio", "input": "",
                                                   "output": UNREACHABLE.get(name, scene.secrets[name])}])
                    for name in ATTACKS}
        programs.update({f"control-{n}": (code, [{"kind": "stdio", "input": stdin, "output": out}])
                         for n, (code, stdin, out) in CONTROLS.items()})
        job = Path(home) / "job.json"
        job.write_text(json.dumps({"programs": programs, "limits": {"cpu_s": 4, "wall_s": 8, "memory_mb": 256,
                                                                    "processes": 8, "disk_mb": 16}}))
        (Path(home) / "driver.py").write_text(_UNPRIVILEGED_DRIVER)
        for root, dirs, files in os.walk(home):
            for n in dirs + files:
                os.chmod(os.path.join(root, n), 0o755 if n in dirs else 0o644)
        os.chmod(home, 0o755)
        r = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--reset-env", python,
                            f"{home}/driver.py", home, str(job)], capture_output=True, text=True, timeout=600,
                           cwd="/")
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads(r.stdout.strip().splitlines()[-1])
        if out["protections"]["mode"] != "bwrap-user":
            pytest.skip(f"user namespaces are not allowed here: {out['protections']}")
        for n in CONTROLS:
            assert out[f"control-{n}"]["passed"], json.dumps(out)
        for name in ATTACKS:
            # (the judge's detail quotes the expected output; what the program printed follows "got")
            got = out[name]["detail"].partition(", got ")[2]
            assert not out[name]["passed"] and scene.secrets[name] not in got, (name, out[name])
    finally:
        shutil.rmtree(home, ignore_errors=True)


@needs_isolation
def test_each_test_and_each_problem_starts_clean():
    # a test leaves files wherever it may write and System V IPC objects (they outlive processes);
    # the next test of the problem, and the next problem in the same warm harness, find none
    leave = '''import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for p in ("/sandbox/left", "/tmp/left", "/dev/shm/left", "left"):
    open(p, "w").write("x")
for p in ("/dev/left", "/left"):
    try:
        open(p, "w").write("x")
        print("wrote", p)
    except OSError:
        pass
libc.shmget(4242, 4096, 0o1666)
libc.msgget(4243, 0o1666)
libc.semget(4244, 1, 0o1666)
try:
    import os
    os.mkfifo("/tmp/queue")
    libc.mq_open(b"/left", 0o100 | 0o2, 0o666, None)  # O_CREAT | O_RDWR
except OSError:
    pass
'''
    look = '''import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
found = [p for p in ("/sandbox/left", "/tmp/left", "/dev/shm/left", "../left", "/tmp/queue") if os.path.exists(p)]
found += [f"ipc {k}" for k in ("shm", "msg", "sem") if len(open(f"/proc/sysvipc/{k}").readlines()) > 1]
found += ["mq"] if libc.mq_open(b"/left", 2) >= 0 else []
print("found", found)
'''
    tests = [{"kind": "stdio", "input": "", "output": "found []"}] * 2
    out = run_tests(leave + look, tests[:1], limits=LIMITS)
    # within the test they are there (the read-only root and /dev took no file)
    assert "got \"found ['/sandbox/left', '/tmp/left', '/dev/shm/left', '../left', '/tmp/queue'" in out[0].detail
    assert "wrote" not in out[0].detail, out[0].detail
    for o in run_tests(f"import sys\nif sys.stdin.read() == '1':\n    exec({leave!r})\nexec({look!r})",
                       [{"kind": "stdio", "input": "1", "output": "found []"},
                        {"kind": "stdio", "input": "2", "output": "found []"}], limits=LIMITS)[1:]:
        assert o.passed, o.detail
    assert run_tests(look, tests, limits=LIMITS)[0].passed  # the next problem, in the warm harness


# -- what a warm harness served before: a program's own memory holds nothing of it ------------------

_SCAN_MEMORY = r'''
import ctypes, json, re
def scan(patterns):
    """Which of the byte patterns occur anywhere in this process's own writable memory."""
    with open("/proc/self/maps") as f:
        maps = [line.split() for line in f]
    found = {name: False for name in patterns}
    compiled = {name: re.compile(p.encode()) for name, p in patterns.items()}
    for parts in maps:
        if "r" not in parts[1] or (len(parts) > 5 and parts[5] not in ("[heap]", "[stack]")):
            continue  # files' pages (reading past their end raises SIGBUS) hold nothing the judge sent
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        if hi - lo > 1 << 28:
            continue
        data = ctypes.string_at(lo, hi - lo)
        for name, p in compiled.items():
            found[name] = found[name] or p.search(data) is not None
    return found
'''


def _pattern(prefix: str, secret: str) -> str:
    # a regular expression that matches prefix + secret while its own text (which the scanning
    # program holds) does not: the secret's first character is written as a class
    return f"{prefix}[{secret[0]}]{secret[1:]}"


@needs_isolation
def test_a_memory_scan_finds_nothing_of_the_answers_scored_before_it():
    # A GRPO group's answers are scored one after another by the same warm harness. An answer that
    # scans its own memory (it may: ctypes) looks for what the harness held for the answers before
    # it: the check of a script test (its expected value), a stdin test's output, the other answer's
    # code. A test program starts from the zygote's image plus its own problem's solution, so it
    # finds none of them; it does find its own code, which proves the scan works.
    from agentboost.sandbox import judge

    limits = SandboxLimits(cpu_s=4, wall_s=8, memory_mb=257, processes=8, disk_mb=16)  # a pool of its own
    expected, output, code_mark, own = (secrets.token_hex(12) for _ in range(4))
    pad = "# " + "padding " * 600 + "\n"  # a long check, as HumanEval's are: longer than the next messages
    check = f"{pad}def check(candidate):\n    assert candidate() == 'EXP-{expected}'\n\ncheck(f)\n"
    sibling = (f"def f():\n    return 'EXP-' + {expected[:6]!r} + {expected[6:]!r}  # SRC-{code_mark}\n"
               f"print('OUT-' + {output[:6]!r} + {output[6:]!r})\n")
    tests = [{"kind": "script", "code": check}, {"kind": "stdio", "input": "", "output": f"OUT-{output}"}]
    assert [o.verdict for o in run_tests(sibling, tests, limits=limits)] == ["passed", "passed"]
    harness = judge._pool[limits][0]
    patterns = {"check": _pattern("EXP-", expected), "output": _pattern("OUT-", output),
                "code": _pattern("SRC-", code_mark), "own": _pattern("OWN-", own)}
    scanner = (_SCAN_MEMORY + f"mine = 'OWN-{own}'\nfound = scan({patterns!r})\n"
               "def f():\n    return json.dumps(found, sort_keys=True)\n"
               "print(json.dumps(found, sort_keys=True))\n")
    out = run_tests(scanner, [{"kind": "stdio", "input": "", "output": "-"}], limits=limits)[0]
    assert judge._pool[limits] == [harness]  # the same warm harness served it
    found = json.loads(out.detail.split("got '", 1)[1].rstrip("'"))
    assert found == {"check": False, "output": False, "code": False, "own": True}, found


@needs_isolation
def test_the_kernel_keyring_carries_nothing_between_answers():
    # keys belong to the uid, not to a namespace: a warm harness's next answer (same uid) would read
    # what the previous one stored, and the keys would stay pinned to the uid after the run. The
    # sandbox refuses the keyring's system calls (ENOSYS), in the judge and in one-off runs alike.
    from agentboost.sandbox.runner import run_python

    keys = '''
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ADD, CTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
def add(ring):
    r = libc.syscall(ADD, b"user", b"note", b"ANSWER-42", 9, ring)
    return "added" if r >= 0 else ctypes.get_errno()
def find(ring):
    kid = libc.syscall(CTL, 10, ring, b"user", b"note", 0)  # KEYCTL_SEARCH
    if kid < 0:
        return "none"
    buf = ctypes.create_string_buffer(64)
    n = libc.syscall(CTL, 11, kid, buf, 64)  # KEYCTL_READ
    return buf.raw[:max(n, 0)].decode()
RINGS = (-4, -3, -5)  # the user keyring, the session keyring, the user's session keyring
'''
    limits = SandboxLimits(cpu_s=4, wall_s=8, memory_mb=258, processes=8, disk_mb=16)
    test = [{"kind": "stdio", "input": "", "output": "-"}]
    wrote = run_tests(keys + "print([add(r) for r in RINGS])\n", test, limits=limits)[0].detail
    read = run_tests(keys + "print([find(r) for r in RINGS])\n", test, limits=limits)[0].detail
    assert "got '[38, 38, 38]'" in wrote, wrote  # ENOSYS
    assert "got \"['none', 'none', 'none']\"" in read, read
    r = run_python(keys + "print([add(r) for r in RINGS])\n", limits=limits)
    assert r.stdout.strip() == "[38, 38, 38]", (r.stdout, r.stderr)
    # the hostname, the other state of the same kind a program might leave: its own UTS namespace,
    # and no right to change it
    r = run_python("import socket\ntry:\n    socket.sethostname('left-by-a-program')\nexcept OSError as e:\n"
                   "    print(type(e).__name__)\nprint(socket.gethostname() != 'left-by-a-program')\n", limits=limits)
    assert r.stdout.split() == ["PermissionError", "True"], (r.stdout, r.stderr)
