"""Tool-call parsers for the main model families (issue 35): each family's real format (as its chat
template writes it and its serving stack, vLLM, reads it), well-formed single and parallel calls,
malformed blocks that void the turn, calls drafted inside reasoning, text that only looks like a
call, format -> parse round trips (through the real tokenizers and the renderer where one is here),
the choice of parser from the chat template, and `agentboost rollout` running each format's calls."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import pytest
from helpers import cli, tool_result_texts
from strands import tool

from agentboost.agents.chat_rendering import ChatRenderer, format_tool_call, turn_key
from agentboost.agents.tool_parsers import (
    AUTO,
    detect_tool_parser,
    get_tool_formatter,
    get_tool_parser,
    parse_tool_calls,
    resolve_tool_parser,
)

FAMILIES = ["qwen3_xml", "llama3_json", "mistral", "glm45", "kimi_k2"]
CALC = {"name": "calculator", "description": "Evaluate an arithmetic expression.",
        "inputSchema": {"json": {"type": "object", "properties": {"expression": {"type": "string"}},
                                 "required": ["expression"]}}}
WEATHER = {"name": "get_weather", "description": "Weather in a city.",
           "inputSchema": {"json": {"type": "object", "properties": {
               "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
               "zip": {"type": "string"}, "ratio": {"type": "number"},
               "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
               "filters": {"type": "object"}, "hours": {"type": "array", "items": {"type": "integer"}}}}}}
TOOLS = [CALC, WEATHER]


def calls_of(out):
    return [(c.name, c.arguments) for c in out.tool_calls]


@dataclass
class Case:
    """One family's texts, written in its real format."""
    single: str  # content + one call
    single_text: str  # the visible text left
    parallel: str  # two or more calls in one turn (typed values: parsed with TOOLS)
    parallel_calls: list
    malformed: list  # (text, part of the reason)
    lookalikes: list  # texts that are no call and not malformed either
    variants: list = field(default_factory=list)  # (text, calls) other documented shapes


ONE = [("calculator", {"expression": "17 + 25"})]
TWO = [("get_weather", {"city": "Paris", "days": 3, "metric": True}), ("calculator", {"expression": "2 * 3"})]

