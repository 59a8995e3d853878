"""Sessions of a stock Strands agent against a served policy (``agentboost serve``, or a continual
loop's deployment): each session is one task, its own conversation id (``X-Agentboost-Session``),
and, when it ends, its outcome is posted to ``/v1/feedback`` with the task row, so the server
scores the final answer with the run's reward (host-side). Any agent does the same by base URL;
this one is what the docs run (``agentboost.testing.users``).

    python examples/deploy/ab_clients.py --url http://127.0.0.1:8000/v1 --token T \
        --tasks examples/quickstart/data/test.jsonl --sessions 20
    # follow a continual loop until it stops, leaving every 5th session without an outcome
    python examples/deploy/ab_clients.py --url ... --tasks ... --until-down --feedback-every 5
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import urllib.request


def wait_until_up(url: str, token: str | None, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            req = urllib.request.Request(url + "/models", headers={"Authorization": f"Bearer {token}"} if token else {})
            with urllib.request.urlopen(req, timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"{url} did not come up within {timeout_s:g} s")
            time.sleep(0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="the server's base URL, .../v1")
    ap.add_argument("--token", help="its bearer token")
    ap.add_argument("--tasks", required=True, help="task file (JSONL with question and answer)")
    ap.add_argument("--max-tasks", type=int, help="the first N tasks only (each is then asked again and again)")
    ap.add_argument("--sessions", type=int, help="sessions to run (default: 20, or unlimited with --until-down)")
    ap.add_argument("--until-down", action="store_true", help="run sessions until the server stops answering")
    ap.add_argument("--concurrency", type=int, default=16, help="sessions at once (default: 16)")
    ap.add_argument("--feedback-every", type=int, default=1,
                    help="every N-th session posts no outcome (default: 1, every session posts one)")
    ap.add_argument("--system-prompt", help="the agent's system prompt (default: the run's, from --config)")
    ap.add_argument("--config", help="a training YAML whose agent.system_prompt the agent uses")
    args = ap.parse_args()
    from agentboost.tasks import load_tasks
    from agentboost.testing.users import drive_users

    prompt = args.system_prompt
    if prompt is None and args.config:
        from agentboost.run.config import load_config

        prompt = load_config(args.config, for_training=False).agent.system_prompt
    tasks = load_tasks(args.tasks)[: args.max_tasks]
    wait_until_up(args.url, args.token)
    sessions = args.sessions if args.sessions is not None else (None if args.until_down else 20)
    drive = asyncio.run(drive_users(args.url, args.token, tasks, sessions=sessions, concurrency=args.concurrency,
                                    feedback_every=args.feedback_every, system_prompt=prompt,
                                    until_down=args.until_down))
    by_arm: dict[str, list[float]] = {}
    for o in drive.outcomes:
        by_arm.setdefault(o["arm"], []).append(float(o["success"]))
    source = drive.outcomes[0]["source"] if drive.outcomes else "-"
    print(f"{drive.sessions} sessions ({drive.unrewarded} without an outcome), scored by {source}: " + ", ".join(
        f"{arm} {len(v)} sessions, success {sum(v) / len(v):.2f}" for arm, v in sorted(by_arm.items()))
        + f"; {len(drive.failures)} failed requests ({drive.stopped})")
    for f in drive.failures[:10]:
        print(f"failed: {f}", file=sys.stderr)
    if drive.failures:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
