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
from helpers import CHAT_KEY, CHAT_KEY_ENV, QWEN3_DIR


def pytest_configure(config):
    # Where the sandbox cannot isolate (no bubblewrap, no user namespaces: a laptop without root),
    # the tests that run model-written code still run, on the weak sandbox, and the attack tests skip
    # saying why; under CI=true, tests/sandbox/test_weak_refusal.py fails instead (CI must isolate).
    from agentboost.sandbox.runner import protections

    if not protections()["isolated"]:
        os.environ.setdefault("AGENTBOOST_SANDBOX_ALLOW_WEAK", "1")


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
def chat_server(smollm2_path):
    """The embedded model on the vLLM CPU server's OpenAI chat route (tool calls in hermes format,
    structured outputs), which demands ``CHAT_KEY``; ``CHAT_KEY_ENV`` holds it for this session.
    One server for every test of chat models we do not train (models/chat.py) in the session."""
    from helpers import vllm_python_or_skip

    from agentboost.sampling.vllm_server import VLLMServer

    python = vllm_python_or_skip()
    os.environ[CHAT_KEY_ENV] = CHAT_KEY
    server = VLLMServer(smollm2_path, python=python, kv_cache_gib=1, max_model_len=4096,
                        extra_args=("--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--api-key", CHAT_KEY))
    with server:
        yield server
    os.environ.pop(CHAT_KEY_ENV, None)