CASES = {
    "qwen3_xml": Case(
        single="I'll compute that.\n<tool_call>\n<function=calculator>\n<parameter=expression>\n17 + 25\n"
               "</parameter>\n</function>\n</tool_call>",
        single_text="I'll compute that.",
        parallel="<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
                 "</parameter>\n<parameter=metric>\nTrue\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
                 "<function=calculator>\n<parameter=expression>\n2 * 3\n</parameter>\n</function>\n</tool_call>",
        parallel_calls=TWO,
        malformed=[
            ("<tool_call>\n<function=calculator>\n<parameter=expression>\n17 + 25", "unterminated <tool_call>"),
            ('<tool_call>\n{"name": "calculator", "arguments": {"expression": "1"}}\n</tool_call>',
             "expected one <function=NAME>"),
            ("<tool_call>\n<function=calculator>\n<parameter=expression>\n1 + 1\n</function>\n</tool_call>",
             "without </parameter>"),
            ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\nand\n<parameter=days>\n2\n"
             "</parameter>\n</function>\n</tool_call>", "unexpected text"),
            ("<tool_call>\n<function=calculator>\n</function>\n<function=calculator>\n</function>\n</tool_call>",
             "unexpected text"),
            ("<tool_call>\n<function=get weather>\n</function>\n</tool_call>", "invalid function name"),
            ("<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n<parameter=city>\nB\n"
             "</parameter>\n</function>\n</tool_call>", "given twice"),
        ],
        lookalikes=["Use <function=calculator> with a <parameter=expression> tag.",
                    # vLLM's qwen3_coder would run this bare function; the template never writes one
                    "<function=calculator>\n<parameter=expression>\n1 + 1\n</parameter>\n</function>",
                    "The tool_call tag holds a function= line.", "`</tool_call>` closes it."],
    ),
    "glm45": Case(
        single="Let me check.\n<tool_call>calculator\n<arg_key>expression</arg_key>\n<arg_value>17 + 25</arg_value>\n"
               "</tool_call>",
        single_text="Let me check.",
        parallel="<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n"
                 "<arg_value>3</arg_value>\n<arg_key>metric</arg_key>\n<arg_value>true</arg_value>\n</tool_call>\n"
                 "<tool_call>calculator\n<arg_key>expression</arg_key>\n<arg_value>2 * 3</arg_value>\n</tool_call>",
        parallel_calls=TWO,
        malformed=[
            ("<tool_call>calculator\n<arg_key>expression</arg_key>\n<arg_value>17", "unterminated <tool_call>"),
            ("<tool_call>\n<arg_key>expression</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
             "missing function name"),
            ("<tool_call>get_weather\n<arg_key>city</arg_key>\n</tool_call>", "without its <arg_value>"),
            ('<tool_call>{"name": "calculator", "arguments": {}}</tool_call>', "invalid function name"),
            ("<tool_call>get the weather\n</tool_call>", "invalid function name"),
            ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>A</arg_value>\nplease\n</tool_call>",
             "unexpected text"),
        ],
        lookalikes=["<arg_key>city</arg_key> and <arg_value>Paris</arg_value> are the tags.",
                    "A tool_call names the function first.", "get_weather\n<arg_value>Paris</arg_value>"],
        variants=[  # GLM-4.7 writes the same tags with no newlines; a call without arguments
            ("<tool_call>calculator<arg_key>expression</arg_key><arg_value>2 * 3</arg_value></tool_call>",
             [("calculator", {"expression": "2 * 3"})]),
            ("<tool_call>get_time\n</tool_call>", [("get_time", {})]),
        ],
    ),
    "kimi_k2": Case(
        single='I\'ll compute it. <|tool_calls_section_begin|><|tool_call_begin|>functions.calculator:0'
               '<|tool_call_argument_begin|>{"expression": "17 + 25"}<|tool_call_end|><|tool_calls_section_end|>',
        single_text="I'll compute it.",
        parallel='<|tool_calls_section_begin|> <|tool_call_begin|>\nfunctions.get_weather:0 '
                 '<|tool_call_argument_begin|> '
                 '{"city": "Paris", "days": 3, "metric": true} <|tool_call_end|><|tool_call_begin|>calculator:1'
                 '<|tool_call_argument_begin|>{"expression": "2 * 3"}<|tool_call_end|> <|tool_calls_section_end|>',
        parallel_calls=TWO,
        malformed=[
            ('<|tool_calls_section_begin|><|tool_call_begin|>functions.calculator:0<|tool_call_argument_begin|>'
             '{"expression": "1"}<|tool_call_end|>', "unterminated tool-calls section"),
            ('<|tool_calls_section_begin|><|tool_call_begin|>functions.calculator:0<|tool_call_argument_begin|>'
             '{"expression": "1"<|tool_call_end|><|tool_calls_section_end|>', "invalid JSON"),
            ('<|tool_calls_section_begin|><|tool_call_begin|>functions.calculator.0<|tool_call_argument_begin|>'
             '{"expression": "1"}<|tool_call_end|><|tool_calls_section_end|>', "not functions.NAME:INDEX"),
            ('<|tool_calls_section_begin|><|tool_call_begin|>functions.calculator:0{"expression": "1"}'
             '<|tool_call_end|><|tool_calls_section_end|>', "without <|tool_call_argument_begin|>"),
            ("<|tool_calls_section_begin|><|tool_calls_section_end|>", "empty tool-calls section"),
            ('<|tool_call_begin|>functions.calculator:0<|tool_call_argument_begin|>{"expression": "1"}'
             '<|tool_call_end|>',
             "outside"),
            ('<|tool_calls_section_begin|><|tool_call_begin|>functions.calculator:0<|tool_call_argument_begin|>'
             '["1"]<|tool_call_end|><|tool_calls_section_end|>', "must be a JSON object"),
        ],
        lookalikes=['Call functions.calculator:0 with {"expression": "1 + 1"}.',
                    "The tool_calls_section_begin token opens calls."],
    ),
    "mistral": Case(
        single='Sure.[TOOL_CALLS]calculator[ARGS]{"expression": "17 + 25"}',
        single_text="Sure.",
        parallel='[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3, "metric": true}'
                 '[TOOL_CALLS]calculator[ARGS]{"expression": "2 * 3"}',
        parallel_calls=TWO,
        malformed=[
            ('[TOOL_CALLS]calculator[ARGS]{"expression": "17', "invalid JSON"),
            ('[TOOL_CALLS]calculator{"expression": "1"}', "expected NAME[ARGS]"),
            ('[TOOL_CALLS]calculator[ARGS]{"expression": "1"} and then I will explain', "text after the tool call"),
            ("[TOOL_CALLS]", "expected NAME[ARGS]"),
            ('[TOOL_CALLS][{"arguments": {"expression": "1"}}]', "without a valid 'name'"),
            ('[TOOL_CALLS]calculator[ARGS]["1"]', "must be an object"),
        ],
        lookalikes=['[{"name": "calculator", "arguments": {"expression": "1"}}]',
                    'calculator[ARGS]{"expression": "1"}', "TOOL_CALLS come after the answer."],
        variants=[  # tokenizer v11 (a call id), and before v11 (a JSON array, with or without a space)
            ('[TOOL_CALLS]calculator[CALL_ID]a1B2c3D4e[ARGS]{"expression": "17 + 25"}', ONE),
            ('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "metric": true}}, '
             '{"name": "calculator", "arguments": {"expression": "2 * 3"}, "id": "a1B2c3D4e"}]', TWO),
            ('[TOOL_CALLS] [{"name": "calculator", "arguments": {"expression": "17 + 25"}}]', ONE),
        ],
    ),
    "llama3_json": Case(
        single='{"name": "calculator", "parameters": {"expression": "17 + 25"}}',
        single_text="",
        parallel='{"name": "get_weather", "parameters": {"city": "Paris", "days": 3, "metric": true}}; '
                 '{"name": "calculator", "parameters": {"expression": "2 * 3"}}',
        parallel_calls=TWO,
        malformed=[
            ('{"name": "calculator", "parameters": {"expression": "17', "invalid JSON"),
            ('<|python_tag|>brave_search.call(query="weather in Paris")', "built-in tool call"),
            ('{"parameters": {"expression": "1"}}', "missing or invalid 'name'"),
            ('{"name": "calculator", "parameters": {}, "arguments": {}}', "both"),
            ('{"name": "calculator", "parameters": {"expression": "1"}} I hope this helps.',
             "text after the tool call"),
            ('{"name": "calculator", "parameters": ["1"]}', "must be an object"),
        ],
        lookalikes=['The call would be {"name": "calculator", "parameters": {"expression": "1"}}.',
                    '{"answer": 42}', "name: calculator, parameters: none"],
        variants=[  # the python tag, and "arguments" for "parameters"
            ('<|python_tag|>{"name": "calculator", "parameters": {"expression": "17 + 25"}}', ONE),
            ('  {"name": "calculator", "arguments": {"expression": "17 + 25"}}', ONE),
        ],
    ),
}


