"""The five faults of a weight sync, each injected into a real vLLM CPU server's sync and each caught
by the check the trainer runs after every publish (``StepVerifier.after_publish``), before a single
request samples from the faulty weights: the adapter never loaded, loaded with one tensor zeroed,
the sync skipped while the version advances, the wrong adapter named, the merged weights of the
previous step. Two servers serve them all (a runtime-adapter one and a merged-weights one, the CPU
build's default); tests/trainer/test_verify_runs.py ends whole runs with them."""

import json
import uuid
from pathlib import Path

import pytest
import torch
from helpers import vllm_python_or_skip

from agentboost.run import verify
from agentboost.run.config import TrainConfig
from agentboost.sampling.policy_version import PolicyVersion, read_policy_version, write_policy_version
from agentboost.testing.processes import wait_no_processes
from agentboost.trainer.verify import StepVerifier

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
LORA_R = 8


@pytest.fixture(scope="module")
def marker():
    return f"AGENTBOOST_TEST_VERIFY_{uuid.uuid4().hex[:8]}"


def policy_model(path):
    from peft import LoraConfig, get_peft_model

    from agentboost.models.loading import load_policy

    model, tok = load_policy(str(path))
    torch.manual_seed(0)
    model = get_peft_model(model, LoraConfig(r=LORA_R, lora_alpha=2 * LORA_R, task_type="CAUSAL_LM",
                                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                                             init_lora_weights=False))
    return model.eval(), tok


def update(model, scale=1e-3):
    """An optimizer step's worth of change to the adapter."""
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_" in n:
                p.add_(scale * torch.randn_like(p))


class Synced:
    """A policy server, the trainer's model and the verifier the trainer runs, versions counted."""

    def __init__(self, server, model, tok, tmp):
        self.server, self.model, self.version = server, model, 0
        self.verifier = StepVerifier(TrainConfig(), tmp, server, "vllm", model, tok, log=lambda m: None)
        self.verifier.after_publish(0, 0)  # the base model the server started with

    def publish(self, fault=None):
        """The next version, published (with ``fault`` applied around it) and verified."""
        update(self.model)
        self.version += 1
        if fault is None:
            self.server.publish(self.model, self.version)
        else:
            fault(self)
        return self.verifier.after_publish(self.version, self.version)


def serve(smollm2_path, tmp_path_factory, marker, merge):
    """A server and its trainer side; the server's own marker, so that each fixture checks that its
    server left no process behind."""
    from agentboost.sampling.vllm_server import VLLMPolicyServer

    mark = f"{marker}_{'MERGED' if merge else 'ADAPTER'}"
    model, tok = policy_model(smollm2_path)
    server = VLLMPolicyServer(smollm2_path, workdir=tmp_path_factory.mktemp("vllm"), lora_rank=LORA_R,
                              merge_lora=merge, python=vllm_python_or_skip(), kv_cache_gib=1, max_model_len=1024,
                              env={mark: "1"})
    server.start()
    yield Synced(server, model, tok, tmp_path_factory.mktemp("run"))
    server.close()
    assert wait_no_processes(mark, timeout=60) == []


@pytest.fixture(scope="module")
def adapter(smollm2_path, tmp_path_factory, marker):
    yield from serve(smollm2_path, tmp_path_factory, marker, merge=False)


@pytest.fixture(scope="module")
def merged(smollm2_path, tmp_path_factory, marker):
    yield from serve(smollm2_path, tmp_path_factory, marker, merge=True)


def test_good_syncs_match_on_both_paths(adapter, merged):
    for synced, sync in ((adapter, "adapter"), (merged, "merged")):
        m = synced.publish()
        record = synced.verifier.ledger.records[synced.version]
        assert record["match"] and record["sync"] == sync and m["weights_fingerprint"] == record["trainer_digest"]
        assert record["tensors"] == (240 if sync == "adapter" else 272)  # 30 layers x 4 modules x (A, B); every weight
        print(f"{sync} sync verified in {record['time_s']:.3f} s")
    base = json.loads((adapter.verifier.ledger.path).read_text().splitlines()[0])
    assert base["version"] == 0 and base["sync"] == "base" and base["match"]  # the served base model, checked once


