"""The GRPO guide's own Python blocks, run against a local job service (real sockets, the embedded
SmolLM2), unchanged but for imports, URL, key and sizes (each change is marked ``# [changed: ...]``).

Each block is kept as text, as the guide prints it, and run with ``exec``; its ``print`` is
captured, so what the guide's reader would see is what is asserted. Variables the guide uses
without defining in that block (``eval_data``, ``job_id``) are set beside it, as its reader would.
"""

import json
import math
import os
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from helpers import AppThread

from agentboost.jobs.client import JobServiceError
from agentboost.jobs.service import make_app
from agentboost.jobs.store import JobStore

HERE = Path(__file__).resolve().parent
# Step 1's shape (expected_outcome as an object with "result"), and plain answers
TRAINING_DATA = [{"query": f"What is {a} + {b}? Answer with the number.", "expected_outcome": {"result": a + b,
                                                                                               "test_passed": True}}
                 for a, b in [(2, 3), (4, 4), (1, 6), (5, 2)]]
EVAL_DATA = [{"query": "What is 3 + 3? Answer with the number.", "expected_outcome": "6"},
             {"query": "What is 2 + 7? Answer with the number.", "expected_outcome": "9"}]
# sizes the guide leaves to the trainer's defaults: short samples, one validation sample per task
SIZES = {"sampling.max_new_tokens": 16, "validation.max_new_tokens": 16, "validation.k": 1, "run.tensorboard": False}

STEP_2 = '''
from agentboost import GRPOConfig  # [changed: import]

config = GRPOConfig(
    n_iterations=2,             # Number of training iterations  [changed: size]
    batch_size=2,               # Queries per iteration  [changed: size]
    n_trajectories_per_query=2, # Trajectories to generate per query  [changed: size]
    learning_rate=0.0001,       # Policy gradient learning rate
    max_budget_usd=50.00,       # Training cost limit
    checkpoint_interval=1,      # Save checkpoint every N iterations  [changed: size]
)
'''

STEP_3 = '''
import os
from agentboost.jobs.client import TrainingClient  # [changed: import]

client = TrainingClient(
    base_url=BASE_URL,  # [changed: URL]
    api_key=os.getenv("AGENTBOOST_API_KEY")  # [changed: key]
)

# Start training job
job = client.start_training(
    agent_id="my-agent-v1",
    config=config,
    training_data=training_data,
    evaluation_data=eval_data  # 20% held-out for validation
)

print(f"Training job started: {job['job_id']}")
'''

STEP_4 = '''
import time

while True:
    status = client.get_status(job["job_id"])

    print(f"Progress: {status['progress_percent']}%")
    print(f"Current Loss: {status['metrics']['train_loss']:.3f}")
    print(f"Validation Accuracy: {status['metrics']['validation_accuracy']:.2%}")
    print(f"Budget Used: ${status['cost_usd']} / ${status['budget_usd']}")

    if status["status"] in ["completed", "failed", "cancelled"]:
        break

    time.sleep(2)  # Poll every minute  [changed: size]
'''

STEP_5 = '''
# Run evaluation on best checkpoint
eval_result = client.evaluate(job["job_id"])

print(f"Success Rate: {eval_result['metrics']['success_rate']:.2%}")
print(f"Improvement: +{eval_result['baseline_comparison']['success_rate_improvement']:.2%}")

if eval_result['baseline_comparison']['statistically_significant']:
    print("✅ Improvement is statistically significant!")
'''

PHASE_3_MONITOR = '''
# 2. Monitor (automated with webhooks)
client.subscribe_webhook(
    events=["training.job.progress", "training.budget.warning"],
    url=HOOK_URL  # [changed: URL]
)

# 3. Check convergence
status = client.get_status(job_id)
if status["metrics"]["train_loss"] < 0.1:
    print("Training converged!")
'''

PHASE_4 = '''
# Evaluate on held-out data
eval_metrics = client.evaluate(job_id)

# Key metrics
success_rate = eval_metrics["metrics"]["success_rate"]
avg_reward = eval_metrics["metrics"]["avg_reward"]
improvement = eval_metrics["baseline_comparison"]["success_rate_improvement"]

# Statistical significance
p_value = eval_metrics["baseline_comparison"]["p_value"]
significant = p_value < 0.05
'''

