from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
QWEN3_DIR = REPO.parent / "shared" / "fixtures" / "qwen3-tokenizer"


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
    from agentboost.sampling.local_engine import LocalEngine

    engine = LocalEngine.from_pretrained(str(smollm2_path), max_batch_size=8)
    yield engine
    engine.close()
