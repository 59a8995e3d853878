"""A LoRA policy's merged weights (what vLLM's merged sync serves) give the peft model's logits, and
merging leaves the trainer's model untouched."""

import torch


def test_merged_weights_give_the_adapters_logits_and_leave_the_model_alone(tmp_path, smollm2_path):
    from peft import LoraConfig, get_peft_model

    from agentboost.models.loading import load_policy
    from agentboost.models.lora_merge import save_merged

    model, tok = load_policy(str(smollm2_path))
    torch.manual_seed(0)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, task_type="CAUSAL_LM", init_lora_weights=False,
                                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ids = torch.tensor([tok.encode("Ben has 5 books and gives away 2. How many are left?")])
    with torch.no_grad():
        adapted = model(ids).logits
    save_merged(model, tmp_path / "merged")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    merged, _ = load_policy(str(tmp_path / "merged"), tokenizer=str(smollm2_path))
    base, _ = load_policy(str(smollm2_path))
    with torch.no_grad():
        assert (merged(ids).logits - adapted).abs().max().item() < 1e-3  # 6e-5 measured, float32
        assert (base(ids).logits - adapted).abs().max().item() > 1.0  # the adapter changes the model