LIVE_UPDATES = '''
# WebSocket connection for live updates
import asyncio, json  # [changed: imports]
import websockets

async def monitor_training(job_id):
    uri = f"{WS_URL}/training/ws/{job_id}"  # [changed: URL]

    async with websockets.connect(uri, additional_headers={"Authorization": f"Bearer {API_KEY}"}) as ws:  # [changed: key]
        async for message in ws:
            event = json.loads(message)

            if event["type"] == "progress":
                print(f"Iteration {event['iteration']}/{event['total']}")
                print(f"Loss: {event['loss']:.4f}")

            elif event["type"] == "checkpoint":
                print(f"Checkpoint saved: {event['checkpoint_id']}")

asyncio.run(monitor_training(job_id))
'''

PIPELINE_MONITOR = '''
status = client.get_status(job["job_id"])

print(f"\\n=== Iteration {status['current_iteration']}/{status['total_iterations']} ===")
print(f"Progress: {status['progress_percent']:.1f}%")
print(f"Loss: {status['metrics']['train_loss']:.4f}")
print(f"Val Accuracy: {status['metrics']['validation_accuracy']:.2%}")
print(f"Budget: ${status['cost_usd']} / ${status['budget_usd']}")
'''

PIPELINE_EXPORT = '''
# 7. Export data (optional)
trajectories = client.export_trajectories(
    job_id=job["job_id"],
    success_only=True,
    min_reward=0.7,
    limit=100
)

print(f"\\nExported {len(trajectories['trajectories'])} high-quality trajectories")
'''

ADVANCED_CONFIG = '''
config = GRPOConfig(
    # Training duration
    n_iterations=1000,
    batch_size=32,

    # Exploration
    n_trajectories_per_query=12,  # More exploration
    max_steps_per_trajectory=30,   # Allow longer trajectories

    # Optimization
    learning_rate=0.0001,
    gamma=0.99,  # Discount factor for multi-step credit

    # Resource limits
    max_budget_usd=200.00,
    checkpoint_interval=20,  # Save less frequently
)
'''

PHASE_5 = '''
# 1. Get best checkpoint
best_checkpoint = status["best_checkpoint_id"]

# 2. Deploy to production (example)
client.deploy_checkpoint(
    agent_id="my-agent-v1",
    checkpoint_id=best_checkpoint,
    environment="production"
)

# 3. A/B test (recommended)
client.configure_ab_test(
    agent_id="my-agent-v1",
    baseline_checkpoint=None,  # Current production
    experiment_checkpoint=best_checkpoint,
    traffic_split=0.1  # 10% to new version
)
'''

AB_TEST_FIRST = '''
# 1. Deploy to 10% of traffic
client.configure_ab_test(
    baseline_checkpoint=current,
    experiment_checkpoint=new,
    traffic_split=0.1
)
'''

# the troubleshooting section's edits, each applied to a config before a job starts
TROUBLESHOOTING = [
    ("config.learning_rate = 0.0005  # 5x increase", "optim.lr", 0.0005),
    ("config.n_trajectories_per_query = 16  # Double trajectories", "data.group_size", 16),
    ("config.batch_size = 8  # Half the size", "data.tasks_per_step", 8),
    ("config.n_trajectories_per_query = 4", "data.group_size", 4),
    ("config.max_steps_per_trajectory = 10", "agent.max_model_calls", 10),
]

EARLY_STOPPING = '''
# Stop when validation plateaus
if no_improvement_for_N_iterations(20):
    client.cancel(job_id)
'''

VERSION_CONTROL = '''
# Tag training runs
job = client.start_training(
    agent_id="my-agent-v1",
    config=config,
    training_data=training_data,
    metadata={
        "git_commit": "abc123",
        "data_version": "v2.1",
        "experiment": "increase_trajectories"
    }
)
'''


def run(block: str, ns: dict, name: str) -> list[str]:
    """Run one guide block in ``ns``; what it printed, line by line."""
    printed: list[str] = []
    ns["print"] = lambda *a, **k: printed.extend(" ".join(str(x) for x in a).splitlines())
    exec(compile(block, f"<guide: {name}>", "exec"), ns)
    return printed


def dotted(cfg: dict, key: str):
    for part in key.split("."):
        cfg = cfg[part]
    return cfg


