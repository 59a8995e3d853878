"""The renderer's encoding shortcuts give exactly the tokenizer's own ids: the Rust tokenizer called
directly, and a conversation's head (its system turn) encoded once and reused."""

import pytest
from transformers import AutoTokenizer

from agentboost.agents.chat_rendering import _NOT_SPLIT, ChatRenderer

TEXTS = ["", "What is 17 + 25?", "  two spaces\tand a tab\n\nnewlines", "é ü 你好 🙂 emoji",
         "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<tool_call>\n{\"name\": \"add\"}\n</tool_call>",
         "<|endoftext|> after a special token", "<think>\nreasoning\n</think>\n\nThe answer is 42."]


def _tokenizers(smollm2_path, qwen3_tokenizer):
    return [AutoTokenizer.from_pretrained(str(smollm2_path)), qwen3_tokenizer]


def _conversations(renderer, n):
    tools = [{"name": "add", "description": "Add two integers.",
              "inputSchema": {"json": {"type": "object", "properties": {"a": {"type": "integer"}}}}}]
    out = []
    for i in range(n):
        messages = [{"role": "user", "content": [{"text": f"What is {i} + 25? (task {i})"}]}]
        if i % 3 == 1:
            messages += [{"role": "assistant", "content": [{"text": f"Let me add. {i}"}]},
                         {"role": "user", "content": [{"text": "  go on\n"}]}]
        hf, t = renderer.to_hf_messages(messages, "You are a careful assistant.", tools)
        out.append(renderer.render(hf, t, add_generation_prompt=True))
    return out


def test_direct_encoding_is_the_tokenizers_own(smollm2_path, qwen3_tokenizer):
    for tok in _tokenizers(smollm2_path, qwen3_tokenizer):
        r = ChatRenderer(tok)
        assert r._direct is not None  # the fast path is the one in use for these tokenizers
        for text in TEXTS + _conversations(r, 3):
            ids = list(tok(text, add_special_tokens=False)["input_ids"])
            assert r.encode(text) == ids
            assert r.decode(ids) == tok.decode(ids, skip_special_tokens=False)


def test_conversation_heads_are_encoded_once_and_give_the_same_ids(smollm2_path, qwen3_tokenizer):
    for tok in _tokenizers(smollm2_path, qwen3_tokenizer):
        r = ChatRenderer(tok)
        texts = _conversations(r, 12)
        for text in texts:
            assert r.encode_conversation(text) == list(tok(text, add_special_tokens=False)["input_ids"])
        (head, ids), = r._heads.items()  # one system turn, kept after its second sight
        assert texts[0].startswith(head) and ids == r.encode(head)


def test_a_head_whose_split_changes_the_tokens_is_never_split(smollm2_path):
    """A tokenizer where the end of the head and what follows it make one token (here an added token
    for the end of turn with its newline): encoding the rest on its own would give other ids, so the
    whole text is encoded every time."""
    tok = AutoTokenizer.from_pretrained(str(smollm2_path))
    tok.add_tokens(["<|im_end|>\n"], special_tokens=True)
    r = ChatRenderer(tok)
    texts = _conversations(r, 5)
    head_end = texts[0].index(r.turn_end) + len(r.turn_end)
    whole = list(tok(texts[0], add_special_tokens=False)["input_ids"])
    assert r.encode(texts[0][:head_end]) + r.encode(texts[0][head_end:]) != whole  # the split would change them
    for text in texts:
        assert r.encode_conversation(text) == list(tok(text, add_special_tokens=False)["input_ids"])
    assert list(r._heads.values()) == [_NOT_SPLIT]


@pytest.mark.parametrize("setting", ["truncation", "split_special_tokens"])
def test_the_tokenizer_is_called_where_the_backend_alone_would_differ(smollm2_path, setting):
    tok = AutoTokenizer.from_pretrained(str(smollm2_path))
    if setting == "truncation":
        tok.backend_tokenizer.enable_truncation(max_length=4)
        assert ChatRenderer(tok)._direct is None
    else:  # the tokenizer's own setting, changed after the renderer was made
        r = ChatRenderer(tok)
        tok.split_special_tokens = True
        text = "<|im_start|>user\nhi<|im_end|>"
        assert r.encode(text) == list(tok(text, add_special_tokens=False)["input_ids"])
        assert len(r.encode(text)) > 5  # the special tokens were split into their characters


def _episode_conversations(n):
    """Strands conversations as an episode grows them: the question, a tool call, its result, the
    answer; every one under the same system turn, so the head cache is filled and then used."""
    out = []
    for i in range(n):
        call = {"toolUse": {"toolUseId": f"call_{i}", "name": "add", "input": {"a": i, "b": 25}}}
        result = {"toolResult": {"toolUseId": f"call_{i}", "status": "success", "content": [{"text": str(i + 25)}]}}
        turns = [{"role": "user", "content": [{"text": f"What is {i} + 25? é 你好 (task {i})"}]},
                 {"role": "assistant", "content": [{"text": "Let me add."}, call]},
                 {"role": "user", "content": [result]},
                 {"role": "assistant", "content": [{"text": f"The answer is {i + 25}."}]},
                 {"role": "user", "content": [{"text": "  and twice that?\n"}]}]
        out += [turns[:k] for k in (1, 3, 5)]
    return out


@pytest.mark.parametrize("setting", ["smollm2", "qwen3", "qwen3-no-thinking", "custom-template"])
def test_renderer_ids_are_apply_chat_templates_own(smollm2_path, qwen3_tokenizer, setting):
    """What the trainable model hands the policy for a conversation (``encode_conversation`` of the
    rendered text, through the Rust tokenizer and the head cache) is exactly the ids the
    tokenizer's own ``apply_chat_template(..., tokenize=True)`` gives, for several templates
    (SmolLM2's, Qwen3's with and without thinking, a template of the user's own with another turn end)."""
    kwargs, turn_end = {}, None
    if setting.startswith("qwen3"):
        tok = qwen3_tokenizer
        kwargs = {"enable_thinking": False} if setting == "qwen3-no-thinking" else {}
    else:
        tok = AutoTokenizer.from_pretrained(str(smollm2_path))
        if setting == "custom-template":
            tok.chat_template = ("{% for m in messages %}<|endoftext|>{{ m['role'] }}: {{ m['content'] }}\n"
                                 "{% endfor %}{% if add_generation_prompt %}<|endoftext|>assistant: {% endif %}")
            turn_end = "<|endoftext|>"
    r = ChatRenderer(tok, template_kwargs=kwargs, turn_end_token=turn_end)
    assert r._direct is not None
    tools = [{"name": "add", "description": "Add two integers.",
              "inputSchema": {"json": {"type": "object", "properties": {"a": {"type": "integer"},
                                                                        "b": {"type": "integer"}}}}}]
    for messages in _episode_conversations(4):
        hf, t = r.to_hf_messages(messages, "You are a careful assistant.", tools)
        ours = r.encode_conversation(r.render(hf, t, add_generation_prompt=True))
        own = tok.apply_chat_template(hf, tools=t, tokenize=True, add_generation_prompt=True, return_dict=True,
                                      **kwargs)["input_ids"]
        assert ours == list(own)
    assert any(isinstance(ids, list) for ids in r._heads.values())  # the cached head was used
