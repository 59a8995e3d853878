"""The worker pool: every submitted task yields exactly one episode, whatever happens."""

import asyncio
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from agentboost.agents.strands_agent import StrandsAgentSpec
from agentboost.environments.strands_env import StrandsEnv
from agentboost.rewards.groups import apply_group_policy
from agentboost.rollout.pool import StrandsProcessPool
from agentboost.sampling.spec import SamplerSpec
from agentboost.testing.faults import EXPECTED_STATUS, FAULT_TOOLS
from agentboost.testing.processes import processes_with_marker, wait_no_processes

REWARD = "agentboost.testing.faults:fault_reward"


@pytest.fixture
def marker(monkeypatch):
    m = f"AGENTBOOST_TEST_MARK_{uuid.uuid4().hex}"
    monkeypatch.setenv(m, "1")  # inherited by every worker and what its tools start
    yield m
    assert wait_no_processes(m) == [], "processes left behind"


def make_pool(smollm2_path, **kw):
    spec = StrandsAgentSpec(tools=FAULT_TOOLS, timeout_s=kw.pop("timeout_s", 2.0))
    sampler = SamplerSpec(tokenizer=str(smollm2_path), kind="scripted",
                          script="agentboost.testing.faults:fault_script",
                          script_kwargs=kw.pop("script_kwargs", {}))
    env = StrandsEnv(reward=REWARD, failed_reward=kw.pop("failed_reward", 0.0))
    return StrandsProcessPool(spec, sampler, env, **kw)


