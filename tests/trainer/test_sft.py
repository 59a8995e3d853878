"""`agentboost sft`: supervised fine-tuning on episodes' sampled tokens, on the real SmolLM2."""

import json

import pytest
import torch
from helpers import chat_prompt_ids, cli

from agentboost.models.loading import load_policy
from agentboost.trainer import batch as batching
from agentboost.trainer import loss as losses
from agentboost.trainer.sft import SFTConfig, load_sft_rows, run_sft

ANSWER = "Ana has 7 + 7 = 14 apples. The answer is 14."


def episode_line(tok, question, answer, episode_id):
    prompt = chat_prompt_ids(tok, question)
    response = list(tok(answer + "<|im_end|>", add_special_tokens=False)["input_ids"])
    return json.dumps({"episode_id": episode_id, "segments": [
        {"input_ids": prompt + response, "loss_mask": [0] * len(prompt) + [1] * len(response)}]})


def answer_logprob(model, rows):
    with torch.no_grad():
        batch = batching.pad_batch(rows, 0, min_shared_prefix=0)
        logp = losses.token_logprobs(model, batch, temperature=1.0)
    return float((logp * batch["response_mask"]).sum())


@pytest.mark.slow
def test_sft_raises_the_likelihood_of_the_episodes_and_writes_a_loadable_model(tmp_path, smollm2_path):
    _, tok = load_policy(str(smollm2_path))
    data = tmp_path / "succ.jsonl"
    data.write_text("\n".join(episode_line(tok, f"Ana has 7 apples and gets 7 more. How many? ({i})", ANSWER, f"e{i}")
                              for i in range(4)) + "\n")
    rows = load_sft_rows([data])
    assert len(rows) == 4 and all(sum(r.loss_mask) > 5 for r in rows)
    out = tmp_path / "model"
    res = run_sft(rows, SFTConfig(model=str(smollm2_path), epochs=3, lr=1e-3, batch_rows=2), out, log=lambda m: None)
    assert res["steps"] == 6 and res["last_loss"] < res["first_loss"]
    base, _ = load_policy(str(smollm2_path))
    tuned, tuned_tok = load_policy(str(out))  # a plain model directory: LoRA merged
    assert tuned_tok.chat_template == tok.chat_template
    assert answer_logprob(tuned, rows) > answer_logprob(base, rows) + 1.0
    metrics = [json.loads(line) for line in (out / "sft_metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 6 and all(m["tokens"] > 0 for m in metrics)
    with pytest.raises(FileExistsError):  # never clobbers an existing directory unasked
        run_sft(rows, SFTConfig(model=str(smollm2_path)), out, log=lambda m: None)


def test_sft_bad_input_is_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"episode_id": "x", "segments": [{"input_ids": [1, 2], "loss_mask": [1]}]}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: .*differ in length"):
        load_sft_rows([bad])

    r = cli("sft", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "m"))
    assert r.returncode != 0 and "missing.jsonl: no such file" in r.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"episode_id": "y", "segments": [{"input_ids": [1, 2], "loss_mask": [0, 0]}]}\n')
    r = cli("sft", str(empty), "--out", str(tmp_path / "m"))
    assert r.returncode != 0 and "no episode with a sampled token" in r.stderr
    (tmp_path / "taken").mkdir()
    r = cli("sft", str(empty), "--out", str(tmp_path / "taken"))
    assert r.returncode != 0 and "--overwrite" in r.stderr


def test_a_chat_models_text_level_episode_is_an_sft_row_in_the_students_template(tmp_path, smollm2_path):
    """A chat model's episode (eval's baseline: messages, no tokens) becomes one SFT row rendered with
    the student's chat template; exactly its assistant turns are under mask 1."""
    from transformers import AutoTokenizer

    from agentboost.episodes.record import Episode, write_episodes
    from agentboost.trainer.sft import load_sft_rows

    ep = Episode(episode_id="t1", task_id="t", group_id="t", messages=[
        {"role": "user", "content": [{"text": "What is 6 * 7?"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "c1", "name": "calculator",
                                                       "input": {"expression": "6*7"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "42"}]}}]},
        {"role": "assistant", "content": [{"text": "The answer is 42."}]}],
        metadata={"text_level": {"provider": "openai", "model_id": "m", "system_prompt": "Be brief.", "tool_specs": []}})
    write_episodes(tmp_path / "eps.jsonl", [ep])
    (row,) = load_sft_rows([tmp_path / "eps.jsonl"], tokenizer=str(smollm2_path))
    tok = AutoTokenizer.from_pretrained(str(smollm2_path))
    assert tok.decode(row.input_ids).startswith("<|im_start|>system\nBe brief.")
    trained = tok.decode([t for t, m in zip(row.input_ids, row.loss_mask) if m])
    assert "The answer is 42." in trained and '"calculator"' in trained  # the call, in the student's format
    assert "What is 6 * 7?" not in trained and "42\n</tool_response>" not in trained
    with pytest.raises(Exception, match="needs the student's tokenizer"):
        load_sft_rows([tmp_path / "eps.jsonl"])
