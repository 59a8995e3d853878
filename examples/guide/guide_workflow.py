#!/usr/bin/env python3
"""The GRPO guide's Quick Start and Phases 1-4, as its readers write them, against a local job
service (``agentboost jobs serve``, started here) on the embedded SmolLM2-135M, on CPU.

    python examples/guide/guide_workflow.py                 # 2 iterations, a few minutes on CPU
    python examples/guide/guide_workflow.py --iterations 20 # longer

Changed from the guide: the imports, the URL and key (a service on loopback, its token file), the
sizes (iterations, batch, trajectories, tokens), and the webhook receiver (a local one). The agent
type ``my-agent-v1`` is given the guide's custom reward (``my_rewards.py``) with
``set_agent_strategy``. docs/from-the-guide.md maps every name and says how each figure is computed.
"""

import argparse
import asyncio
import http.server
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import websockets

from agentboost import GRPOConfig  # the guide: from agentcore.training import GRPOConfig
from agentboost.jobs.client import TrainingClient  # the guide: from agentcore.sdk import TrainingClient

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import my_rewards  # noqa: E402  (the guide's custom reward block: registers "my_reward")


def start_service(root: Path) -> tuple[subprocess.Popen, str]:
    """``agentboost jobs serve`` on a free loopback port; this folder on its jobs' PYTHONPATH."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "agentboost.cli", "jobs", "serve", "--root", str(root),
                             "--port", str(port), "--allow-private-webhooks"], env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("the job service did not start")


def start_receiver() -> str:
    """A webhook receiver on loopback that prints what it gets (the guide's myapp.com)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            print(f"[webhook] {event['event_type']}: iteration {event.get('iteration')}/{event.get('total')}")
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/webhooks/training"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--root", default=None, help="jobs directory (default: a temporary one)")
    args = ap.parse_args()
    root = Path(args.root or tempfile.mkdtemp(prefix="agentboost-guide-"))
    service, BASE_URL = start_service(root)
    os.environ["AGENTBOOST_API_KEY"] = (root / "token").read_text().strip()
    my_rewards.registry.set_agent_strategy("my-agent-v1", "my_reward")
    try:
        run_guide(BASE_URL, start_receiver(), args.iterations)
    finally:
        service.terminate()
        service.wait(30)
    print(f"\njobs, runs and exports are in {root}")


def run_guide(BASE_URL: str, HOOK_URL: str, iterations: int) -> None:
    # ---- Phase 1 / Quick Start step 1: training data with expected outcomes, 20% held out ----
    rng = random.Random(0)
    pairs = [(rng.randint(1, 20), rng.randint(1, 20)) for _ in range(30)]
    data = [{"query": f"What is {a} + {b}? Answer with the number.", "expected_outcome": {"result": a + b,
                                                                                         "test_passed": True}}
            for a, b in pairs]
    training_data, eval_data = data[:24], data[24:]

    # ---- Quick Start step 2 / Phase 2: configure (conservative, smaller) ----
    config = GRPOConfig(
        n_iterations=iterations,    # Number of training iterations
        batch_size=2,               # Queries per iteration
        n_trajectories_per_query=2, # Trajectories to generate per query
        learning_rate=0.0001,       # Policy gradient learning rate
        max_budget_usd=50.00,       # Training cost limit
        checkpoint_interval=1,      # Save checkpoint every N iterations
    )
    config.cost_per_hour_usd = 3.6  # what an hour of this machine costs: cost_usd = wall time x this
    config.overrides = {"sampling.max_new_tokens": 24, "validation.max_new_tokens": 24, "validation.k": 1}

    # ---- Quick Start step 3: start training ----
    client = TrainingClient(
        base_url=BASE_URL,
        api_key=os.getenv("AGENTBOOST_API_KEY")
    )

    # Start training job
    job = client.start_training(
        agent_id="my-agent-v1",
        config=config,
        training_data=training_data,
        evaluation_data=eval_data  # 20% held-out for validation
    )

    print(f"Training job started: {job['job_id']}")
    job_id = job["job_id"]

    # ---- Phase 3: monitor with webhooks ----
    client.subscribe_webhook(
        events=["training.job.progress", "training.budget.warning"],
        url=HOOK_URL
    )

    # ---- Real-time monitoring (the guide's WebSocket block), beside the polling loop ----
    async def monitor_training(job_id):
        uri = f"{BASE_URL.replace('http', 'ws', 1)}/training/ws/{job_id}"

        async with websockets.connect(uri, additional_headers={"Authorization": f"Bearer {os.getenv('AGENTBOOST_API_KEY')}"}) as ws:
            async for message in ws:
                event = json.loads(message)

                if event["type"] == "progress":
                    print(f"Iteration {event['iteration']}/{event['total']}")
                    print(f"Loss: {event['loss']:.4f}")

                elif event["type"] == "checkpoint":
                    print(f"Checkpoint saved: {event['checkpoint_id']}")

    live = threading.Thread(target=lambda: asyncio.run(monitor_training(job_id)), daemon=True)
    live.start()

    # ---- Quick Start step 4: monitor progress ----
    while True:
        status = client.get_status(job["job_id"])

        print(f"Progress: {status['progress_percent']}%")
        print(f"Current Loss: {status['metrics']['train_loss']:.3f}")
        print(f"Validation Accuracy: {status['metrics']['validation_accuracy']:.2%}")
        print(f"Budget Used: ${status['cost_usd']} / ${status['budget_usd']}")

        if status["status"] in ["completed", "failed", "cancelled"]:
            break

        time.sleep(5)  # the guide polls every minute
    live.join(30)

    # Phase 3, "check convergence"
    status = client.get_status(job_id)
    if status["metrics"]["train_loss"] < 0.1:
        print("Training converged!")
    if status["status"] != "completed":
        raise SystemExit(f"the job ended {status['status']}: {status.get('error', '')[-2000:]}")

    # ---- Quick Start step 5: evaluate ----
    # Run evaluation on best checkpoint
    eval_result = client.evaluate(job["job_id"])

    print(f"Success Rate: {eval_result['metrics']['success_rate']:.2%}")
    print(f"Improvement: +{eval_result['baseline_comparison']['success_rate_improvement']:.2%}")

    if eval_result['baseline_comparison']['statistically_significant']:
        print("✅ Improvement is statistically significant!")

    # ---- Phase 4: evaluation ----
    # Evaluate on held-out data
    eval_metrics = client.evaluate(job_id)

    # Key metrics
    success_rate = eval_metrics["metrics"]["success_rate"]
    avg_reward = eval_metrics["metrics"]["avg_reward"]
    improvement = eval_metrics["baseline_comparison"]["success_rate_improvement"]

    # Statistical significance
    p_value = eval_metrics["baseline_comparison"]["p_value"]
    significant = p_value < 0.05
    print(f"success rate {success_rate:.2%}, avg reward {avg_reward:.3f}, improvement {improvement:+.2%}, "
          f"p = {p_value:.3f} ({'significant' if significant else 'not significant'})")

    # ---- the complete pipeline's export ----
    trajectories = client.export_trajectories(
        job_id=job["job_id"],
        success_only=True,
        min_reward=0.7,
        limit=100
    )

    print(f"\nExported {len(trajectories['trajectories'])} high-quality trajectories")


if __name__ == "__main__":
    main()
