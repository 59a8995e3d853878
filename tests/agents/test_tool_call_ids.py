"""Tool-call ids reach the chat template: a tool result carries the ``tool_call_id`` of its call and
an assistant turn rendered by agentboost carries each call's ``id``; the id a call gets is the one
the model wrote (Kimi K2 ``functions.NAME:INDEX``, Mistral v11 ``[CALL_ID]``), else one of the form
the family's template accepts (Mistral: 9 alphanumerics), unique within the episode.

The templates here are small stand-ins written for these tests on the Qwen3 fixture tokenizer (its
ChatML turns, so episodes extend as with the real one), each encoding one family's rule: the
Mistral one raises, as Mistral's published templates do, unless a tool message's ``tool_call_id``
is 9 alphanumeric characters; the Kimi K2 one prints ``## Return of {{ tool_call_id }}`` as Kimi
K2's does."""

from __future__ import annotations

import asyncio
import copy
import re

import pytest
from helpers import tool_result_texts
from strands import tool

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.agents.tool_parsers import (
    default_tool_call_id,
    get_tool_id_maker,
    get_tool_parser,
)

_TURNS = (
    "{%- if tools %}<|im_start|>system\n{% for t in tools %}{{ t.function.name }}\n{% endfor %}<|im_end|>\n"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'tool' %}<|im_start|>tool\n{TOOL}<|im_end|>\n"
    "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}"
    "{%- for tc in message.tool_calls or [] %}\n[call {{ tc.id }} {{ tc.function.name }}]{% endfor %}<|im_end|>\n"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MISTRAL_RULE = _TURNS.replace("{TOOL}", (
    "{%- if message.tool_call_id is not defined or message.tool_call_id|length != 9"
    " or not message.tool_call_id.isalnum() %}"
    "{{ raise_exception('Tool call IDs should be alphanumeric strings with length 9!') }}{% endif %}"
    "[TOOL_RESULTS]{{ message.content }} call_id={{ message.tool_call_id }}[/TOOL_RESULTS]"))
KIMI_RULE = _TURNS.replace("{TOOL}", "## Return of {{ message.tool_call_id }}\n{{ message.content }}")


@tool
def echo_text(text: str) -> str:
    """Echo the text back.

    Args:
        text: any text
    """
    return f"echo:{text}"


def _with_template(tokenizer, template: str):
    tok = copy.copy(tokenizer)  # the session fixture keeps its own template
    tok.chat_template = template
    return tok


def _episode(tokenizer, family: str, script: list[str]):
    from agentboost.agents.strands_agent import StrandsAgentSpec
    from agentboost.rollout.episode_runner import run_episode
    from agentboost.sampling.protocol import SamplingParams
    from agentboost.sampling.scripted import ScriptedSampler

    spec = StrandsAgentSpec(tools=[echo_text], system_prompt="Echo things.", tool_parser=family)
    renderer = ChatRenderer(tokenizer)
    assert renderer.supports_tools
    ep = asyncio.run(run_episode(spec, {"task_id": "t", "question": "Echo a and b."},
                                 ScriptedSampler(script, tokenizer), renderer, SamplingParams(max_new_tokens=300)))
    return ep, renderer


def _ids(ep) -> tuple[list[str], list[str]]:
    uses = [b["toolUse"]["toolUseId"] for m in ep.messages for b in m["content"] if "toolUse" in b]
    results = [b["toolResult"]["toolUseId"] for m in ep.messages for b in m["content"] if "toolResult" in b]
    return uses, results


def _check(ep, n_calls: int, n_tools: int):
    """The episode ran its calls, in one unsplit token sequence."""
    from agentboost.episodes.record import check_episode

    assert ep.status == "ok", ep.error
    assert [(t.name, t.ok) for t in ep.tool_calls] == [("echo_text", True)] * n_tools
    assert check_episode(ep) == [] and ep.num_splits == 0
    assert len(ep.calls) == n_calls


def test_mistral_episode_renders_its_second_prompt_with_9_alphanumeric_ids(qwen3_tokenizer):
    tok = _with_template(qwen3_tokenizer, MISTRAL_RULE)
    ep, renderer = _episode(tok, "mistral", [
        '[TOOL_CALLS]echo_text[ARGS]{"text": "a"}[TOOL_CALLS]echo_text[ARGS]{"text": "b"}', "Done."])
    _check(ep, n_calls=2, n_tools=2)
    assert tool_result_texts(ep) == ["echo:a", "echo:b"]
    uses, results = _ids(ep)
    assert len(uses) == 2 and len(set(uses)) == 2 and results == uses
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in uses)
    second = renderer.decode(ep.calls[1].prompt_ids)
    for u, text in zip(uses, ["echo:a", "echo:b"]):
        assert f"[TOOL_RESULTS]{text} call_id={u}[/TOOL_RESULTS]" in second


def test_mistral_v11_keeps_the_id_the_model_wrote(qwen3_tokenizer):
    tok = _with_template(qwen3_tokenizer, MISTRAL_RULE)
    ep, renderer = _episode(tok, "mistral", ['[TOOL_CALLS]echo_text[CALL_ID]a1B2c3D4e[ARGS]{"text": "a"}', "Done."])
    _check(ep, n_calls=2, n_tools=1)
    assert _ids(ep) == (["a1B2c3D4e"], ["a1B2c3D4e"])
    assert "call_id=a1B2c3D4e[/TOOL_RESULTS]" in renderer.decode(ep.calls[1].prompt_ids)


