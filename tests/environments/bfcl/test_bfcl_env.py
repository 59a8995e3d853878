"""BFCL as an environment: task rows (`data prepare bfcl`), the entry's functions as Strands tools,
BFCL's protocol as a conversation (a real Strands agent and the trainable model over a scripted
policy, the Qwen3 template), one isolated set of API instances per episode, scored by BFCL's
checkers from the stored messages."""

import asyncio
import json

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by setup.sh")

from helpers import cli, qwen_call  # noqa: E402

from agentboost.environments.bfcl import package, scoring  # noqa: E402
from agentboost.environments.bfcl.tasks import task_row  # noqa: E402

BFCL_ENV = dict(reward="agentboost.environments.bfcl.scoring:bfcl_reward",
                conversation="agentboost.environments.bfcl.conversation:bfcl_conversation")


def _episode(tokenizer, row, script, **spec_options):
    from agentboost.agents.chat_rendering import ChatRenderer
    from agentboost.rollout.episode_runner import run_episode
    from agentboost.agents.strands_agent import StrandsAgentSpec
    from agentboost.environments.strands_env import StrandsEnv
    from agentboost.sampling.protocol import SamplingParams
    from agentboost.sampling.scripted import ScriptedSampler

    spec = StrandsAgentSpec(tools=[], system_prompt="", max_model_calls=spec_options.pop("max_model_calls", 40),
                            max_response_tokens=8000, **spec_options)
    return asyncio.run(run_episode(spec, row, ScriptedSampler(script, tokenizer), ChatRenderer(tokenizer),
                                   SamplingParams(temperature=1.0, max_new_tokens=400), env=StrandsEnv(**BFCL_ENV)))


def _gt_script(bfcl_id):
    """The ground truth as a model would answer: each turn's calls one step at a time, then text."""
    import ast

    turns = []
    for turn in package.ground_truth(bfcl_id):
        steps = []
        for text in turn:
            call = ast.parse(text, mode="eval").body
            assert not call.args, text  # the entries used here call with keywords only
            steps.append(qwen_call(call.func.id, {k.arg: ast.literal_eval(k.value) for k in call.keywords}))
        turns.append(steps + ["Done."])
    return turns


