"""Weight fingerprints (models/fingerprint.py): exact digests of sampled columns that tell a zeroed
tensor, a missing module and weights one update old apart, on a tiny Llama (the trainer's side;
vLLM's side is in tests/run/test_verify_vllm.py)."""

import pytest
import torch

from agentboost.models import fingerprint as fp


def tiny_llama(lora: bool = True, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True))
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=12, target_modules=["q_proj", "v_proj"],
                                                 init_lora_weights=False))
    return model.eval()


def test_columns_are_distinct_in_range_and_change_with_the_draw():
    cols = fp.columns(3, "w", 100)
    assert cols == sorted(set(cols)) and len(cols) == fp.COLUMNS and all(0 <= c < 100 for c in cols)
    assert cols == fp.columns(3, "w", 100)  # the same on both sides of a sync
    assert cols != fp.columns(4, "w", 100) and cols != fp.columns(3, "v", 100)
    assert fp.columns(0, "w", 5) == [0, 1, 2, 3, 4]


def test_a_digest_changes_with_any_value_the_dtype_or_the_shape():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    d = fp.digest(t)
    changed = t.clone()
    changed[2, 3] = torch.nextafter(changed[2, 3], torch.tensor(100.0))  # one ulp
    assert fp.digest(changed) != d
    assert fp.digest(t.to(torch.bfloat16)) != d and fp.digest(t.reshape(4, 3)) != d
    assert fp.digest(t.clone()) == d


def test_full_fingerprints_name_the_tensor_that_differs():
    model = tiny_llama(lora=False)
    state = dict(model.state_dict())
    base = fp.of_tensors(state.items(), "float32", seed=7)
    # tied embeddings are one tensor, kept under its first name (as an engine keeps one copy)
    assert "model.embed_tokens.weight" in base["tensors"] and "lm_head.weight" not in base["tensors"]
    assert fp.differences(base, fp.of_tensors(state.items(), "float32", seed=7)) == []
    zeroed = dict(state)
    zeroed["model.layers.1.mlp.down_proj.weight"] = torch.zeros_like(state["model.layers.1.mlp.down_proj.weight"])
    assert fp.differences(base, fp.of_tensors(zeroed.items(), "float32", seed=7)) == [
        "1 of 20 tensors different (model.layers.1.mlp.down_proj.weight)"]
    missing = {k: v for k, v in state.items() if "layers.0.self_attn.k_proj" not in k}
    assert fp.differences(base, fp.of_tensors(missing.items(), "float32", seed=7)) == [
        "1 of 20 tensors missing (model.layers.0.self_attn.k_proj.weight)"]
    assert fp.differences(base, fp.of_tensors(state.items(), "bfloat16", seed=7)) == [
        "dtype 'bfloat16' instead of 'float32'"]
    # another draw looks at other columns: its digests differ
    assert fp.of_tensors(state.items(), "float32", seed=8)["digest"] != base["digest"]


def test_a_small_update_changes_the_fingerprint_in_bfloat16_too():
    """One optimizer step of ~1e-6 per weight: the float32 digests all change; in bfloat16 only the
    weights whose rounding flips change, enough of them for the sampled columns to see it."""
    model = tiny_llama(lora=False)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    stepped = {k: v + 1e-4 * torch.randn_like(v) * v.abs() for k, v in state.items()}
    for dtype in ("float32", "bfloat16"):
        before, after = fp.of_tensors(state.items(), dtype, 1), fp.of_tensors(stepped.items(), dtype, 1)
        assert fp.differences(before, after)


def test_lora_fingerprints_cover_each_factor_with_the_scale_folded_into_b():
    model = tiny_llama()
    got = fp.of_lora(model, "float32", seed=2)
    names = sorted(got["tensors"])
    assert names[:2] == ["model.layers.0.self_attn.q_proj.lora_A", "model.layers.0.self_attn.q_proj.lora_B"]
    assert len(names) == 8  # 2 layers x (q, v) x (A, B)
    module = model.get_base_model().model.layers[0].self_attn.q_proj
    b = module.lora_B["default"].weight
    assert module.scaling["default"] == 3.0
    # what an engine holding B x scale in bfloat16 would report for that module
    engine = fp.lora_entries("model.layers.0.self_attn.q_proj", module.lora_A["default"].weight.to(torch.bfloat16),
                             b.to(torch.bfloat16) * 3.0, seed=2)
    assert engine == {k: fp.of_lora(model, "bfloat16", 2)["tensors"][k] for k in engine}
    with torch.no_grad():
        b.zero_()
    assert fp.differences(got, fp.of_lora(model, "float32", seed=2)) == [
        "1 of 8 tensors different (model.layers.0.self_attn.q_proj.lora_B)"]


def test_differences_sorts_zero_missing_and_unexpected_tensors():
    exp = fp.make(fp.LORA, "float32", 0, {"a": "1", "b": "2", "c": "3"})
    got = fp.make(fp.LORA, "float32", 0, {"a": "1", "b": "0", "d": "9", "e": "0"}, zero=["b", "e"])
    assert fp.differences(exp, got) == ["1 of 3 tensors missing (c)", "1 of 3 tensors zero (b)",
                                        "1 of 3 tensors unexpected (d)"]
    with pytest.raises(ValueError, match="no active LoRA adapter"):
        fp.of_lora(tiny_llama(lora=False), "float32", 0)