@pytest.fixture(params=FAMILIES)
def family(request):
    return request.param


def parse(name, text, tools=TOOLS):
    return parse_tool_calls(get_tool_parser(name), text, tools)


# -- the formats ---------------------------------------------------------------------------------
def test_a_single_call_and_the_text_around_it(family):
    case = CASES[family]
    out = parse(family, case.single)
    assert calls_of(out) == ONE and out.malformed == [] and out.text == case.single_text
    assert out.tool_calls[0].raw  # what the model wrote for the call is kept


def test_parallel_calls_in_one_turn(family):
    out = parse(family, CASES[family].parallel)
    assert calls_of(out) == CASES[family].parallel_calls and out.malformed == []


def test_the_other_documented_shapes(family):
    for text, calls in CASES[family].variants:
        out = parse(family, text)
        assert (calls_of(out), out.malformed) == (calls, []), text


@pytest.mark.parametrize("name, index", [(f, i) for f in FAMILIES for i in range(len(CASES[f].malformed))])
def test_a_malformed_block_is_never_repaired(name, index):
    text, reason = CASES[name].malformed[index]
    out = parse(name, text)
    assert out.tool_calls == [] and out.text == text  # the text stays exactly as written
    assert len(out.malformed) == 1 and reason in out.malformed[0], out.malformed