def guide_namespace(url: str, token: str, monkeypatch) -> dict:
    monkeypatch.setenv("AGENTBOOST_API_KEY", token)
    return {"BASE_URL": url, "WS_URL": url.replace("http://", "ws://"), "API_KEY": token,
            "training_data": TRAINING_DATA, "eval_data": EVAL_DATA}


def test_guide_blocks_on_queued_jobs(tmp_path, smollm2_path, monkeypatch):
    """Configuration, the client, status keys and their types, the advanced config, the
    troubleshooting edits, early stopping, tags and webhook names: jobs are checked and created
    but none starts (``max_running=0``), so nothing trains."""
    store = JobStore(tmp_path / "jobs", max_running=0)
    svc = AppThread(make_app(store, allow_private_webhooks=True))  # no DNS here: the hook URL is loopback
    try:
        ns = guide_namespace(svc.url, store.token(), monkeypatch)
        run(STEP_2, ns, "step 2")
        ns["config"].overrides.update(SIZES)
        out = run(STEP_3, ns, "step 3")
        job = ns["job"]
        assert out == [f"Training job started: {job['job_id']}"] and job["job_id"].startswith("my-agent-v1-")
        assert job["status"] == "queued" and job["agent_id"] == "my-agent-v1"
        cfg = yaml.safe_load((tmp_path / "jobs" / job["job_id"] / "config.yaml").read_text())
        assert (cfg["run"]["steps"], cfg["data"]["tasks_per_step"], cfg["data"]["group_size"]) == (2, 2, 2)
        assert (cfg["optim"]["lr"], cfg["run"]["max_cost"], cfg["run"]["checkpoint_every"]) == (0.0001, 50.0, 1)
        assert cfg["agent"]["agent_type"] == "my-agent-v1" and cfg["reward"]["name"] == "exact_answer"

        # every key the guide's status readers use, typed as they use it, before anything is measured
        out = run(PIPELINE_MONITOR, ns, "pipeline monitor")
        assert out == ["", "=== Iteration 0/2 ===", "Progress: 0.0%", "Loss: nan", "Val Accuracy: nan%",
                       "Budget: $0.0 / $50.0"]
        status = ns["status"]
        assert isinstance(status["progress_percent"], float) and isinstance(status["current_iteration"], int)
        assert math.isnan(status["metrics"]["train_loss"]) and status["trajectories_generated"] == 0
        assert status["budget_remaining_percent"] == 100.0 and status["estimated_completion"] is None
        ns["job_id"] = job["job_id"]
        out = run(PHASE_3_MONITOR.replace("HOOK_URL", '"http://127.0.0.1:9/webhooks/training"'), ns, "phase 3")
        assert out == []  # no loss yet: not converged
        hooks = json.loads(json.dumps(ns["client"]._call("GET", "/webhooks")))["webhooks"]
        assert hooks[0]["events"] == ["progress", "budget_warning"]  # the guide's names, as agentboost's
        with pytest.raises(JobServiceError, match="400.*unknown events.*training.job.progress"):
            ns["client"].subscribe_webhook(events=["training.job.progres"], url="http://127.0.0.1:9/h")

        # the advanced configuration and each troubleshooting edit reach the job's training config
        run(ADVANCED_CONFIG, ns, "advanced config")
        ns["config"].overrides.update(SIZES)
        run(STEP_3, ns, "step 3 again")
        cfg = yaml.safe_load((tmp_path / "jobs" / ns["job"]["job_id"] / "config.yaml").read_text())
        assert cfg["algorithm"]["gamma"] == 0.99 and cfg["agent"]["max_model_calls"] == 30
        assert (cfg["data"]["group_size"], cfg["run"]["max_cost"]) == (12, 200.0)
        for edit, key, value in TROUBLESHOOTING:
            run(STEP_2, ns, "step 2")
            run(edit, ns, edit)
            run(STEP_3, ns, "step 3 after an edit")
            cfg = yaml.safe_load((tmp_path / "jobs" / ns["job"]["job_id"] / "config.yaml").read_text())
            assert dotted(cfg, key) == value, edit

        # the live-update socket: the bearer token is required, an unknown job is a 404, both before the upgrade
        import asyncio

        import websockets
        from websockets.exceptions import InvalidStatus

        async def refused(path, headers):
            with pytest.raises(InvalidStatus) as e:
                async with websockets.connect(ns["WS_URL"] + path, additional_headers=headers):
                    pass
            return e.value.response.status_code

        auth = {"Authorization": f"Bearer {ns['API_KEY']}"}
        assert asyncio.run(refused(f"/training/ws/{ns['job_id']}", {})) == 401
        assert asyncio.run(refused("/training/ws/nope-00000000", auth)) == 404
        assert asyncio.run(refused(f"/training/ws/{ns['job_id']}?from=-1", auth)) == 400

        # early stopping cancels the job (queued: it never starts)
        ns["no_improvement_for_N_iterations"] = lambda n: True
        run(EARLY_STOPPING, ns, "early stopping")
        assert ns["client"].get_status(ns["job_id"])["status"] == "cancelled"

        async def live_events(job_id):
            async with websockets.connect(f"{ns['WS_URL']}/training/ws/{job_id}", additional_headers=auth) as ws:
                return [json.loads(m) async for m in ws]

        ended = asyncio.run(asyncio.wait_for(live_events(ns["job_id"]), 30))  # the stream of an ended job ends
        assert [(e["type"], e["event_type"]) for e in ended] == [("cancelled", "training.job.cancelled")]

        # Phase 5 refused with a reason before anything can be served (nothing trained, nothing deployed)
        client = ns["client"]
        for call, reason in [
                (lambda: client.deploy_checkpoint(agent_id="a", checkpoint_id="/etc:passwd"),
                 "not a checkpoint of this service's jobs"),
                (lambda: client.deploy_checkpoint(agent_id="a", checkpoint_id=f"{ns['job_id']}:best"),
                 "has not started training"),
                (lambda: client.configure_ab_test(agent_id="a", experiment_checkpoint="smollm2-135m-instruct"),
                 "nothing is deployed for agent 'a' in 'production'"),
                (lambda: client.configure_ab_test(experiment_checkpoint="smollm2-135m-instruct"), "needs agent_id"),
                (lambda: client.configure_ab_test(agent_id="a", traffic_split=0.5), "no A/B test runs for agent 'a'"),
                (lambda: client.configure_ab_test(agent_id="a", experiment_checkpoint="x", traffic_split=2),
                 "split must be in"),
                (lambda: client.deploy_checkpoint(agent_id="../a", checkpoint_id="smollm2-135m-instruct"), "agent_id must be")]:
            with pytest.raises(JobServiceError, match=f"400.*{reason}"):
                call()
        with pytest.raises(JobServiceError, match="404.*nothing was deployed"):
            client.get_deployment("a")
        assert client.list_deployments() == [] and client.get_status(ns["job_id"])["deployments"] == []

        # tags kept with the job
        run(VERSION_CONTROL, ns, "version control")
        assert ns["client"].get_status(ns["job"])["metadata"]["data_version"] == "v2.1"

        # a custom reward named for the agent's type reaches the job as an importable function
        monkeypatch.syspath_prepend(str(HERE))
        import guide_reward  # the guide's custom reward block

        try:
            job = ns["client"].start_training(agent_id="my-agent-type", config=ns["config"], training_data=TRAINING_DATA)
            cfg = yaml.safe_load((tmp_path / "jobs" / job["job_id"] / "config.yaml").read_text())
            assert cfg["reward"]["name"] == "guide_reward:my_custom_reward" == job["reward"]
        finally:
            from agentboost.rewards import registry

            registry._DEFAULTS.pop("my-agent-type", None)
        assert guide_reward.registry.list().count("my_reward") == 1
    finally:
        svc.stop()


