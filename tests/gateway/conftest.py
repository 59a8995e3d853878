import pytest


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(smollm2_path))


@pytest.fixture(params=["smollm2_tokenizer", "qwen3_tokenizer"])
def tok(request):
    """Both templates: SmolLM2's (knows no tools: Hermes tools in the system prompt) and Qwen3's
    (renders tools itself)."""
    return request.getfixturevalue(request.param)
