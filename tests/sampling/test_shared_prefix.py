"""Speed paths that must not change a number: the shared-prefix KV cache in the sampler and in the
update, and the grouped-query CPU attention. Each is compared with the plain computation on the
real SmolLM2."""

import pytest
import torch

from agentboost.episodes.record import shared_prefix_len
from agentboost.models.loading import load_policy
from agentboost.sampling.hf_engine import HFEngine
from agentboost.sampling.protocol import SamplingParams
from agentboost.trainer import batch as batching
from agentboost.trainer import loss as losses

SYSTEM = "You are a careful assistant with a calculator tool. Show your work briefly. " * 4
QUESTIONS = ["What is 2 + 3?", "Ana has 7 apples and gets 7 more. How many apples does she have?",
             "Name a color.", "Count to three, slowly."]


def chat_ids(tok, question):
    return list(tok.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
                                        add_generation_prompt=True, return_dict=True)["input_ids"])


def test_shared_prefix_len_leaves_every_prompt_a_token():
    assert shared_prefix_len([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 9]]) == 2
    assert shared_prefix_len([[1, 2, 3], [1, 2, 3]]) == 2  # identical prompts: one token each stays
    assert shared_prefix_len([[7, 1], [8, 1]]) == 0


def test_trainable_prefix_stops_before_the_first_trained_tokens_predecessor():
    rows = [batching.TrainRow("a", "g", [1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 1, 1], [0.0] * 6),
            batching.TrainRow("b", "g", [1, 2, 3, 4, 5, 7], [0, 0, 0, 0, 1, 1], [0.0] * 6)]
    assert batching.pad_batch(rows, 0, min_shared_prefix=1)["shared_prefix"] == 3  # token 4 predicts trained 5
    rows[1].loss_mask = [0, 0, 1, 1, 1, 1]
    assert batching.pad_batch(rows, 0, min_shared_prefix=1)["shared_prefix"] == 1
    assert batching.pad_batch(rows, 0, min_shared_prefix=2)["shared_prefix"] == 0  # too short to bother
    assert batching.pad_batch(rows[:1], 0, min_shared_prefix=1)["shared_prefix"] == 0


def test_cpu_attention_equals_sdpa_on_a_padded_batch(smollm2_path):
    from transformers import AutoModelForCausalLM

    ours, tok = load_policy(str(smollm2_path))
    assert ours.config._attn_implementation == "agentboost_cpu_sdpa"
    ref = AutoModelForCausalLM.from_pretrained(str(smollm2_path), dtype=torch.float32, attn_implementation="sdpa")
    prompts = [chat_ids(tok, q) for q in QUESTIONS]
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), tok.pad_token_id)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):  # left padding: every row but the longest is masked at the start
        ids[i, width - len(p):], mask[i, width - len(p):] = torch.tensor(p), 1
    out = ours(input_ids=ids, attention_mask=mask).logits
    out[mask.bool()].sum().backward()
    expected = ref(input_ids=ids, attention_mask=mask).logits
    expected[mask.bool()].sum().backward()
    keep = mask.bool()
    assert torch.allclose(out[keep], expected[keep], atol=1e-3)
    g_ours = ours.model.layers[0].self_attn.k_proj.weight.grad
    g_ref = ref.model.layers[0].self_attn.k_proj.weight.grad
    assert float((g_ours - g_ref).norm() / g_ref.norm()) < 1e-4


def test_sampler_shared_prefix_gives_the_same_tokens_and_logprobs(smollm2_path):
    model, tok = load_policy(str(smollm2_path))
    prompts = [chat_ids(tok, q) for q in QUESTIONS]
    params = SamplingParams(temperature=0.0, max_new_tokens=16)
    results = {}
    for minimum in (0, 32):
        engine = HFEngine(model, tok, max_batch_size=len(prompts), batch_wait_s=0.5, min_shared_prefix=minimum)
        try:
            futures = [engine.submit(p, params) for p in prompts]
            results[minimum] = [f.result() for f in futures]
            assert engine.stats.batches == 1
            shared = engine.stats.shared_prefix_tokens
        finally:
            engine.close()
        assert (shared > 0) == (minimum > 0)
    assert shared == shared_prefix_len(prompts) * (len(prompts) - 1)
    for plain, cached in zip(results[0], results[32]):
        assert plain.response_ids == cached.response_ids and len(plain.response_ids) > 0
        assert cached.logprobs == pytest.approx(plain.logprobs, abs=1e-4)


def test_update_shared_prefix_gives_the_same_logprobs_and_gradients(smollm2_path):
    from peft import LoraConfig, get_peft_model

    model, tok = load_policy(str(smollm2_path))
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, task_type="CAUSAL_LM", target_modules=["q_proj", "v_proj"]))
    torch.manual_seed(0)
    for name, p in model.named_parameters():
        if "lora_B" in name:  # non-zero adapters, so the prefix's activations depend on them
            torch.nn.init.normal_(p, std=0.02)
    model.train()
    rows = []
    for i, q in enumerate(QUESTIONS):
        prompt = chat_ids(tok, q)
        response = torch.randint(100, 5000, (6 + 3 * i,)).tolist()
        rows.append(batching.TrainRow(str(i), "g", prompt + response, [0] * len(prompt) + [1] * len(response),
                                       [0.0] * (len(prompt) + len(response)), advantage=(-1) ** i * 0.7))
    cfg = losses.actor_config(0.2, 0.28, 3.0, "seq-mean-token-mean")
    seen = {}
    for minimum in (0, 32):
        batch = batching.pad_batch(rows, tok.pad_token_id, min_shared_prefix=minimum)
        model.zero_grad(set_to_none=True)
        logp = losses.token_logprobs(model, batch, temperature=0.8)
        loss, _ = losses.policy_loss(logp, batch, cfg)
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        seen[minimum] = (batch["shared_prefix"], logp.detach(), batch["response_mask"].bool(), grads)
    (s0, lp0, m, g0), (s1, lp1, _, g1) = seen[0], seen[32]
    assert s0 == 0 and s1 >= 32
    assert torch.allclose(lp0[m], lp1[m], atol=1e-4)
    assert g0.keys() == g1.keys() and len(g0) > 0
    for name in g0:
        assert float((g0[name] - g1[name]).norm()) <= 1e-3 * float(g0[name].norm()) + 1e-8, name