class Receiver:
    """A webhook receiver on loopback."""

    def __init__(self):
        import http.server

        self.received = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                outer.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/webhooks/training"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.mark.slow
def test_guide_workflow_trains_evaluates_and_streams(tmp_path, smollm2_path, monkeypatch):
    """Quick Start steps 2-5, Phase 3's webhooks, the live updates, Phase 4 and the export, on one
    real two-step job whose reward is the guide's custom one-argument reward."""
    monkeypatch.syspath_prepend(str(HERE))
    # the job's trainer and workers import guide_reward too
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p))
    import guide_reward

    from agentboost.rewards import registry

    guide_reward.registry.set_agent_strategy("my-agent-v1", "my_reward")  # the reader's agent uses it
    store = JobStore(tmp_path / "jobs")
    svc = AppThread(make_app(store, allow_private_webhooks=True))
    receiver = Receiver()
    try:
        ns = guide_namespace(svc.url, store.token(), monkeypatch)
        run(STEP_2, ns, "step 2")
        ns["config"].cost_per_hour_usd = 3.6  # [size: the guide's cost has a price; ours is wall time x this]
        ns["config"].overrides.update(SIZES)
        run(STEP_3, ns, "step 3")
        job_id = ns["job_id"] = ns["job"]["job_id"]
        run(PHASE_3_MONITOR.replace("HOOK_URL", repr(receiver.url)), ns, "phase 3")

        live: dict = {}
        ws_ns = {**ns, "print": None}
        thread = threading.Thread(target=lambda: live.setdefault("out", run(LIVE_UPDATES, ws_ns, "live updates")),
                                  daemon=True)
        thread.start()
        t0 = time.time()
        monitored = run(STEP_4, ns, "step 4")
        train_s = time.time() - t0
        status = ns["status"]
        assert status["status"] == "completed", (tmp_path / "jobs" / job_id / "log.txt").read_text()[-3000:]
        assert monitored[-4:] == ["Progress: 100.0%", f"Current Loss: {status['metrics']['train_loss']:.3f}",
                                  f"Validation Accuracy: {status['metrics']['validation_accuracy']:.2%}",
                                  f"Budget Used: ${status['cost_usd']} / $50.0"]
        assert (status["current_iteration"], status["total_iterations"]) == (2, 2)
        m = status["metrics"]
        assert all(isinstance(m[k], float) and not math.isnan(m[k])
                   for k in ("train_loss", "validation_accuracy", "success_rate", "avg_reward", "avg_steps",
                             "tool_accuracy"))
        assert 0 < status["cost_usd"] <= train_s / 3600 * 3.6 + 1e-3 and 0 < status["budget_remaining_percent"] < 100
        assert status["trajectories_generated"] == 2 * 2 * 2 and status["reward"] == "guide_reward:my_custom_reward"
        # the guide's reward scored every episode: 0.5 for a success, +0.3 for a short direct answer
        rewards = [json.loads(line)["reward"] for f in sorted((tmp_path / "jobs" / job_id / "run" / "episodes")
                                                               .glob("step_*.jsonl")) for line in f.open()]
        assert len(rewards) == 8 and set(rewards) <= {0.0, 0.3, 0.5, 0.8}

        # live updates: progress and checkpoint events, in the order the trainer wrote them
        thread.join(60)
        assert not thread.is_alive()
        assert live["out"] == ["Iteration 1/2", f"Loss: {live['out'][1][6:]}", "Checkpoint saved: step_000001",
                               "Iteration 2/2", f"Loss: {live['out'][4][6:]}", "Checkpoint saved: step_000002"]
        assert float(live["out"][4][6:]) == pytest.approx(status["metrics"]["train_loss"], abs=1e-4)

        # webhooks: only the subscribed events, under both names
        deadline = time.time() + 30
        while len(receiver.received) < 2 and time.time() < deadline:
            time.sleep(0.5)
        assert [(e["event_type"], e["iteration"], e["total"]) for e in receiver.received] == [
            ("training.job.progress", 1, 2), ("training.job.progress", 2, 2)]

        # Quick Start step 5 and Phase 4: the newest checkpoint against the base model, paired test
        out = run(STEP_5, ns, "step 5")
        res = ns["eval_result"]
        assert out[0] == f"Success Rate: {res['metrics']['success_rate']:.2%}"
        comparison = res["baseline_comparison"]
        assert comparison["success_rate_improvement"] == pytest.approx(
            res["metrics"]["success_rate"] - comparison["baseline_success_rate"])
        assert isinstance(comparison["statistically_significant"], bool) and 0 <= comparison["p_value"] <= 1
        assert (len(out) == 3) == comparison["statistically_significant"]
        run(PHASE_4, ns, "phase 4")
        assert isinstance(ns["avg_reward"], float) and isinstance(ns["significant"], bool)
        assert ns["p_value"] == comparison["p_value"]

        out = run(PIPELINE_EXPORT, ns, "export")
        exported = ns["trajectories"]
        assert out == ["", f"Exported {len(exported['trajectories'])} high-quality trajectories"]
        # success_only: the trajectory succeeded (the guide reward's 0.5 part); min_reward 0.7: and answered short
        assert len(exported["trajectories"]) == exported["episodes"] == rewards.count(0.8)

        # Phase 5: the best checkpoint deployed, then A/B tested against production, by a process of the service's
        run(PHASE_5, ns, "phase 5")
        client, run_dir = ns["client"], (tmp_path / "jobs" / job_id / "run").resolve()
        best = f"{run_dir}:{status['best_checkpoint']}"
        assert ns["best_checkpoint"] == f"{tmp_path / 'jobs' / job_id / 'run'}:{status['best_checkpoint']}"
        dep = client.get_deployment("my-agent-v1")
        assert dep["state"] == "running" and dep["arms"] == {"baseline": best, "experiment": best}  # None: production
        assert dep["split"] == 0.1 and dep["base_url"].startswith("http://127.0.0.1:")
        pid = dep["pid"]
        assert client.get_status(job_id)["deployments"] == [{k: dep[k] for k in ("agent_id", "environment", "base_url",
                                                                                  "arms", "split")}]
        # best practice 5: the other checkpoint as the baseline, the agent id taken from the experiment's job
        other = "step_000001" if status["best_checkpoint"] == "step_000002" else "step_000002"
        run(AB_TEST_FIRST, {**ns, "current": f"{job_id}:{other}", "new": ns["best_checkpoint"]}, "ab test")
        dep = client.get_deployment("my-agent-v1")
        assert dep["arms"] == {"baseline": f"{run_dir}:{other}", "experiment": best} and dep["pid"] == pid  # loaded beside

        def sessions(names):  # real calls to the served checkpoints; the arm of each session
            from concurrent.futures import ThreadPoolExecutor

            def one(sid):
                req = urllib.request.Request(dep["base_url"] + "/chat/completions", method="POST", data=json.dumps(
                    {"model": "my-agent-v1", "messages": [{"role": "user", "content": "What is 2 + 2?"}]}).encode(),
                    headers={"Authorization": f"Bearer {ns['API_KEY']}", "Content-Type": "application/json",
                             "X-Agentboost-Session": sid})
                with urllib.request.urlopen(req, timeout=120) as r:
                    assert json.loads(r.read())["choices"][0]["message"]["role"] == "assistant"
                    return r.headers["X-Agentboost-Arm"]

            with ThreadPoolExecutor(8) as pool:
                return dict(zip(names, pool.map(one, names)))

        # 8 sessions a round: one batch of the engine
        first = sessions([f"a{i}" for i in range(8)])
        # the rollout's next step: the same checkpoints, a new split, live (the process and its sessions stay)
        changed = client.configure_ab_test(baseline_checkpoint=f"{job_id}:{other}", experiment_checkpoint=best,
                                           traffic_split=0.9)
        assert changed["split"] == 0.9 and changed["pid"] == pid
        again = sessions(["a0", "a1"] + [f"b{i}" for i in range(6)])
        assert again["a0"] == first["a0"] and again["a1"] == first["a1"]  # sticky
        assert sum(a == "experiment" for a in first.values()) <= 2
        assert sum(again[f"b{i}"] == "experiment" for i in range(6)) >= 4
        report = client.get_deployment("my-agent-v1")["report"]
        assert [(p["split"], p["sessions"]) for p in report["split"]["phases"]] == [(0.1, 8), (0.9, 6)]
        calls = list(first.values()) + list(again.values())
        assert {a: report["arms"][a]["calls"] for a in report["arms"]} == {
            "baseline": calls.count("baseline"), "experiment": calls.count("experiment")}
        assert report["arms"]["baseline"]["errors"] == report["arms"]["experiment"]["errors"] == 0
        events = [json.loads(line) for line in Path(dep["events"]).read_text().splitlines()]
        assert [(e["from"], e["to"], e["by"]) for e in events if e["event"] == "split"] == [
            (0.1, 0.9, "job service: configure_ab_test")]
    finally:
        registry._DEFAULTS.pop("my-agent-v1", None)
        svc.stop()
    # the deployment's process stopped with the service
    rec = json.loads((tmp_path / "jobs" / "deployments" / "my-agent-v1" / "production" / "deployment.json").read_text())
    assert rec["state"] == "stopped" and not Path(f"/proc/{dep['pid']}").exists()
