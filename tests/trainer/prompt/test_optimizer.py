"""The reflective optimizer (``prompt.optimizer: agentboost.trainer.prompt.candidates:strands_optimizer``) builds its model through
``models/chat.py``, the one place Strands' model providers are built: here the embedded model
behind the vLLM CPU server's OpenAI chat route, which demands a key named by ``api_key_env``."""

import pytest
from helpers import CHAT_KEY, CHAT_KEY_ENV

from agentboost.models.chat import ChatModelError
from agentboost.trainer.prompt.candidates import Contrast, PromptTrainingError, strands_optimizer

pytestmark = pytest.mark.vllm

CONTRAST = Contrast(system_prompt="You are a helpful assistant.", instructions=[],
                    high=[{"task_id": "a", "question": "2+3?", "transcript": "user: 2+3?\nassistant calls "
                           "calculator({\"expression\": \"2+3\"})\ntool result: 5\nassistant: 5", "reward": 1.0,
                           "advantage": 1.0}],
                    low=[{"task_id": "b", "question": "4+4?", "transcript": "user: 4+4?\nassistant: 9",
                          "reward": 0.0, "advantage": -1.0}])


def test_the_optimizer_asks_a_chat_model_built_by_models_chat(chat_server, monkeypatch):
    monkeypatch.setenv(CHAT_KEY_ENV, CHAT_KEY)
    options = {"provider": "openai", "model_id": "base", "base_url": chat_server.url + "/v1",
               "api_key_env": CHAT_KEY_ENV, "max_retries": 0, "timeout_s": 60}
    text = strands_optimizer(CONTRAST, max_tokens=256, **options)
    assert isinstance(text, str) and text.strip() == text and text
    with pytest.raises(PromptTrainingError, match="cut at max_tokens=1"):
        strands_optimizer(CONTRAST, max_tokens=1, **options)
    # a bad option is the chat-model schema's one line, before any call
    with pytest.raises(ChatModelError, match="prompt.optimizer_options: unknown key 'host'"):
        strands_optimizer(CONTRAST, host="http://x", **options)