def test_an_adapter_that_never_loaded(adapter):
    adapter.publish()

    def never_loaded(s):  # vLLM never got the adapter; the policy file moves on regardless
        s.server.server.load_adapter = lambda name, path: None
        try:
            s.server.publish(s.model, s.version)
        finally:
            del s.server.server.load_adapter

    with pytest.raises(verify.WeightsMismatch) as e:
        adapter.publish(never_loaded)
    head = (f"weight version {adapter.version} (adapter sync, served as 'policy-v{adapter.version}'): "
            f"adapter 'policy-v{adapter.version}' is not loaded on the engine (loaded: ")
    assert str(e.value).startswith(head) and str(e.value).endswith(")"), str(e.value)
    # what the engine's worker holds: the previous version (and older ones vLLM's adapter cache has
    # not evicted yet: unloading an adapter through the API only forgets its name), never this one
    loaded = str(e.value)[len(head):-1].split(", ")
    assert f"policy-v{adapter.version - 1}" in loaded and f"policy-v{adapter.version}" not in loaded


def zero_one_saved_tensor(directory, name_part):
    from safetensors.torch import load_file, save_file

    path = next(p for p in directory.glob("*.safetensors"))
    tensors = load_file(str(path))
    key = sorted(k for k in tensors if name_part in k)[0]
    tensors[key] = torch.zeros_like(tensors[key])
    save_file(tensors, str(path), metadata={"format": "pt"})
    return key


def test_an_adapter_loaded_with_one_tensor_zeroed(adapter):
    adapter.publish()
    save = adapter.model.save_pretrained

    def partial(s):  # one of the adapter's tensors arrives as zeros
        def save_and_damage(directory, **kw):
            save(directory, **kw)
            zero_one_saved_tensor(Path(directory), "layers.7.self_attn.v_proj.lora_B")

        s.model.save_pretrained = save_and_damage
        try:
            s.server.publish(s.model, s.version)
        finally:
            del s.model.save_pretrained

    with pytest.raises(verify.WeightsMismatch, match=r"1 of 240 tensors different "
                                                     r"\(model\.layers\.7\.self_attn\.v_proj\.lora_B\)$"):
        adapter.publish(partial)


def test_a_skipped_sync_while_the_version_advances(adapter, merged):
    for synced in (adapter, merged):
        synced.publish()
        previous = synced.version

        def skipped(s):  # the counter moves, the weights do not
            current = read_policy_version(s.server.policy_file)
            write_policy_version(s.server.policy_file, PolicyVersion(current.model, s.version))

        with pytest.raises(verify.WeightsMismatch, match=f"the engine still holds version {previous}'s weights"):
            synced.publish(skipped)


def test_the_wrong_adapter_named(adapter):
    adapter.publish()

    def base_named(s):  # requests name the base model: an adapter on the server serves nobody
        s.server.publish(s.model, s.version)
        write_policy_version(s.server.policy_file, PolicyVersion(s.server.server.served_name, s.version))

    with pytest.raises(verify.WeightsMismatch, match="requests name the base model 'base', not an adapter"):
        adapter.publish(base_named)
    adapter.publish()
    adapter.server.publisher.keep = 2  # the previous adapter stays loaded: naming it serves old weights
    previous = adapter.version

    def previous_named(s):
        s.server.publish(s.model, s.version)
        write_policy_version(s.server.policy_file, PolicyVersion(f"policy-v{previous}", s.version))

    try:
        with pytest.raises(verify.WeightsMismatch, match=f"served as 'policy-v{previous}'.*the engine still holds "
                                                         f"version {previous}'s weights"):
            adapter.publish(previous_named)
    finally:
        adapter.server.publisher.keep = 1


def test_merged_weights_of_the_previous_step(merged):
    from agentboost.models import lora_merge

    merged.publish()
    stale = {k: v.clone() for k, v in lora_merge.merged_state_dict(merged.model).items()}
    previous = merged.version

    def previous_weights(s):  # the reload reads weights merged from the adapter as it was a step ago
        real = lora_merge.merged_state_dict
        lora_merge.merged_state_dict = lambda model: stale
        try:
            s.server.publish(s.model, s.version)
        finally:
            lora_merge.merged_state_dict = real

    with pytest.raises(verify.WeightsMismatch, match=f"the engine still holds version {previous}'s weights; "
                                                     r"120 of 272 tensors different"):
        merged.publish(previous_weights)
