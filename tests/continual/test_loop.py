"""The continual loop end to end on CPU, with the embedded model, the calculator agent and users
driven by a script (stock Strands ``OpenAIModel`` agents through the loop's own ``serve``):

1. a clearly better candidate (the quickstart's warm start: demonstrations through the agent and
   its calculator, then supervised steps) is proposed, passes the offline gate on held-out tasks
   (its gain holds offline), and the live sequential test promotes it at p < 0.01;
2. a noised copy of the new production (a rollback drill, past the gate) is rolled back within
   one test window, its reason logged;
3. a candidate is trained from the served traffic alone (the promoted version's rewarded
   sessions; sessions left without an outcome are counted and never trained on), gated, and put
   under test; the loop is stopped mid-test and resumed, and the test goes on where it was
   (assignments and outcomes kept) until it is decided, then the loop stops at ``loop.max_rounds``;
4. no request of any user failed across the swaps; every record passes ``agentboost check``;
   every version names its parent, fingerprint, sessions and cost.

The sizes are the smallest that still prove each mechanism (``docs/continual.md`` says what sizes
a gain learned from traffic alone needs, measured by ``benchmarks/continual_loop.py``): five
outcomes an arm before the test's first look, one pass over the round's sessions; while a
candidate trains and is gated, two users (not a dozen) keep the server busy; the resumed test is
given a window of ten more outcomes (a resume with an override, logged), enough to show that it
goes on where it stopped and is decided."""

import asyncio
import threading
import time

import pytest
from helpers import REPO

from agentboost.cli import main
from agentboost.continual.lineage import LoopState
from agentboost.continual.loop import ContinualLoop, propose
from agentboost.run.config import load_config
from agentboost.tasks import load_tasks
from agentboost.testing.users import drive_users

LOOP = str(REPO / "examples/continual/loop.yaml")
QUICKSTART = str(REPO / "examples/quickstart/first_run.yaml")
TOKEN = "l00p"
# mixture_sd 0.3: the mSPRT tuned to the large gains these candidates make (a warm start against a model that
# never calls its calculator; a noised copy that no longer can), so a window of 100 outcomes decides them
SETTINGS = ["loop.sessions_per_round=24", "loop.gate_tasks=8", "loop.window=100", "loop.mixture_sd=0.3",
            "loop.min_outcomes=5", "loop.max_rounds=3", "loop.guard_min_calls=10", "loop.poll_s=0.5",
            "loop.train_epochs=1",
            "run.cost_per_hour=1.0", "loop.max_cost=5",
            "loop.gate_max_drop=0.5"]  # the gate is proven on the better candidate; a traffic-trained one goes live


@pytest.fixture(scope="module")
def better(tmp_path_factory, smollm2_path):
    """The quickstart's warm start (32 demonstrations, two epochs) and one GRPO step."""
    from agentboost.trainer.loop import Trainer

    run = tmp_path_factory.mktemp("better") / "run"
    cfg = load_config(QUICKSTART, ["run.steps=1", "data.tasks_per_step=1",
                                   "data.group_size=2", "data.val_file=", "validation.at_start=false",
                                   "run.tensorboard=false"])
    Trainer(cfg, run, log=lambda m: None).run()
    return f"{run}:latest"


class Running:
    """The loop in a thread of its own, as `agentboost continual run` runs it in its process."""

    def __init__(self, loop: ContinualLoop):
        self.loop, self.result, self.error = loop, None, None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 120
        while loop.url is None and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert loop.url is not None, self.error

    def _run(self):
        try:
            self.result = self.loop.run()
        except BaseException as e:  # noqa: BLE001 (re-raised in the test's thread)
            self.error = e

    def join(self, timeout=300):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the loop did not stop"
        if self.error is not None:
            raise self.error


def version(out, vid):
    return LoopState.load(out).version(vid) or {}


def users(url, tasks, prompt, until, failures, concurrency=12, until_down=False):
    drive = asyncio.run(drive_users(url, TOKEN, tasks, concurrency=concurrency, feedback_every=6,
                                    system_prompt=prompt, stop=until, until_down=until_down))
    failures.extend(drive.failures)
    return drive