def test_one_malformed_block_voids_every_call_of_the_turn(family):
    case = CASES[family]
    bad = case.malformed[0][0]
    text = case.parallel + ("\n" if family != "llama3_json" else "; ") + bad
    if family == "mistral":  # mistral's calls run to the end of the turn: the bad one is a later [TOOL_CALLS]
        text = case.parallel + bad
    out = parse(family, text)
    assert out.tool_calls == [] and out.malformed and out.text == text


def test_text_that_only_looks_like_a_call(family):
    for text in CASES[family].lookalikes:
        out = parse(family, text)
        assert (out.tool_calls, out.malformed, out.text) == ([], [], text), text


def test_plain_text_is_untouched(family):
    out = parse(family, "  The answer is 42.  ")
    assert (out.tool_calls, out.malformed, out.text) == ([], [], "  The answer is 42.  ")


# -- argument values by the tool's schema ------------------------------------------------------------
@pytest.mark.parametrize("name", ["qwen3_xml", "glm45"])
def test_bare_text_values_are_typed_by_the_tool_schema(name):
    args = {"city": "Paris", "days": 3, "metric": False, "zip": "02139", "ratio": 0.5, "note": None,
            "filters": {"tags": ["a", "b"], "max": 3}, "hours": [9, 12]}
    text = get_tool_formatter(name)([("get_weather", args)])
    assert calls_of(parse(name, text)) == [("get_weather", args)]
    # the same text with an OpenAI function schema, as a template's tools= would carry it
    openai = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER["inputSchema"]["json"]}}]
    assert calls_of(parse(name, text, openai)) == [("get_weather", args)]
    # a numeric-looking string stays a string where the schema says so
    zip_only = get_tool_formatter(name)([("get_weather", {"zip": "12345"})])
    assert calls_of(parse(name, zip_only)) == [("get_weather", {"zip": "12345"})]


def test_without_a_schema_each_family_reads_values_as_its_serving_stack_does():
    xml = get_tool_formatter("qwen3_xml")([("f", {"n": 3, "s": "12345", "b": True, "o": {"k": 1}, "z": None})])
    # vLLM's qwen3_coder: a parameter without a schema is text; null is None
    assert calls_of(parse("qwen3_xml", xml, None)) == [("f", {"n": "3", "s": "12345", "b": "true",
                                                              "o": '{"k": 1}', "z": None})]
    glm = get_tool_formatter("glm45")([("f", {"n": 3, "s": "12345", "t": "two words", "o": {"k": 1}, "z": None})])
    # vLLM's glm45: JSON where it is JSON, text otherwise
    assert calls_of(parse("glm45", glm, None)) == [("f", {"n": 3, "s": 12345, "t": "two words",
                                                          "o": {"k": 1}, "z": None})]
    # a value that does not fit its declared type stays as written, for the tool to reject
    bad = "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>"
    assert calls_of(parse("qwen3_xml", bad)) == [("get_weather", {"days": "three"})]


# -- round trips --------------------------------------------------------------------------------
ROUND_TRIP_CALLS = [
    ONE,
    [("get_weather", {"city": "São Paulo \"centro\"", "days": 2, "metric": True, "ratio": 1.25, "note": None,
                      "filters": {"tags": ["a", "b"], "nested": {"x": [1, 2]}}, "hours": [6, 18]}),
     ("calculator", {"expression": "(1 + 2) * 3"}), ("get_weather", {})],
    [("calculator", {"expression": "line one\nline two"})],
]


