"""A validation's figures are computed once for both trainers (``run/metrics.validation_metrics``):
an aborted episode (the serving side was down) is counted and left out of every figure, never
scored as a failure (the prompt trainer's validation used to count it as one), and a task it leaves
with fewer than k outcomes is left out of pass@k (the weights trainer's validation used to stop the
run there: pass@k of fewer than k trials is a ValueError)."""

from agentboost.episodes.record import Episode, Status
from agentboost.run.config import load_config
from agentboost.run.metrics import validation_metrics, validation_summary


def episode(task: str, k: int, status: Status, reward: float | None) -> Episode:
    return Episode(episode_id=f"{task}-{k}", task_id=task, group_id=task, status=status, reward=reward)


def test_aborted_episodes_are_counted_and_left_out():
    cfg = load_config(None, ["validation.k=2"], for_training=False)
    eps = [episode("a", 0, Status.OK, 1.0), episode("a", 1, Status.ABORTED, None),
           episode("b", 0, Status.OK, 0.0), episode("b", 1, Status.OK, 1.0)]
    m = validation_metrics(cfg, 3, eps)
    assert m["val_aborted"] == 1 and m["val_episodes"] == 3 and m["val_tasks"] == 2
    assert m["val_pass@1"] == (1.0 + 0.5) / 2  # task a: its one outcome; task b: one of two
    assert m["val_pass@2"] == 1.0 and m["val_reward_mean"] == 2 / 3  # pass@2 of task b alone
    s = validation_summary(m)
    assert s["step"] == 3 and s["episodes"] == 3 and "1 aborted left out" in s["figure"]
    # every episode aborted: no figure, never 0
    assert validation_metrics(cfg, 0, [episode("a", 0, Status.ABORTED, None)])["val_pass@1"] is None
