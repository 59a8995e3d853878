import pytest

from agentboost.agents.tool_parsers import get_tool_parser, parse_hermes


def test_several_calls_in_one_turn():
    text = ('Let me compute.\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
            '<tool_call>{"name": "mul", "arguments": {"a": 3, "b": 4}}</tool_call>')
    out = parse_hermes(text)
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("add", {"a": 1, "b": 2}), ("mul", {"a": 3, "b": 4})]
    assert out.text == "Let me compute."
    assert out.malformed == []


def test_plain_text_is_untouched():
    out = parse_hermes("  The answer is 42.  ")
    assert out.tool_calls == [] and out.malformed == [] and out.text == "  The answer is 42.  "


@pytest.mark.parametrize("body, reason", [
    ('{"name": "add", "arguments": {"a": 1,}}', "invalid JSON"),
    ('["add"]', "expected a JSON object"),
    ('{"arguments": {}}', "name"),
    ('{"name": "add", "arguments": [1, 2]}', "must be an object"),
])
def test_malformed_call_is_never_repaired(body, reason):
    text = f"Sure.<tool_call>{body}</tool_call>"
    out = parse_hermes(text)
    assert out.tool_calls == []
    assert out.text == text  # the text stays exactly as written
    assert len(out.malformed) == 1 and reason in out.malformed[0]


def test_one_malformed_block_makes_the_turn_a_plain_answer():
    text = ('<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'
            '<tool_call>{"name": oops}</tool_call>')
    out = parse_hermes(text)
    assert out.tool_calls == [] and out.text == text and len(out.malformed) == 1


def test_unterminated_block_counts_as_malformed():
    out = parse_hermes('<tool_call>\n{"name": "add", "argu')
    assert out.tool_calls == [] and out.malformed == ["unterminated <tool_call> block"]


def test_registry_names_known_parsers():
    assert get_tool_parser("hermes") is parse_hermes
    with pytest.raises(KeyError, match="hermes"):
        get_tool_parser("nope")


def test_every_family_is_registered_with_a_formatter():
    from agentboost.agents.tool_parsers import (
        get_tool_formatter,
        registered_tool_parsers,
    )

    names = {"hermes", "qwen3_xml", "llama3_json", "mistral", "glm45", "kimi_k2"}
    assert names <= set(registered_tool_parsers())
    for name in names:
        out = get_tool_parser(name)(get_tool_formatter(name)([("add", {"a": 1})]))
        assert [(c.name, c.arguments) for c in out.tool_calls] in ([("add", {"a": 1})], [("add", {"a": "1"})])


def test_registration_rules():
    from agentboost.agents.tool_parsers import (
        ToolParserRegistrationError,
        register_tool_parser,
    )

    with pytest.raises(ToolParserRegistrationError, match="'auto' is the setting"):
        register_tool_parser("auto", parse_hermes)
    register_tool_parser("hermes", parse_hermes)  # the same parser again is harmless
    with pytest.raises(ToolParserRegistrationError, match="'glm45' is already registered"):
        register_tool_parser("glm45", parse_hermes)


def test_tool_specs_reach_only_parsers_that_take_them():
    from agentboost.agents.tool_parsers import parse_tool_calls

    seen = []

    def one_argument(text):  # a parser written before parsers took tools
        seen.append(text)
        return parse_hermes(text)

    out = parse_tool_calls(one_argument, '<tool_call>{"name": "add", "arguments": {}}</tool_call>', [{"name": "add"}])
    assert [c.name for c in out.tool_calls] == ["add"] and len(seen) == 1