@pytest.mark.parametrize("calls", ROUND_TRIP_CALLS, ids=["single", "parallel", "multiline"])
def test_format_then_parse_gives_the_same_calls(family, calls):
    text = get_tool_formatter(family)(calls)
    out = parse(family, text)
    assert (calls_of(out), out.malformed) == (calls, [])
    if family != "llama3_json":  # its calls are the whole turn
        out = parse(family, "Let me work it out.\n" + text)
        assert calls_of(out) == calls and out.text == "Let me work it out."


def test_format_tool_call_dispatches_by_parser_name(family):
    assert format_tool_call("calculator", {"expression": "1"}, family) == get_tool_formatter(family)(
        [("calculator", {"expression": "1"})])
    # hermes stays the default, byte for byte as before
    assert format_tool_call("calculator", {"expression": "é"}) == (
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "é"}}\n</tool_call>')


@pytest.fixture(scope="module")
def smollm2_tokenizer(smollm2_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(smollm2_path))


@pytest.mark.parametrize("tok_name", ["qwen3_tokenizer", "smollm2_tokenizer"])
def test_an_assistant_turn_rendered_by_the_renderer_parses_back(family, tok_name, request):
    """The calls as the model writes them, through the real tokenizer (tokens and back) and the
    renderer (the sampled turn in the next prompt): the same calls come back out."""
    tok = request.getfixturevalue(tok_name)
    calls = ROUND_TRIP_CALLS[1]
    text = get_tool_formatter(family)(calls)
    ids = list(tok(text, add_special_tokens=False)["input_ids"])
    assert tok.decode(ids, skip_special_tokens=False) == text
    r = ChatRenderer(tok)
    tool_ids = [f"call_{i}" for i in range(len(calls))]
    messages = [{"role": "user", "content": [{"text": "Weather and arithmetic, please."}]},
                {"role": "assistant", "content": [{"toolUse": {"toolUseId": i, "name": n, "input": a}}
                                                  for i, (n, a) in zip(tool_ids, calls)]},
                {"role": "user", "content": [{"toolResult": {"toolUseId": i, "content": [{"text": "ok"}]}}
                                             for i in tool_ids]}]
    hf, tools = r.to_hf_messages(messages, "You are helpful.", TOOLS, sampled={turn_key("", tool_ids): text})
    rendered = r.render(hf, tools, add_generation_prompt=True)
    assert text in rendered  # the sampled turn is shown as it was sampled
    assert calls_of(parse(family, r.decode(r.encode(text)))) == calls


def test_hermes_calls_rendered_by_the_qwen3_template_itself_parse_back(qwen3_tokenizer):
    r = ChatRenderer(qwen3_tokenizer)
    calls = ROUND_TRIP_CALLS[1][:2]
    blocks = [{"toolUse": {"toolUseId": f"c{i}", "name": n, "input": a}} for i, (n, a) in enumerate(calls)]
    messages = [{"role": "user", "content": [{"text": "hi"}]}, {"role": "assistant", "content": blocks}]
    hf, tools = r.to_hf_messages(messages, None, TOOLS)
    rendered = r.render(hf, tools, add_generation_prompt=False)
    turn = rendered.rsplit("<|im_start|>assistant\n", 1)[1].split("<|im_end|>")[0]
    name = resolve_tool_parser(AUTO, qwen3_tokenizer.chat_template, r.supports_tools)
    assert name == "hermes" and calls_of(parse(name, turn)) == calls


# -- calls inside reasoning ----------------------------------------------------------------------
def test_calls_drafted_inside_reasoning_are_not_calls_of_the_turn(family):
    from agentboost import reasoning

    fmt = get_tool_formatter(family)
    draft = fmt([("calculator", {"expression": "1 + 1"})])
    split = reasoning.split_reasoning("<think>\n" + draft + "\n</think>\n\n" + fmt(ONE))
    assert calls_of(parse(family, split.content)) == ONE
    assert calls_of(parse(family, split.reasoning)) == [("calculator", {"expression": "1 + 1"})]
    # a turn that only drafts a call in its reasoning and then answers calls nothing
    split = reasoning.split_reasoning("<think>\n" + draft + "\n</think>\n\nIt is 2.")
    out = parse(family, split.content)
    assert (out.tool_calls, out.malformed, out.text) == ([], [], "It is 2.")


