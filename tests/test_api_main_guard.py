"""The Python API snippet (docs/python-api.md) run as a script without a main guard: spawned
workers import the script again; the run must fail with a clear error within a minute, never hang (issue 26)."""

import os
import subprocess
import sys
import textwrap
import time

import pytest


@pytest.mark.slow
def test_the_api_snippet_without_a_main_guard_fails_clearly_within_60_s(tmp_path, smollm2_path):
    script = tmp_path / "train_script.py"
    script.write_text(textwrap.dedent(f"""
        import agentboost
        from agentboost import GRPOConfig
        from agentboost.agents.strands_agent import StrandsAgentSpec

        config = GRPOConfig(n_iterations=2, batch_size=2, n_trajectories_per_query=2, learning_rate=1e-4,
                            checkpoint_interval=1, max_steps_per_trajectory=2,
                            overrides={{"sampling.max_new_tokens": 16, "validation.at_start": False}})
        run = agentboost.train(config,
                               training_data=[{{"query": "What is 17 + 25?", "expected_outcome": "42"}},
                                              {{"query": "What is 2 + 3?", "expected_outcome": "5"}}],
                               agent=StrandsAgentSpec(tools=["agentboost.tools.calculator:calculator"]),
                               reward="exact_answer", run_dir={str(tmp_path / "run")!r})
        print("finished", run)
    """))
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"]})  # the model cache lives in HOME
    elapsed = time.monotonic() - t0
    assert r.returncode != 0 and "finished" not in r.stdout, r.stdout[-2000:]
    assert 'if __name__ == "__main__":' in r.stderr, r.stderr[-3000:]
    assert elapsed < 60, f"took {elapsed:.0f} s"
