"""Fixtures shared by the tests; the plain helpers (``cli``, ``REPO``, ...) are in tests/helpers.py.
The markers (slow, vllm, integration, gpu) are registered in pyproject.toml; tests/README.md says
what each folder covers and how to run a part of the suite."""

import os

# Under pytest-xdist (`-n 2`, the README's test command) two tests run at once on a 2-core machine:
# torch's (and the subprocesses') OpenMP pools of one thread each, so two workers never
# oversubscribe the cores, where spinning thread pools run many times slower. Set before anything
# imports torch; the subprocesses the tests start inherit it. A value already set wins.
# The vLLM CPU server binds its OpenMP threads to every core by default: each worker's servers are
# bound to a core of their own instead (gw0 to core 0, gw1 to core 1, ...).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _worker = int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw") or 0)
    _cores = sorted(os.sched_getaffinity(0))
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", str(_cores[_worker % len(_cores)]))

import pytest  # noqa: E402
from helpers import CHAT_KEY, CHAT_KEY_ENV, QWEN3_DIR, RLLM_ENV_TESTS, rllm_here, rllm_python


def pytest_configure(config):
    # Where the sandbox cannot isolate (no bubblewrap, no user namespaces: a laptop without root),
    # the tests that run model-written code still run, on the weak sandbox, and the attack tests skip
    # saying why; under CI=true, tests/sandbox/test_weak_refusal.py fails instead (CI must isolate).
    from agentboost.sandbox.runner import protections

    if not protections()["isolated"]:
        os.environ.setdefault("AGENTBOOST_SANDBOX_ALLOW_WEAK", "1")


def pytest_ignore_collect(collection_path, config):
    # The tests against a real rLLM run in the interpreter that has it (helpers.RLLM_ENV_TESTS): from
    # another one with the rLLM environment present, test_rllm_environment.py runs them there and
    # they are not collected here; that file itself only from such an interpreter. Without the rLLM
    # environment they are collected and skip naming the install (helpers.rllm_or_skip).
    if collection_path.parent.name != "rllm" or collection_path.parent.parent.name != "integrations":
        return None
    if collection_path.name in RLLM_ENV_TESTS:
        return True if (not rllm_here() and rllm_python()) else None
    if collection_path.name == "test_rllm_environment.py":
        return True if (rllm_here() or not rllm_python()) else None
    return None


def pytest_terminal_summary(terminalreporter):
    # where the long end-to-end runs' minutes went (the smoke tests record it: record_property
    # "profile"), at the end of every run, passed or not, with the slowest tests
    lines = [f"{rep.nodeid}: {value}" for outcome in ("passed", "failed") for rep in terminalreporter.getreports(outcome)
             for key, value in rep.user_properties if key == "profile"]
    if lines:
        terminalreporter.section("profiles")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_runtest_setup(item):
    # @pytest.mark.gpu: a test that needs CUDA skips where torch sees no GPU (the CPU-only CI)
    if item.get_closest_marker("gpu"):
        import torch

        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False here)")


@pytest.fixture(scope="session")
def qwen3_tokenizer():
    if not (QWEN3_DIR / "tokenizer.json").is_file():
        pytest.skip(f"the Qwen3 tokenizer fixture is not at {QWEN3_DIR} (../shared is absent in a bare clone)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(QWEN3_DIR))


@pytest.fixture(scope="session")
def smollm2_path():
    from agentboost.models.embedded import prepare_embedded

    return prepare_embedded("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def smollm2_engine(smollm2_path):
    from agentboost.sampling.hf_engine import HFEngine

    engine = HFEngine.from_pretrained(str(smollm2_path), max_batch_size=8)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def chat_server(smollm2_path, tmp_path_factory):
    """The embedded model on the vLLM CPU server's OpenAI chat route (tool calls in hermes format,
    structured outputs), which demands ``CHAT_KEY``; ``CHAT_KEY_ENV`` holds it for this session.
    One server for the whole run: every test of chat models we do not train (models/chat.py) and
    the docs pages whose stand-in for a hosted model it is (test_docs.py), on every xdist worker
    (``helpers.shared_by_workers``: the first worker to need it starts it; a server takes 30-40 s
    to start). Its ``url`` is the base URL (without ``/v1``)."""
    import types

    from helpers import shared_by_workers, vllm_python_or_skip

    from agentboost.sampling.vllm_server import VLLMServer

    python = vllm_python_or_skip()
    os.environ[CHAT_KEY_ENV] = CHAT_KEY

    def start():
        server = VLLMServer(smollm2_path, python=python, kv_cache_gib=1, max_model_len=4096,
                            extra_args=("--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--api-key", CHAT_KEY))
        server.start()
        return server, server.url

    # the run's base temporary directory: each xdist worker's is a folder of it
    run_dir = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_dir = run_dir.parent
    with shared_by_workers(run_dir / "chat-server", start, lambda server: server.stop()) as url:
        yield types.SimpleNamespace(url=url)
    os.environ.pop(CHAT_KEY_ENV, None)