@tool
def echo_text(text: str) -> str:
    """Return the text.

    Args:
        text: any text
    """
    return f"echo:{text}"


def test_an_episode_runs_each_format_with_its_schema(family, qwen3_tokenizer):
    """Through the trainable model and a real Strands agent: the call runs, the one drafted in the
    reasoning does not, and the tool's schema reaches the parser ("12345" stays text for a str)."""
    from agentboost.agents.strands_agent import StrandsAgentSpec
    from agentboost.episodes.record import check_episode
    from agentboost.rollout.episode_runner import run_episode
    from agentboost.sampling.protocol import SamplingParams
    from agentboost.sampling.scripted import ScriptedSampler

    fmt = get_tool_formatter(family)
    first = ("<think>\n" + fmt([("echo_text", {"text": "draft"})]) + "\n</think>\n\n"
             + fmt([("echo_text", {"text": "12345"})]))
    spec = StrandsAgentSpec(tools=[echo_text], system_prompt="Echo things.", tool_parser=family)
    sampler = ScriptedSampler([first, "Done."], qwen3_tokenizer)
    ep = asyncio.run(run_episode(spec, {"task_id": "t", "question": "Echo 12345."}, sampler,
                                 ChatRenderer(qwen3_tokenizer), SamplingParams(max_new_tokens=300)))
    assert ep.status == "ok", ep.error
    assert [(t.name, t.ok) for t in ep.tool_calls] == [("echo_text", True)]
    assert tool_result_texts(ep) == ["echo:12345"]
    assert ep.malformed_tool_calls == 0 and check_episode(ep) == []
    assert ep.calls_in_reasoning == 1


# -- choosing the parser from the chat template ------------------------------------------------------
# Stand-ins written here (not the published templates): each shows its family's markers where the
# family's real template has them.
TEMPLATE_STANDINS = {
    "qwen3_xml": "{%- for t in tools %}<function>{{ t.function.name }}</function>{% endfor %}<tool_call>\n"
                 "<function={{ name }}>\n<parameter={{ key }}>\n{{ value }}\n</parameter>\n</function>\n</tool_call>",
    "glm45": "<tool_call>{{ tc.name }}\n<arg_key>{{ k }}</arg_key>\n<arg_value>{{ v }}</arg_value>\n</tool_call>",
    "kimi_k2": "<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>"
               "<|tool_calls_section_begin|><|tool_call_begin|>{{ id }}<|tool_call_argument_begin|>",
    "mistral": "[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS][INST]{{ m }}[/INST][TOOL_CALLS][",
    "llama3_json": "<|start_header_id|>assistant<|end_header_id|>\n\n{{- '{\"name\": \"' + tc.name + '\", ' }}"
                   "{{- '\"parameters\": ' }}{{ tc.arguments | tojson }}<|eot_id|>",
}


def test_the_family_is_read_from_the_chat_template(family):
    assert detect_tool_parser(TEMPLATE_STANDINS[family]) == family
    assert resolve_tool_parser(AUTO, TEMPLATE_STANDINS[family]) == family
    assert resolve_tool_parser(AUTO, {"default": "x", "tool_use": TEMPLATE_STANDINS[family]}) == family
    # a template that renders no tools gets them in Hermes format in the system prompt: hermes
    assert resolve_tool_parser(AUTO, TEMPLATE_STANDINS[family], supports_tools=False) == "hermes"


def test_kimi_k2_without_the_call_tokens_in_its_template_is_still_recognised():
    assert detect_tool_parser("<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>") == "kimi_k2"


