"""``agentboost serve --prompt-policy``: every chat request is served with the prompt artifact (its
instructions after the client's system prompt, its demonstration turns before the client's
messages), so a stock client gets the trained prompt. What the model sees is checked on a scripted
sampler (the real router, gateway translation, Strands client, calculator and sockets); the
command's input errors come before any model loads."""

import asyncio

import pytest
import yaml
from helpers import REPO

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.cli import main
from agentboost.run.prompt_policy import Demonstration, PromptPolicy
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedSampler
from agentboost.serving.policies import ServedPolicy
from agentboost.serving.router import Router, ServeInputError

DEMO_Q = "Ana has 2 books and gets 6 more. How many books does Ana have now?"


def _policy():
    demo = Demonstration(task_id="train-1", source="solution", reward=1.0, messages=[
        {"role": "user", "content": [{"text": DEMO_Q}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "d1", "name": "calculator",
                                                       "input": {"expression": "2 + 6"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "d1", "status": "success",
                                                     "content": [{"text": "8"}]}}]},
        {"role": "assistant", "content": [{"text": "The answer is 8."}]}])
    return PromptPolicy(system_prompt="You have a calculator.", instructions=["Check the tool's result."],
                        demonstrations=[demo], version=2)


def test_served_requests_get_the_instructions_and_demonstrations(tmp_path, smollm2_path):
    from strands import Agent
    from strands.models.openai import OpenAIModel
    from transformers import AutoTokenizer

    from agentboost.tools.calculator import calculator

    tok = AutoTokenizer.from_pretrained(str(smollm2_path))
    call = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "7 + 5"}}\n</tool_call>'
    # a first turn calls the calculator, a turn after its result answers: as the demonstration does
    sampler = ScriptedSampler(lambda ids, i: "The answer is 12." if tok.decode(ids).count("<tool_response>") > 1
                              else call, tok)
    served = ServedPolicy(name="policy", spec="scripted", description="scripted", engine="scripted", sampler=sampler,
                          renderer=ChatRenderer(tok), sampling=SamplingParams(temperature=0.0, max_new_tokens=64),
                          env=None)
    question = "Jun has 7 pencils and gets 5 more. How many pencils does Jun have now?"
    with pytest.raises(ServeInputError, match=r"arm\(s\) \['experiment'\], which this server does not serve"):
        Router({"policy": served}, prompt_policies={"experiment": _policy()})
    with Router({"policy": served}, out_dir=tmp_path, prompt_policies={"policy": _policy()}) as router:
        async def ask(system_prompt):
            model = OpenAIModel(client_args={"base_url": router.url + "/v1", "api_key": "x", "max_retries": 0},
                                model_id="agentboost")
            agent = Agent(model=model, tools=[calculator], system_prompt=system_prompt, callback_handler=None)
            return str(await agent.invoke_async(question)).strip(), agent.messages

        own_answer, own_messages = asyncio.run(ask("You are the shop's helper."))
        first = len(sampler.prompts)
        base_answer, _ = asyncio.run(ask(None))
    assert own_answer == base_answer == "The answer is 12."
    assert len(sampler.prompts) == first * 2 == 4  # the tool round and the answer, per client
    # the client's own conversation is what it sent and got: the demonstration is the server's
    assert own_messages[0]["content"][0]["text"] == question and len(own_messages) == 4
    for prompts, system in ((sampler.prompts[:2], "You are the shop's helper.\nCheck the tool's result."),
                            (sampler.prompts[2:], "You have a calculator.\nCheck the tool's result.")):
        for ids in prompts:
            text = tok.decode(ids)
            assert text.startswith(f"<|im_start|>system\n{system}\n\n") and text.count("<|im_start|>system") == 1
            # the demonstration's four turns, then the client's question
            demo = (f"<|im_start|>user\n{DEMO_Q}<|im_end|>\n<|im_start|>assistant\n<tool_call>\n"
                    '{"name": "calculator", "arguments": {"expression": "2 + 6"}}\n</tool_call><|im_end|>\n'
                    "<|im_start|>user\n<tool_response>\n8\n</tool_response><|im_end|>\n"
                    "<|im_start|>assistant\nThe answer is 8.<|im_end|>\n")
            assert demo in text and text.index(demo) < text.index(question)
        assert "<tool_response>\n12\n</tool_response>" in tok.decode(prompts[1])  # the client's own tool round
    # a session's record (what feedback scores) holds the client's turns, not the demonstration
    session = next(iter(router._sessions.values()))
    assert session.last_messages[0]["content"][0]["text"] == question


def test_serve_prompt_policy_input_errors(tmp_path, capsys):
    assert main(["serve", "smollm2-135m-instruct", "--prompt-policy", str(tmp_path / "nothing"),
                 "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "prompt policy" in err and "no such file" in err
    _policy().save(tmp_path / "p.json")
    assert main(["serve", "--model", "smollm2-135m-instruct", "--prompt-policy", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--prompt-policy goes into chat turns" in err
    # a prompt run whose policy was a chat model we do not serve: no model to default to
    run = tmp_path / "run"
    run.mkdir()
    _policy().save(run / "prompt_policy.json")
    (run / "config.yaml").write_text(yaml.safe_dump({
        "data": {"train_file": str(REPO / "examples/quickstart/data/train.jsonl")}, "algorithm": {"policy": "prompt"},
        "prompt": {"policy_model": {"provider": "openai", "model_id": "hosted-x"}}}))
    assert main(["serve", "--prompt-policy", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "hosted-x" in err and "name the model to serve" in err