@pytest.mark.slow
def test_the_loop_end_to_end(tmp_path, better, capsys):
    out = tmp_path / "loop"
    cfg = load_config(LOOP, SETTINGS, for_training=False)
    tasks = load_tasks(REPO / "examples/quickstart/data/train.jsonl")[:12]  # asked again and again: groups
    failures: list[str] = []
    t0 = time.monotonic()
    running = Running(ContinualLoop(cfg, out, token=TOKEN, max_batch_size=16, log=lambda m: None))
    url = running.loop.url + "/v1"
    prompt = cfg.agent.system_prompt

    # 1. the clearly better candidate: gated offline, then promoted by the live test
    propose(out, better)
    users(url, tasks, prompt, lambda: version(out, "v0001").get("status") not in (None, "candidate"), failures,
          concurrency=2)  # gated first
    users(url, tasks, prompt, lambda: version(out, "v0001").get("status") in ("production", "rolled_back", "gated_out"),
          failures)
    v1 = version(out, "v0001")
    assert v1["status"] == "production", v1.get("reason") or v1.get("gate")
    assert v1["gate"]["passed"] and v1["gate"]["difference"] > 0  # the gain holds offline, on held-out tasks
    seq = v1["test"]["sequential"]
    assert seq["decision"] == "better" and seq["p_value"] <= 0.01 and seq["mean_difference"] > 0
    assert v1["points"] > 0 and v1["usd_per_point"] > 0 and v1["usd"]["gate"] > 0

    # 2. a rollback drill: a noised copy of the new production, straight to the live test
    propose(out, noise=0.5, skip_gate=True)
    users(url, tasks, prompt, lambda: version(out, "v0002").get("status") in ("production", "rolled_back"), failures)
    v2 = version(out, "v0002")
    assert v2["status"] == "rolled_back" and v2["parent"] == "v0001" and v2["origin"] == "drill"
    assert v2["test"]["outcomes"] <= cfg.loop.window and not v2["test"].get("inconclusive")
    assert "significantly worse" in v2["reason"] or v2["reason"].startswith("guard:"), v2["reason"]
    events = [e for e in LoopState.load(out).events() if e["event"] == "rolled_back"]
    assert events[-1]["version"] == "v0002" and events[-1]["reason"] == v2["reason"]  # the reason, logged

    # 3. a candidate from served traffic alone; the loop stopped mid-test and resumed
    users(url, tasks, prompt, lambda: version(out, "v0003").get("status") == "testing", failures, concurrency=2)
    running.loop.request_stop("stopped by the test")
    running.join()
    v3 = version(out, "v0003")
    before = v3["test"].get("outcomes", 0)
    st = LoopState.load(out)
    assert st.data["phase"] == "testing" and st.data["candidate"] == "v0003"
    learned = st.sessions_file("v0003").read_text().split()
    assert v3["origin"] == "trained" and v3["method"] in ("grpo", "rft") and v3["parent"] == "v0001"
    assert len(learned) == v3["sessions"] >= cfg.loop.sessions_per_round
    window = before + 10  # the resumed test is decided within ten more outcomes (inconclusive at the latest)
    running = Running(ContinualLoop(None, out, resume=True, token=TOKEN, max_batch_size=16, log=lambda m: None,
                                    overrides=[f"loop.window={window}"]))
    # the loop stops on its own once v0003 is decided (loop.max_rounds): its users see the server go
    users(running.loop.url + "/v1", tasks, prompt,
          lambda: version(out, "v0003").get("status") in ("production", "rolled_back"), failures, until_down=True)
    running.join()
    v3 = version(out, "v0003")
    assert before < v3["test"]["outcomes"] <= window + 12  # the same test went on: its outcomes before the restart count
    changed = [e for e in LoopState.load(out).events() if e["event"] == "config_changed"]
    assert changed and changed[-1]["overrides"] == [f"loop.window={window}"]

    # 4. what was served and learned from
    assert failures == [], failures[:5]
    from agentboost.continual.sessions import ServedLog

    served = ServedLog(out / "serve", out)
    served.poll()
    for eid in learned:  # learned from: served by v0001, with an outcome, trainable
        s = served.sessions[eid]
        assert s.spec == v1["spec"] and served.reward(s)[0] is not None and served.trainable(s)
    counts = served.counts()
    assert counts["unrewarded"] > 0 and not set(learned) & {s.episode_id for s in served.sessions.values()
                                                             if served.reward(s)[0] is None}
    assert main(["check", str(out / "serve" / "sessions.jsonl")]) == 0
    assert "violations=0" in capsys.readouterr().out
    st = LoopState.load(out)
    assert st.data["stopped"] == "reached loop.max_rounds 3"
    assert [v["parent"] for v in st.versions] == [None, "v0000", "v0001", "v0001"]
    assert len({v["fingerprint"] for v in st.versions}) == 4
    assert all(v["usd"]["serving"] > 0 for v in st.versions[:2])
    assert main(["continual", "status", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "v0002 rolled_back" in printed and "USD/point" in printed
    print(f"the loop's test took {time.monotonic() - t0:.0f} s")