def test_data_prepare_bfcl_writes_rows_and_a_split(tmp_path):
    r = cli("data", "prepare", "bfcl", "--category", "multi_turn_base", "--out", str(tmp_path / "mt"),
            "--test-fraction", "0.25", "--limit", "8")
    assert r.returncode == 0, r.stderr
    train = [json.loads(x) for x in (tmp_path / "mt" / "train.jsonl").read_text().splitlines()]
    test = [json.loads(x) for x in (tmp_path / "mt" / "test.jsonl").read_text().splitlines()]
    assert len(train) == 6 and len(test) == 2 and not {r["task_id"] for r in train} & {r["task_id"] for r in test}
    row = train[0]
    assert row["bfcl_id"].startswith("multi_turn_base_") and row["data_digest"] == package.digest(row["bfcl_id"])
    assert row["involved_classes"] and row["question"]
    r = cli("data", "prepare", "bfcl", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "needs --category" in r.stderr and "Traceback" not in r.stderr


def test_multi_turn_gold_conversation_scores_1_and_a_wrong_one_0(qwen3_tokenizer):
    """multi_turn_base_1 (file system): the gold calls through the Strands tools, turn by turn, get
    BFCL's real results (the model sees them) and BFCL's checker accepts the episode; leaving the
    last turn's second call out fails the state check."""
    row = task_row("multi_turn_base_1")
    turns = _gt_script(row["bfcl_id"])
    ep = _episode(qwen3_tokenizer, row, [s for t in turns for s in t])
    assert ep.status.value == "ok", ep.error
    conv = ep.metadata["conversation"]
    assert conv["kind"] == "bfcl" and conv["turns"] == conv["turns_total"] == len(turns) and conv["termination"] == "done"
    assert ep.reward == 1.0 and ep.reward_metadata["valid"] is True, ep.reward_metadata
    results = [b["toolResult"]["content"][0]["text"] for m in ep.messages for b in m["content"] if "toolResult" in b]
    e = package.entry(row["bfcl_id"])  # what BFCL's own executor answers the first call, ls(a=True)
    expected, _ = package.bfcl().multi_turn_utils.execute_multi_turn_func_call(
        ["ls(a=True)"], e["initial_config"], e["involved_classes"], "agentboost_test_oracle", e["id"])
    assert results[0] == expected[0] == '{"current_directory_content": ["workspace"]}'
    bad = [list(t) for t in turns]
    bad[1] = [bad[1][0], "Done."]  # cd without the mv
    ep2 = _episode(qwen3_tokenizer, row, [s for t in bad for s in t])
    assert ep2.reward == 0.0 and ep2.reward_metadata["error_type"].startswith("multi_turn:"), ep2.reward_metadata


def test_each_episode_has_its_own_api_instances(qwen3_tokenizer):
    """Two episodes of one task in one process: the second starts from the initial state, not from
    what the first left (a directory the first made is not there for the second)."""
    row = task_row("multi_turn_base_2")  # cd documents, touch TeamNotes.txt, ...
    script = [qwen_call("cd", {"folder": "documents"}), qwen_call("touch", {"file_name": "TeamNotes.txt"}), "ok"]
    first = _episode(qwen3_tokenizer, row, script + ["x"] * 20)
    second = _episode(qwen3_tokenizer, row, [qwen_call("cd", {"folder": "documents"}), qwen_call("ls", {}), "ok"]
                      + ["x"] * 20)
    results = [b["toolResult"]["content"][0]["text"] for m in second.messages for b in m["content"] if "toolResult" in b]
    assert "TeamNotes.txt" not in results[1], results
    firsts = [b["toolResult"]["content"][0]["text"] for m in first.messages for b in m["content"] if "toolResult" in b]
    assert "Error" not in firsts[1], firsts


def test_step_limit_force_quits_like_bfcl(qwen3_tokenizer):
    """More than BFCL's 20 tool-calling steps in a turn: the episode force-quits after that turn and
    BFCL's checker fails it (fewer turns than the entry)."""
    row = task_row("multi_turn_base_1")
    ep = _episode(qwen3_tokenizer, row, [qwen_call("pwd", {})] * 30, max_model_calls=60)
    conv = ep.metadata["conversation"]
    assert conv["termination"] == "force_quit" and conv["turns"] == 1
    calls = sum(1 for m in ep.messages if m["role"] == "assistant")
    assert calls == 21
    assert ep.reward == 0.0 and ep.reward_metadata["error_type"] == "multi_turn:force_terminated"


def test_single_call_episode_is_one_response_scored_by_the_ast_checker(qwen3_tokenizer):
    row = task_row("simple_python_1")  # math.factorial(number=5): offered as math_factorial
    ep = _episode(qwen3_tokenizer, row, [qwen_call("math_factorial", {"number": 5}), "never sampled"])
    assert ep.status.value == "ok", ep.error
    assert ep.metadata["conversation"]["termination"] == "answered"
    assert sum(1 for m in ep.messages if m["role"] == "assistant") == 1
    assert ep.reward == 1.0, ep.reward_metadata
    wrong = _episode(qwen3_tokenizer, row, [qwen_call("math_factorial", {"number": 6})])
    assert wrong.reward == 0.0 and wrong.reward_metadata["error_type"] == "value_error:others", wrong.reward_metadata
    text = _episode(qwen3_tokenizer, row, ["The factorial of 5 is 120."])
    assert text.reward == 0.0 and text.reward_metadata["error_type"] == "ast_decoder:decoder_failed"


def test_irrelevance_rewards_calling_nothing(qwen3_tokenizer):
    row = task_row("irrelevance_0")
    assert _episode(qwen3_tokenizer, row, ["I cannot do that with these functions."]).reward == 1.0
    name = scoring.tool_name(package.entry("irrelevance_0")["function"][0]["name"])
    assert _episode(qwen3_tokenizer, row, [qwen_call(name, {})]).reward == 0.0


def test_a_row_from_other_bfcl_data_is_refused():
    row = {**task_row("simple_python_1"), "data_digest": "0" * 64}
    with pytest.raises(package.BfclError, match="other BFCL data"):
        scoring.score_messages(row, [])


def test_model_written_names_are_never_evaluated(tmp_path):
    """BFCL's checker ``eval``s call strings: a call to a Python builtin by name (``open``), or with
    an argument name that is code, never reaches it (BFCL itself would create these files)."""
    bfcl_id = "multi_turn_base_1"
    by_name, by_key = tmp_path / "by_name", tmp_path / "by_key"
    turns = [[[("open", {"file": str(by_name), "mode": "w"})],
              [("ls", {f"a=open({str(by_key)!r}, 'w'),b": 1})]]]
    turns += [[] for _ in package.ground_truth(bfcl_id)[1:]]
    v = scoring.score_multi_turn(bfcl_id, turns)
    assert v["valid"] is False and v["error_type"] == "multi_turn:empty_turn_model_response"
    assert not by_name.exists() and not by_key.exists()
