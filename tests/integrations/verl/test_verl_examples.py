"""The veRL example scripts: their overrides compose with veRL's own ppo_trainer config through
Hydra and pass main_ppo's validation; their agent-loop YAMLs load; their data preparers write rows
the loops run; and the DeepCoder script's own configuration drives veRL's real worker on CPU
(SmolLM2's tokenizer, scripted turns, the real sandbox and code reward)."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from helpers import REPO, dry_run, dry_run_refused, printed_overrides

from agentboost.integrations.verl.config import compose_ppo_config, validate_ppo_config

EXAMPLES = {
    "deepcoder": (REPO / "examples/deepcoder/train_deepcoder_with_strands.sh", "strands_coder"),
    "math": (REPO / "examples/math/train_math_with_strands.sh", "strands_math"),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_scripts_overrides_compose_with_verls_config_and_pass_its_validation(name):
    from agentboost.integrations.verl.agent_loop import _configured

    script, agent_name = EXAMPLES[name]
    lines = dry_run(script)
    cfg = compose_ppo_config(lines)
    validate_ppo_config(cfg)
    rollout = cfg.actor_rollout_ref.rollout
    assert cfg.actor_rollout_ref.model.path == "Qwen/Qwen3-4B" and rollout.n == 8 and rollout.name == "vllm"
    assert cfg.algorithm.adv_estimator == "grpo" and cfg.trainer.n_gpus_per_node == 8
    assert cfg.data.train_files.endswith("verl_train.parquet") and cfg.data.val_files.endswith("verl_test.parquet")
    # the agent-loop YAML the script names exists, and its entry (the one the preparer's rows name) loads
    entries = yaml.safe_load(Path(rollout.agent.agent_loop_config_path).read_text())
    (entry,) = [e for e in entries if e["name"] == agent_name]
    spec, env = _configured(json.dumps(entry["agent"], sort_keys=True), json.dumps(entry["env"], sort_keys=True))
    assert env.reward in ("code", "math") and spec.tools
    # the whole episode fits the row veRL pads to
    assert spec.max_response_tokens <= rollout.response_length and entry["max_new_tokens"] <= rollout.response_length
    # a user's extra override wins, and a misspelt key is refused by Hydra
    assert compose_ppo_config(printed_overrides(script, "actor_rollout_ref.rollout.n=4")).actor_rollout_ref.rollout.n == 4
    with pytest.raises(Exception, match="no_such_key"):
        compose_ppo_config(printed_overrides(script, "actor_rollout_ref.rollout.no_such_key=1"))


def test_the_scripts_dry_run_refuses_what_main_ppo_would_in_one_line():
    # (both scripts' DRY_RUN is examples/verl_main_ppo.sh's: the math script's stands for both) the
    # overrides first, then one line naming what veRL refused
    printed, why = dry_run_refused(EXAMPLES["math"][0], "actor_rollout_ref.rollout.no_such_key=1")
    assert printed[-1] == "actor_rollout_ref.rollout.no_such_key=1" and "Traceback" not in why
    verdict = [line for line in why.splitlines() if line.startswith("veRL config:")]
    assert len(verdict) == 1 and "Could not override 'actor_rollout_ref.rollout.no_such_key'" in verdict[0], why


def test_validation_refuses_batch_sizes_the_gpus_cannot_split():
    # the check is live: 128 tasks x 8 episodes cannot be split over 7 GPUs without dynamic batches
    printed = printed_overrides(EXAMPLES["math"][0], "actor_rollout_ref.actor.use_dynamic_bsz=False",
                                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
                                "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
                                "trainer.n_gpus_per_node=7")
    with pytest.raises(AssertionError, match="real_train_batch_size"):
        validate_ppo_config(compose_ppo_config(printed))


def test_math_preparer_writes_rows_for_the_math_loop(tmp_path):
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    train.write_text("".join(json.dumps({"problem": f"What is {i}*3?", "answer": str(3 * i)}) + "\n" for i in range(6)))
    test.write_text(json.dumps({"problem": "What is 2^5?", "solution": "It is \\boxed{32}."}) + "\n")
    res = subprocess.run([sys.executable, str(REPO / "examples/math/prepare_math_data.py"), "--out", str(tmp_path / "o"),
                          "--train-source", str(train), "--test-source", str(test)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = pq.read_table(tmp_path / "o/verl_train.parquet").to_pylist()
    (val,) = pq.read_table(tmp_path / "o/verl_test.parquet").to_pylist()
    assert len(rows) == 6 and all(r["agent_name"] == "strands_math" for r in rows)
    assert json.loads(val["extra_info"]["agentboost_task"])["answer"] == "32"


def test_the_deepcoder_scripts_config_runs_its_agent_in_verls_worker(tmp_path, smollm2_path):
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from agentboost.integrations.verl.server_client import ForwardingServerClient
    from agentboost.sampling.scripted import ScriptedSampler

    src = tmp_path / "deepcoder.jsonl"
    problems = [{"problem": "Read two integers and print their sum.",
                 "tests": json.dumps({"inputs": ["1 2\n", "3 4\n", "10 5\n"], "outputs": ["3\n", "7\n", "15\n"]})},
                {"problem": "Read an integer n and print n squared.",
                 "tests": json.dumps({"inputs": ["3\n", "5\n"], "outputs": ["9\n", "25\n"]})}]
    src.write_text("".join(json.dumps(p) + "\n" for p in problems))
    data = tmp_path / "data"
    res = subprocess.run([sys.executable, str(REPO / "examples/deepcoder/prepare_deepcoder_data.py"), "--out", str(data),
                          "--source", str(src), "--configs", "taco", "--test-fraction", "0"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]

    # the script's own overrides, with the small model and the prepared data
    cfg = compose_ppo_config(printed_overrides(EXAMPLES["deepcoder"][0], MODEL_PATH=str(smollm2_path), DATA_DIR=str(data)))
    tok = AutoTokenizer.from_pretrained(str(smollm2_path))
    sum_code = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"

    def turn(prompt_ids, index):  # the sum problem is solved after one test run; the square one is not
        text = tok.decode(prompt_ids)
        if "<tool_response>" not in text:
            return sum_code + '\n<tool_call>\n{"name": "test_code", "arguments": {}}\n</tool_call>'
        return ("Final:\n" + sum_code) if "their sum" in text else "Final:\n```python\nprint(int(input()) * 2)\n```"

    client = ForwardingServerClient(ScriptedSampler(turn, tok))
    worker = AgentLoopWorker(cfg, llm_client=client)
    ds = RLHFDataset(data_files=[cfg.data.train_files], tokenizer=tok, config=cfg.data)
    rows = [ds[i] for i in range(len(ds))]
    from test_verl_agent_loop import batch, unpack

    tasks = [json.loads(r["extra_info"]["agentboost_task"]) | {"agent": r["agent_name"]} for r in rows]
    out = unpack(asyncio.run(worker.generate_sequences(batch(tasks))))
    by_q = {t["question"].split("\n")[0]: o for t, o in zip(tasks, out)}
    solved, unsolved = by_q["Read two integers and print their sum."], by_q["Read an integer n and print n squared."]
    assert solved["agentboost_status"] == unsolved["agentboost_status"] == "ok"
    assert solved["agentboost_reward"] == 1.0 and unsolved["agentboost_reward"] == 0.0
    assert solved["agentboost_tool_calls"] == 1 and solved["agentboost_tool_errors"] == 0
    assert "VALIDATION_SUCCESS" in tok.decode(solved["response"])
    # the script's sampling parameters reached the server, and the YAML's per-turn limit
    assert all(r["sampling_params"]["temperature"] == 1.0 and r["sampling_params"]["max_tokens"] <= 8192
               for r in client.requests)


@pytest.mark.parametrize("credentials, logger", [
    ({}, ["console", "tensorboard"]),
    ({"WANDB_API_KEY": "k"}, ["console", "wandb"]),
    ({"WANDB_MODE": "offline"}, ["console", "wandb"]),
    ({"NETRC": "NETRC_FILE"}, ["console", "wandb"]),  # `wandb login`'s ~/.netrc entry
])
def test_the_scripts_log_to_wandb_only_with_its_credentials(tmp_path, credentials, logger):
    netrc = tmp_path / "netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password k\n")
    env = {k: (str(netrc) if v == "NETRC_FILE" else v) for k, v in credentials.items()}
    # the veRL scripts (their overrides composed with veRL's config) ...
    cfg = compose_ppo_config(printed_overrides(EXAMPLES["math"][0], **env))
    assert list(cfg.trainer.logger) == logger
    # (the note is loggers.sh's, before any Python: PYTHON=true skips DRY_RUN's validation)
    res = subprocess.run(["bash", str(EXAMPLES["deepcoder"][0])], capture_output=True, text=True, check=True,
                         timeout=180, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHON": "true",
                                           "DRY_RUN": "1", **env})
    notes = [line for line in res.stderr.splitlines() if "W&B" in line]
    assert len(notes) == (0 if "wandb" in logger else 1)
    # ... and the rLLM script (its python replaced by a stub that records the overrides)
    stub = tmp_path / "bin" / "python3"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(f"#!/bin/bash\nshift\nprintf '%s\\n' \"$@\" > {tmp_path}/args.txt\n")
    stub.chmod(0o755)
    subprocess.run(["bash", str(REPO / "examples/deepcoder/train_deepcoder_with_strands_rllm.sh")], check=True,
                   capture_output=True, timeout=60,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHON": str(stub), **env})
    args = (tmp_path / "args.txt").read_text().splitlines()
    assert f"trainer.logger={json.dumps(logger, separators=(',', ':'))}" in args