def test_the_mistral_stand_in_refuses_a_tool_result_without_a_9_character_id(qwen3_tokenizer):
    renderer = ChatRenderer(_with_template(qwen3_tokenizer, MISTRAL_RULE))
    for bad in ({"role": "tool", "content": "x"}, {"role": "tool", "content": "x", "tool_call_id": "call_123"},
                {"role": "tool", "content": "x", "tool_call_id": "abc-12345"}):
        with pytest.raises(Exception, match="length 9"):
            renderer.render([{"role": "user", "content": "hi"}, bad], None, add_generation_prompt=True)


def test_kimi_k2_episode_prints_the_ids_the_model_wrote(qwen3_tokenizer):
    tok = _with_template(qwen3_tokenizer, KIMI_RULE)
    call = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.echo_text:{i}<|tool_call_argument_begin|>'
            '{{"text": "{t}"}}<|tool_call_end|><|tool_calls_section_end|>')
    # the third turn repeats the id of the first: it gets a generated one, so ids stay unique
    ep, renderer = _episode(tok, "kimi_k2", [call.format(i=0, t="a"), call.format(i=1, t="b"),
                                             call.format(i=0, t="c"), "Done."])
    _check(ep, n_calls=4, n_tools=3)
    uses, results = _ids(ep)
    assert uses[:2] == ["functions.echo_text:0", "functions.echo_text:1"] and results == uses
    assert uses[2].startswith("call_") and len(set(uses)) == 3
    second = renderer.decode(ep.calls[1].prompt_ids)
    assert "## Return of functions.echo_text:0\necho:a<|im_end|>" in second
    last = renderer.decode(ep.calls[3].prompt_ids)
    assert f"## Return of {uses[2]}\necho:c<|im_end|>" in last


def test_parsers_read_the_ids_the_model_wrote():
    kimi = get_tool_parser("kimi_k2")(
        '<|tool_calls_section_begin|><|tool_call_begin|>functions.echo_text:3<|tool_call_argument_begin|>{}'
        '<|tool_call_end|><|tool_call_begin|>echo_text:4<|tool_call_argument_begin|>{}<|tool_call_end|>'
        '<|tool_calls_section_end|>')
    assert [c.id for c in kimi.tool_calls] == ["functions.echo_text:3", "echo_text:4"]
    mistral = get_tool_parser("mistral")
    assert [c.id for c in mistral('[TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{}').tool_calls] == ["abc123XYZ"]
    assert [c.id for c in mistral('[TOOL_CALLS]f[ARGS]{}').tool_calls] == [None]
    assert [c.id for c in mistral('[TOOL_CALLS][{"name": "f", "arguments": {}}]').tool_calls] == [None]
    assert [c.id for c in get_tool_parser("hermes")(
        '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>').tool_calls] == [None]


def test_id_makers():
    assert re.fullmatch(r"[A-Za-z0-9]{9}", get_tool_id_maker("mistral")())
    assert len({get_tool_id_maker("mistral")() for _ in range(50)}) == 50
    for family in ("hermes", "kimi_k2", "qwen3_xml", "glm45", "llama3_json"):
        assert get_tool_id_maker(family) is default_tool_call_id
    assert re.fullmatch(r"call_[0-9a-f]{24}", default_tool_call_id())


STRANDS = [
    {"role": "user", "content": [{"text": "Echo a."}]},
    {"role": "assistant", "content": [{"text": "Sure."},
                                      {"toolUse": {"toolUseId": "k2Jd8sQ0a", "name": "echo_text",
                                                   "input": {"text": "a"}}}]},
    {"role": "user", "content": [{"toolResult": {"toolUseId": "k2Jd8sQ0a", "status": "success",
                                                 "content": [{"text": "echo:a"}]}}]},
]


def test_a_turn_rendered_by_agentboost_carries_the_call_ids(qwen3_tokenizer):
    renderer = ChatRenderer(_with_template(qwen3_tokenizer, MISTRAL_RULE))
    hf, tools = renderer.to_hf_messages(STRANDS, "Echo things.", [echo_text.tool_spec])
    assert hf[2]["tool_calls"][0]["id"] == "k2Jd8sQ0a" and hf[3]["tool_call_id"] == "k2Jd8sQ0a"
    text = renderer.render(hf, tools, add_generation_prompt=True)
    assert "[call k2Jd8sQ0a echo_text]" in text and "call_id=k2Jd8sQ0a[/TOOL_RESULTS]" in text


@pytest.fixture(scope="module")
def smollm2_tokenizer(smollm2_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(smollm2_path))


def test_templates_that_ignore_ids_render_the_same(qwen3_tokenizer, smollm2_tokenizer):
    """Qwen3 (tools in the template) and SmolLM2 (Hermes injection) render byte for byte as
    without the ids."""
    for tok in (qwen3_tokenizer, smollm2_tokenizer):
        renderer = ChatRenderer(tok)
        hf, tools = renderer.to_hf_messages(STRANDS, "Echo things.", [echo_text.tool_spec])
        bare = copy.deepcopy(hf)
        for m in bare:
            m.pop("tool_call_id", None)
            for tc in m.get("tool_calls", []):
                tc.pop("id", None)
        assert bare != hf or not renderer.supports_tools
        assert renderer.render(hf, tools, True) == renderer.render(bare, tools, True)