@pytest.mark.slow
def test_every_fault_gives_its_status_and_groups_stay_whole(smollm2_path, marker):
    kinds = [k for k in EXPECTED_STATUS if k not in (None, "loop_block")]
    tasks = []
    for i, kind in enumerate(kinds + [None] * 3):
        q = f"What is 17 + 25? (g{i})" + (f" FAULT:{kind}" if kind else "")
        tasks.append({"task_id": f"g{i}", "question": q, "answer": "42", "fault": kind})
    with make_pool(smollm2_path, workers=2, slots=4, hard_timeout_s=8, failed_reward=-1.0) as pool:
        episodes = pool.run(tasks, samples=2)
        stats = pool.stats()
    assert len(episodes) == 2 * len(tasks)
    for k, ep in enumerate(episodes):
        task = tasks[k // 2]
        assert ep.group_id == task["task_id"]
        assert ep.status == EXPECTED_STATUS[task["fault"]], (task["fault"], ep.status, ep.error)
        if ep.failed:  # the pool only moves episodes: failures arrive unscored
            assert ep.error and ep.reward is None
        else:
            assert ep.reward == 1.0
    by_fault = {tasks[k // 2]["fault"]: ep for k, ep in enumerate(episodes)}
    assert "SIGKILL" in by_fault["worker_kill"].error
    assert "injected reward failure" in by_fault["reward_raise"].error
    assert not by_fault["tool_raise"].tool_calls[0].ok
    assert stats["worker_deaths"] >= 1 and stats["workers_alive"] == 2
    kept, report = apply_group_policy(episodes, "keep", group_size=2, failed_reward=-1.0)
    assert len(kept) == len(episodes) and report.uneven_groups == 0
    assert report.groups_with_failures == 5
    for ep in episodes:  # the group policy gave every failure its reward
        if ep.failed:
            assert ep.reward == -1.0 and ep.reward_components == {"failed": -1.0}
    kept, report = apply_group_policy(episodes, "drop", group_size=2)
    assert report.dropped_groups == 5 and len(kept) == 2 * 4  # tool_raise + 3 clean groups


@pytest.mark.slow
def test_event_loop_blocker_is_killed_at_the_hard_deadline_and_neighbours_rerun(smollm2_path, marker):
    tasks = [{"task_id": "block", "question": "x FAULT:loop_block", "fault": "loop_block"},
             {"task_id": "fine", "question": "What is 17 + 25?", "fault": None}]
    with make_pool(smollm2_path, workers=1, slots=2, hard_timeout_s=4,
                   script_kwargs={"latency_s": 0.5}) as pool:
        block, fine = pool.run(tasks)
    assert block.status == "timeout" and "hard deadline" in block.error
    assert fine.status == "ok" and fine.reward == 1.0
    assert fine.metadata.get("earlier_failures"), "the bystander ran again, and says why"


def test_close_with_episodes_in_flight_returns_them_and_leaves_no_process(smollm2_path, marker):
    pool = make_pool(smollm2_path, workers=2, slots=2, stop_grace_s=1.0, timeout_s=60)
    futures = [pool.submit({"task_id": f"h{i}", "question": "FAULT:tool_hang", "fault": "tool_hang"})
               for i in range(3)]
    queued = [pool.submit({"task_id": f"q{i}", "question": "What is 1 + 1?"}) for i in range(3)]
    deadline = time.time() + 30
    while pool.stats()["busy_slots"] < 3 and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    assert len(processes_with_marker(marker)) >= 2
    pool.close()
    statuses = [f.result(timeout=5).status for f in futures + queued]
    assert len(statuses) == 6
    assert set(statuses) <= {"crashed", "error", "ok"}
    assert [f.result().error for f in futures if f.result().status == "crashed"][0].startswith("the pool was closed")


@pytest.mark.slow
def test_exception_in_caller_and_ctrl_c_leave_no_orphans(smollm2_path, marker, tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(f"""
        import signal, sys, time
        from agentboost.agents.strands_agent import StrandsAgentSpec
        from agentboost.rollout.pool import StrandsProcessPool
        from agentboost.sampling.spec import SamplerSpec
        from agentboost.testing.faults import FAULT_TOOLS

        def main():
            # Ctrl-C as in a terminal, however the test run was started: a shell that starts a job in
            # the background without job control hands it SIGINT ignored, and Python keeps that
            signal.signal(signal.SIGINT, signal.default_int_handler)
            spec = StrandsAgentSpec(tools=FAULT_TOOLS, timeout_s=600)
            sampler = SamplerSpec(tokenizer={str(smollm2_path)!r}, kind="scripted",
                                  script="agentboost.testing.faults:fault_script")
            with StrandsProcessPool(spec, sampler, workers=2, slots=2, stop_grace_s=1) as pool:
                futs = [pool.submit({{"task_id": str(i), "question": "FAULT:tool_hang"}}) for i in range(4)]
                while pool.stats()["running"] < 4:  # started in the workers, not just dispatched
                    time.sleep(0.05)
                print("busy", flush=True)
                if sys.argv[1] == "raise":
                    raise RuntimeError("caller failed")
                futs[0].result()

        if __name__ == "__main__":
            main()
    """))
    for mode in ("raise", "sigint", "sigkill"):
        proc = subprocess.Popen([sys.executable, str(script), mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=str(tmp_path))
        assert proc.stdout.readline().strip() == "busy"
        assert len(processes_with_marker(marker)) >= 3  # the driver and its workers
        if mode == "sigint":
            proc.send_signal(signal.SIGINT)
        elif mode == "sigkill":
            proc.kill()  # no cleanup code runs: workers notice the closed pipe themselves
        proc.wait(timeout=30)
        if mode == "raise":
            assert "caller failed" in proc.stderr.read()
        assert wait_no_processes(marker, timeout=15) == [], mode


@pytest.mark.slow
def test_recycling_back_pressure_and_async_use(smollm2_path, marker):
    with make_pool(smollm2_path, workers=1, slots=2, recycle_after=2, max_queue=3) as pool:
        tasks = [{"task_id": f"t{i}", "question": "What is 17 + 25?"} for i in range(7)]
        # back-pressure: the queue holds at most 3 waiting tasks
        futs = []
        for t in tasks:
            f = pool.submit(t, block=False)
            if f is None:
                break
            futs.append(f)
        assert len(futs) < len(tasks)
        assert all(f.result(timeout=60).status == "ok" for f in futs)

        async def use_from_async_code():
            return await pool.arun(tasks[:5])

        eps = asyncio.run(use_from_async_code())
        assert [ep.status for ep in eps] == ["ok"] * 5
        stats = pool.stats()
    assert stats["worker_starts"] >= 3  # recycled after every 2 episodes
    assert stats["worker_deaths"] == 0
    assert stats["episodes"]["ok"] == len(futs) + 5
    assert set(stats["latency_s"]) == {"p50", "p90", "p99"}


def test_bad_worker_setup_fails_every_task_with_the_reason(tmp_path, smollm2_path, marker):
    spec = StrandsAgentSpec(tools=FAULT_TOOLS)
    sampler = SamplerSpec(tokenizer=str(tmp_path / "no-tokenizer"), kind="scripted",
                          script="agentboost.testing.faults:fault_script")
    with StrandsProcessPool(spec, sampler, workers=1, slots=1) as pool:
        eps = pool.run([{"task_id": "a", "question": "q"}, {"task_id": "b", "question": "q"}])
        assert pool.broken and "worker setup failed" in pool.broken
    assert [ep.status for ep in eps] == ["error", "error"]
    assert all("worker setup failed" in ep.error for ep in eps)
