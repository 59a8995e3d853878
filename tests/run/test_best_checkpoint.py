"""The best checkpoint's rules without a model: the trainer's choice (highest validation pass@1, a
tie to the later step, never the base model, a best step checkpointed before it is named), its
survival of checkpoint rotation, and the names a checkpoint goes by."""

import json
from types import SimpleNamespace

import pytest
import torch

from agentboost.run.checkpoint import (
    CheckpointError,
    best_checkpoint,
    resolve_checkpoint,
    save_checkpoint,
    split_run_spec,
)
from agentboost.trainer.loop import Trainer


class Weights(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2))

    def save_pretrained(self, path, safe_serialization=True):  # the one call save_checkpoint makes
        from safetensors.torch import save_file

        path.mkdir(parents=True)
        save_file({"w": self.w.detach()}, str(path / "model.safetensors"))


class Stub:
    """What ``Trainer._pick_best`` and ``Trainer.checkpoint`` read and call of a trainer."""

    def __init__(self, run_dir):
        self.run_dir, self.step, self.best, self.warm_started, self._saved_step = run_dir, 0, None, False, -1
        self.model = Weights()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: 1.0)
        self.stream = SimpleNamespace(state=lambda: {"epoch": 0, "offset": 0})
        self.rollouts = None  # synchronous: the checkpoint saves the stream's own position
        self.cfg = SimpleNamespace(model=SimpleNamespace(lora=False))
        self.events, self.lines = [], []
        self.metrics = SimpleNamespace(log_event=self.events.append)
        self.log = self.lines.append
        self.elapsed = lambda: 0.0
        self.checkpoint = lambda: Trainer.checkpoint(self)

    def validate(self, step, pass1, checkpoint=True):
        self.step = step
        if checkpoint:
            self.checkpoint()
        Trainer._pick_best(self, {"val_pass@1": pass1, "val_success_ci95": 0.1})


def test_the_best_checkpoint_rule_and_rotation(tmp_path):
    t = Stub(tmp_path)
    t.validate(0, 0.9, checkpoint=False)  # the base model is no checkpoint: never the best
    assert t.best is None and best_checkpoint(tmp_path) is None
    t.validate(1, 0.5)
    t.validate(2, 0.75)
    t.validate(3, 0.25)
    t.validate(4, 0.5)
    assert best_checkpoint(tmp_path)["checkpoint"] == "step_000002"
    # rotation keeps two checkpoints, and the best beside them
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step_*")) == [
        "step_000002", "step_000003", "step_000004"]
    t.validate(5, 0.75, checkpoint=False)  # a tie goes to the later step, which is checkpointed now
    assert best_checkpoint(tmp_path) == {"checkpoint": "step_000005", "step": 5, "metric": "val_pass@1",
                                         "value": 0.75, "ci95": 0.1}
    assert (tmp_path / "checkpoints" / "step_000005" / "manifest.json").is_file()
    assert [e["checkpoint"] for e in t.events if e["event"] == "best_checkpoint"] == [
        "step_000001", "step_000002", "step_000005"]
    assert resolve_checkpoint(tmp_path, "best") == tmp_path / "checkpoints" / "step_000005"
    assert resolve_checkpoint(tmp_path, "latest") == resolve_checkpoint(tmp_path, "5")
    assert resolve_checkpoint(tmp_path, "step_000004").name == "step_000004"
    with pytest.raises(CheckpointError, match="no checkpoint 'step_000001'"):
        resolve_checkpoint(tmp_path, "1")  # rotated away
    (tmp_path / "checkpoints" / "step_000004" / "model" / "model.safetensors").write_bytes(b"damaged")
    with pytest.raises(CheckpointError, match="step_000004 is damaged"):
        resolve_checkpoint(tmp_path, "step_000004")
    (tmp_path / "checkpoints" / "best.json").unlink()
    with pytest.raises(CheckpointError, match="has no best checkpoint"):
        resolve_checkpoint(tmp_path, "best")


def test_run_specs(tmp_path):
    (tmp_path / "config.yaml").write_text("{}")
    assert split_run_spec(f"{tmp_path}:best") == (str(tmp_path), "best")
    assert split_run_spec(str(tmp_path)) == (str(tmp_path), None)
    assert split_run_spec("smollm2-135m-instruct") == ("smollm2-135m-instruct", None)
    assert split_run_spec("org/model:rev") == ("org/model:rev", None)  # not a run directory: whole
    save_checkpoint(tmp_path, 3, Weights(), *_opt(), {"data": {}}, lora=False)
    assert json.loads((tmp_path / "checkpoints" / "step_000003" / "trainer_state.json").read_text())["step"] == 3


def _opt():
    m = Weights()
    o = torch.optim.SGD(m.parameters(), lr=0.1)
    return o, torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0)