def test_auto_keeps_hermes_for_the_models_here(qwen3_tokenizer, smollm2_tokenizer):
    # Qwen3 (tools in its template, <tool_call> JSON) and SmolLM2 (no tools: the Hermes prompt)
    assert detect_tool_parser(qwen3_tokenizer.chat_template) is None
    assert resolve_tool_parser(AUTO, qwen3_tokenizer.chat_template,
                               ChatRenderer(qwen3_tokenizer).supports_tools) == "hermes"
    assert resolve_tool_parser(AUTO, smollm2_tokenizer.chat_template,
                               ChatRenderer(smollm2_tokenizer).supports_tools) == "hermes"
    assert resolve_tool_parser(AUTO, None) == "hermes"


def test_a_named_parser_is_taken_as_named_and_an_unknown_one_is_an_error():
    assert resolve_tool_parser("mistral", TEMPLATE_STANDINS["glm45"]) == "mistral"
    with pytest.raises(KeyError, match="unknown tool-call parser 'nope'.*kimi_k2"):
        resolve_tool_parser("nope")
    from agentboost.agents.strands_agent import AgentSpecError, StrandsAgentSpec

    assert StrandsAgentSpec().tool_parser == AUTO
    with pytest.raises(AgentSpecError, match="agent: tool_parser must be one of auto, .*kimi_k2.*; got 'nope'"):
        StrandsAgentSpec(tool_parser="nope").validate()


def test_the_config_takes_a_tool_parser(tmp_path):
    from agentboost.run.assembly import agent_spec
    from agentboost.run.config import ConfigError, load_config

    assert agent_spec(load_config(None, ["agent.tool_parser=glm45"], for_training=False)).tool_parser == "glm45"
    assert load_config(None, [], for_training=False).agent.tool_parser == AUTO
    with pytest.raises(ConfigError, match="agent.tool_parser must be one of auto, .*qwen3_xml"):
        load_config(None, ["agent.tool_parser=qwen3xml"], for_training=False)


# -- `agentboost rollout` with a scripted policy in each format -------------------------------------
MARKERS = {"qwen3_xml": "<function=calculator>", "llama3_json": '{"name": "calculator", "parameters"',
           "mistral": "[TOOL_CALLS]calculator[ARGS]", "glm45": "<tool_call>calculator\n<arg_key>",
           "kimi_k2": "<|tool_call_begin|>functions.calculator:0"}


def test_rollout_runs_a_scripted_policy_in_each_format(family, tmp_path, smollm2_tokenizer):
    """`rollout --demonstrations --tool-parser F`: the demonstration policy writes its call in F's
    format, the agent's parser F reads it, and the real calculator runs."""
    from agentboost.episodes.record import Episode, check_episode

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({
        "task_id": "t-1", "question": "What is 37 * 412 - 95?", "answer": "15149",
        "solution": {"calls": [{"name": "calculator", "arguments": {"expression": "37 * 412 - 95"}}],
                     "answer": "The answer is 15149."}}) + "\n")
    out = tmp_path / "episodes.jsonl"
    r = cli("rollout", "--demonstrations", "--tasks", tasks, "--out", out, "--tool-parser", family,
            "--reward", "exact_answer", "--max-model-calls", "3", "--max-new-tokens", "128")
    assert r.returncode == 0, r.stderr[-3000:]
    (ep,) = [Episode.from_dict(json.loads(line)) for line in out.read_text().splitlines()]
    assert ep.status == "ok" and ep.reward == 1.0, (ep.status, ep.error)
    assert [(t.name, t.ok) for t in ep.tool_calls] == [("calculator", True)]
    assert tool_result_texts(ep) == ["15149"] and ep.malformed_tool_calls == 0
    assert MARKERS[family] in smollm2_tokenizer.decode(ep.calls[0].response_ids)
    assert check_episode(ep) == []


def test_rollout_refuses_an_unknown_tool_parser(tmp_path):
    r = cli("rollout", "--prompt", "2 + 2?", "--tool-parser", "nope", "--out", tmp_path / "e.jsonl")
    assert r.returncode == 2 and "tool_parser must be one of auto, " in r.stderr and "got 'nope'" in r.stderr
    assert "Traceback" not in r.stderr
