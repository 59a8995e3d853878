"""The update's token log-probs without a full-vocabulary log-softmax: the same values and the
same gradients as the full log-softmax, on the embedded model with LoRA, with and without a
shared prefix, in chunks smaller than a row."""

import pytest
import torch

from agentboost.trainer import logprobs as lp
from agentboost.trainer.batch import TrainRow, pad_batch
from agentboost.trainer.loss import token_logprobs


@pytest.fixture(scope="module")
def lora_model(smollm2_path):
    from peft import LoraConfig, get_peft_model

    from agentboost.models.loading import load_policy

    model, tok = load_policy(str(smollm2_path))
    torch.manual_seed(0)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, task_type="CAUSAL_LM", init_lora_weights=False,
                                             target_modules=["q_proj", "v_proj"]))
    return model, tok


def full_softmax(model, batch, temperature):
    ids, attn = batch["input_ids"], batch["attention_mask"]
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)


def rows(tok):
    head = tok.apply_chat_template([{"role": "system", "content": "You are a careful assistant with a calculator."},
                                    {"role": "user", "content": "Add the numbers."}], add_generation_prompt=True,
                                   return_dict=True)["input_ids"]
    g = torch.Generator().manual_seed(1)
    out = []
    for i, n in enumerate((30, 17, 41)):
        resp = torch.randint(0, tok.vocab_size, (n,), generator=g).tolist()
        out.append(TrainRow(str(i), "g", head + resp, [0] * len(head) + [1] * n, [0.0] * (len(head) + n),
                            advantage=1.0 - i))
    return out


@pytest.mark.parametrize("shared", [0, 8])
def test_chunked_logprobs_and_gradients_equal_the_full_log_softmax(lora_model, monkeypatch, shared):
    model, tok = lora_model
    monkeypatch.setattr(lp, "DEFAULT_CHUNK_POSITIONS", 7)  # several chunks per row
    monkeypatch.setattr(lp.hidden_logprobs, "__defaults__", (7,))
    batch = pad_batch(rows(tok), tok.pad_token_id, min_shared_prefix=shared)
    assert (batch["shared_prefix"] > 0) == bool(shared)
    m = batch["response_mask"].bool()
    params = [p for p in model.parameters() if p.requires_grad]

    def grads(fn):
        for p in params:
            p.grad = None
        logp = fn(model, batch, 0.8)
        ((logp * batch["advantages"]) * batch["response_mask"]).sum().backward()
        return logp.detach(), torch.cat([p.grad.flatten() for p in params])

    ref_logp, ref_grad = grads(full_softmax)
    new_logp, new_grad = grads(token_logprobs)
    assert new_logp.shape == ref_logp.shape
    assert torch.allclose(new_logp[m], ref_logp[m], atol=1e-4)
    assert torch.allclose(new_grad, ref_grad, atol=1e-4 * ref_grad.abs().max().item())
    assert ref_grad.abs().max() > 0


def test_models_with_post_processed_logits_take_the_logits_path(lora_model):
    model, _ = lora_model
    assert lp.head_supports_chunking(model)
    model.config.final_logit_softcapping = 30.0  # Gemma-style soft-capping lives in the model's forward
    try:
        assert not lp.head_supports_chunking(model)
    finally:
        model.config.final_logit_softcapping = None


@pytest.mark.parametrize("shared", [0, 8])
def test_checkpointed_layers_give_the_same_logprobs_and_gradients(lora_model, shared):
    """Decoder layers under activation checkpointing (recomputed in backward), with and without
    the shared-prefix KV cache: the same log-probs and gradients as without checkpointing."""
    model, tok = lora_model
    batch = pad_batch(rows(tok), tok.pad_token_id, min_shared_prefix=shared)
    assert (batch["shared_prefix"] > 0) == bool(shared)
    m = batch["response_mask"].bool()
    params = [p for p in model.parameters() if p.requires_grad]
    attention = model.get_decoder().layers[0].self_attn
    seen = {}
    for ckpt in (False, True):
        calls = []
        hook = attention.register_forward_hook(lambda *a: calls.append(1))
        try:
            for p in params:
                p.grad = None
            logp = token_logprobs(model, batch, 0.8, checkpoint_layers=ckpt)
            ((logp * batch["advantages"]) * batch["response_mask"]).sum().backward()
        finally:
            hook.remove()
        seen[ckpt] = (logp.detach(), torch.cat([p.grad.flatten() for p in params]), len(calls))
    (lp0, g0, calls0), (lp1, g1, calls1) = seen[False], seen[True]
    # checkpointed: the rows' pass runs each layer again in backward (the prefix pass runs once)
    assert calls0 == (2 if shared else 1) and calls1 == calls0 + 1
    assert torch.allclose(lp1[m], lp0[m], atol=1e-5)
    assert torch.allclose(g1, g0, atol=1e-5 * g0.abs().max().item()) and g0.abs().max() > 0
    # the layers are themselves again afterwards
    assert all("forward" not in layer.__dict__ for layer in model.get_decoder().layers)


@pytest.mark.parametrize("shared", [0, 8])
def test_the_output_projection_runs_only_where_a_token_is_trained(lora_model, monkeypatch, shared):
    """The vocabulary-wide projection is the costliest matrix of a small model; positions that predict
    no trained token (the prompt, tool results, padding) never go through it, and read 0."""
    model, tok = lora_model
    batch = pad_batch(rows(tok), tok.pad_token_id, min_shared_prefix=shared)
    m = batch["response_mask"].bool()
    projected = []
    logits = lp._logits
    monkeypatch.setattr(lp, "_logits", lambda h, *a: projected.append(h.shape[0]) or logits(h, *a))
    with torch.no_grad():
        logp = token_logprobs(model, batch, 0.8)
        ref = full_softmax(model, batch, 0.8)
    assert sum(projected) == int(m.sum()) < m.numel()
    assert torch.allclose(logp[m], ref[m], atol=1e-4) and bool((logp[~m] == 0).all())


@pytest.mark.parametrize("temperature", [0.7, 0.0])
def test_the_heads_written_out_gradient_is_autograds(temperature):
    """The projection's log-probs and their gradient for the hidden states, the weight and the bias
    (a trained head: full fine-tuning), against autograd through the full log-softmax, in chunks
    smaller than the positions."""
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=True)
    hidden = torch.randn(13, 16, requires_grad=True)
    targets = torch.randint(0, 50, (13,))
    weights = torch.randn(13)

    def grads(fn):
        for t in (hidden, head.weight, head.bias):
            t.grad = None
        out = fn()
        (out * weights).sum().backward()
        return [out.detach()] + [t.grad.clone() for t in (hidden, head.weight, head.bias)]

    def reference():
        logits = head(hidden) / (temperature or 1.0)
        return torch.log_softmax(logits, -1).gather(-1, targets[:, None]).squeeze(-1)

    for ours, ref in zip(grads(lambda: lp.hidden_logprobs(hidden, targets, head, temperature, chunk_positions=4)),
                         grads(reference)):
        assert torch.allclose(ours, ref, atol=1e-5), (ours - ref).abs().max()
