"""The rLLM path against a real rLLM@1fc3c4b and its veRL fork, where they are installed.

rLLM is not on PyPI and declares a GPU stack; `bash setup.sh --rllm` builds a CPU environment with
both (.venv-rllm, from ../shared/upstream; docs/rllm.md, "What is verified where"). Run from another
interpreter, the suite runs this file there (test_rllm_environment.py); where there is none, the
tests skip naming the install (and fail under CI=true, which builds it).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import shutil
from pathlib import Path

import pytest
import rllm_fakes as fakes
from helpers import QWEN3_DIR, REPO, AppThread, rllm_or_skip

from agentboost.integrations.rllm import patcher as rp

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True, scope="module")
def _rllm():
    rllm_or_skip()


@pytest.fixture
def real_copy(tmp_path):
    """Copies of the installed packages' target files (the real bytes; the kept originals too where
    the installation is patched, and then reverted in the copy), patched and reverted there rather
    than in the user's environment."""
    roots = rp.find_roots()
    copy = rp.Roots(rllm=tmp_path / "rllm_root", verl=tmp_path / "verl_root")
    for t in rp.TARGETS:
        for rel in (t.relpath, t.upstream_relpath):
            src, dst = roots.of(t.package) / rel, copy.of(t.package) / rel
            if src.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
        (copy.of(t.package) / t.package / "__init__.py").touch()
    _revert_if_patched(copy)
    return roots, copy


def _revert_if_patched(roots) -> None:
    p = rp.Patcher(roots, out=lambda s: None)
    if any(st.state != rp.ORIGINAL for st in p.status()):
        assert p.revert() == 0


def test_installed_files_are_the_known_versions(real_copy):
    roots, _ = real_copy
    p = rp.Patcher(roots, out=lambda s: None)
    states = {st.target.relpath: st.state for st in p.status()}
    assert set(states.values()) <= {rp.ORIGINAL, rp.PATCHED}, states


def test_patch_status_revert_on_the_real_files(real_copy, capsys):
    roots, copy = real_copy
    originals = {t.relpath: (copy.of(t.package) / t.relpath).read_bytes() for t in rp.TARGETS}
    args = ["--rllm-root", str(copy.rllm), "--verl-root", str(copy.verl)]
    assert rp.main(args + ["--status"]) == 0
    assert capsys.readouterr().out.count(rp.ORIGINAL) == 3
    assert rp.main(args) == 0
    assert rp.main(args) == 0 and "nothing to do" in capsys.readouterr().out
    assert rp.main(args + ["--revert"]) == 0
    for t in rp.TARGETS:
        assert (copy.of(t.package) / t.relpath).read_bytes() == originals[t.relpath]
        assert not (copy.of(t.package) / t.upstream_relpath).exists()


def _upstream(module: str):
    """The real upstream module: the kept original when the installation is patched."""
    try:
        return importlib.import_module(module + "_upstream")
    except ImportError:
        return importlib.import_module(module)


def test_stand_ins_match_the_real_interfaces():
    eng = _upstream("rllm.engine.agent_execution_engine")
    names = lambda f: [p for p in inspect.signature(f).parameters if p != "_ray_trace_ctx"]  # noqa: E731
    assert names(eng.AgentExecutionEngine.__init__) == fakes.ENGINE_INIT_PARAMS
    assert names(eng.AgentExecutionEngine.trajectory_generator) == fakes.TRAJECTORY_GENERATOR_PARAMS
    assert names(eng.AgentExecutionEngine.update_envs_and_agents) == fakes.UPDATE_ENVS_AND_AGENTS_PARAMS
    tr = _upstream("rllm.trainer.verl.agent_ppo_trainer")
    assert names(tr.AgentPPOTrainer.__init__) == fakes.TRAINER_INIT_PARAMS
    assert names(tr.AgentPPOTrainer._transform_agent_trajectories) == fakes.TRANSFORM_PARAMS
    assert names(tr.AgentPPOTrainer.visualize_trajectory) == fakes.VISUALIZE_PARAMS
    from rllm.agents.agent import BaseAgent
    from rllm.environments.base.base_env import BaseEnv

    assert BaseAgent.__abstractmethods__ == fakes.BASE_AGENT_ABSTRACT
    assert BaseEnv.__abstractmethods__ == fakes.BASE_ENV_ABSTRACT
    source = inspect.getsource(eng.AgentExecutionEngine.run_agent_trajectory_async)
    for key in fakes.TOKEN_TRAJECTORY_KEYS - {"idx"}:
        assert f'"{key}"' in source, key
    transform = inspect.getsource(tr.AgentPPOTrainer._transform_agent_trajectories)
    for key in fakes.TRAJECTORY_BATCH_KEYS:
        assert f'"{key}"' in transform, key
    if importlib.util.find_spec("vllm") is not None:
        srv = _upstream("verl.workers.rollout.vllm_rollout.vllm_async_server")
        cls = srv.AsyncvLLMServer.__ray_actor_class__
        assert names(cls.__init__) == fakes.SERVER_INIT_PARAMS
        assert names(cls.completions) == fakes.SERVER_COMPLETIONS_PARAMS


@pytest.mark.parametrize("cpu_smoke", [False, True])
def test_the_scripts_dry_run_validates_its_whole_configuration(tmp_path, cpu_smoke):
    """``DRY_RUN=1`` prints the script's overrides (every one a key of rLLM's ppo_trainer config, or
    added with +), then composes them and validates them as the run would
    (agentboost/integrations/rllm/config.py), CPU_SMOKE=1's overrides too; a refused one is one line."""
    import os
    import subprocess
    import sys

    from agentboost.integrations.rllm.config import compose_rllm_config

    script = str(REPO / "examples/deepcoder/train_deepcoder_with_strands_rllm.sh")
    env = dict(os.environ, DRY_RUN="1", PYTHON=sys.executable)
    if cpu_smoke:
        env.update(CPU_SMOKE="1", SMOKE_DIR=str(tmp_path))
    extra = [] if cpu_smoke else ["actor_rollout_ref.rollout.no_such_key=1"]
    for args in ([], extra) if extra else ([],):
        r = subprocess.run(["bash", script, *args], env=env, capture_output=True, text=True, timeout=300)
        if not args:
            assert r.returncode == 0 and "pass its validation and agentboost's" in r.stderr, r.stderr[-3000:]
            printed = [a for a in r.stdout.splitlines() if a]
        else:  # refused, in one line naming the key, after the overrides
            why = [line for line in r.stderr.splitlines() if line.startswith("rLLM config:")]
            assert r.returncode == 1 and len(why) == 1 and "no_such_key" in why[0] and "Traceback" not in r.stderr, r.stderr
    cfg = compose_rllm_config(printed)
    assert cfg.actor_rollout_ref.rollout.mode == "async" and cfg.agent.use_stepwise_advantage is False
    assert cfg.agent.engine_args.agentboost_workers_per_server == (1 if cpu_smoke else 4)
    # Hydra's log and config go into the run's directory, not ./outputs
    assert "hydra.run.dir=${trainer.default_local_dir}/hydra/${now:%Y-%m-%d_%H-%M-%S}" in printed
    if cpu_smoke:
        assert cfg.actor_rollout_ref.rollout.name == "agentboost_cpu" and cfg.agentboost.cpu is True
        assert cfg.trainer.n_gpus_per_node == 1 and cfg.trainer.total_training_steps == 3


@pytest.mark.parametrize("override, why", [
    ("actor_rollout_ref.actor.use_dynamic_bsz=False", "micro_batch_size_per_gpu"),  # the fork's own check
    ("actor_rollout_ref.rollout.mode=sync", "actor_rollout_ref.rollout.mode must be async"),  # agentboost's engine
    ("agent.use_stepwise_advantage=True", "agent.use_stepwise_advantage must be False"),
    ("agentboost.reward=no_such_reward", "unknown reward 'no_such_reward'"),  # the agentboost block
    ("+agentboost.tools=[no_such_module:tool]", "no_such_module"),
])
def test_rllm_config_validation_refuses_what_the_run_would(capsys, override, why):
    from agentboost.integrations.rllm.config import main

    printed = _printed_overrides()
    assert main(list(printed)) == 0
    capsys.readouterr()
    assert main([*printed, override]) == 1
    err = capsys.readouterr().err  # (the fork's validation prints its notices there too)
    verdict = [line for line in err.splitlines() if line.startswith("rLLM config: ")]
    assert len(verdict) == 1 and why in verdict[0] and "Traceback" not in err, err


@functools.cache
def _printed_overrides() -> tuple[str, ...]:
    """The rLLM script's overrides as DRY_RUN=1 prints them, without its validation (run in-process
    by the test instead): PYTHON=true makes the validation step a no-op."""
    import subprocess

    res = subprocess.run(["bash", str(REPO / "examples/deepcoder/train_deepcoder_with_strands_rllm.sh")],
                         env={"PATH": "/usr/bin:/bin", "HOME": "/home/user", "DRY_RUN": "1", "PYTHON": "true"},
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return tuple(a for a in res.stdout.splitlines() if a)


# -- the patched engine, driven on CPU -------------------------------------------------------------
ENGINE_RUN = r"""
import asyncio, json, sys
sys.path[:0] = {paths!r}
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from rllm.agents.math_agent import MathAgent
from rllm.environments.base.single_turn_env import SingleTurnEnvironment
from rllm.engine.agent_execution_engine import AsyncAgentExecutionEngine
import rllm.engine.agent_execution_engine as mod
assert mod.__file__.startswith({site!r}), mod.__file__

class Waker:
    def __init__(self): self.server_addresses, self.events = [{address!r}], []
    def wake_up(self): self.events.append("wake")
    def sleep(self): self.events.append("sleep")

tok = AutoTokenizer.from_pretrained({model!r})
cfg = OmegaConf.create({{"actor_rollout_ref": {{"model": {{"path": {model!r}}}, "rollout": {{
    "tensor_model_parallel_size": 1, "n": 1, "response_length": 32, "temperature": 0.7, "top_p": 0.9,
    "val_kwargs": {{"temperature": 0.0, "top_p": 1.0}}}}}}}})
waker = Waker()
engine = AsyncAgentExecutionEngine(engine_name="verl", tokenizer=tok, rollout_engine=waker, config=cfg,
                                   max_prompt_length=512, max_response_length=64, max_steps=1)
tasks = [{{"question": "What is 2 + 2?", "ground_truth": "4"}}, {{"question": "What is 3 + 3?", "ground_truth": "6"}}]
engine.update_envs_and_agents([SingleTurnEnvironment.from_dict(dict(t)) for t in tasks], [MathAgent() for _ in tasks])

async def collect():
    return [x async for x in engine.trajectory_generator(timing_raw={{}}, mode="Token", meta_info={{"agent_rollout": True}})]

out = sorted(asyncio.run(collect()), key=lambda r: r["idx"])
print("RESULT " + json.dumps({{"events": waker.events, "rows": [
    {{k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in r.items() if k != "metrics"}} for r in out]}}, default=str))
"""


@pytest.fixture(scope="module")
def patched_copy(tmp_path_factory):
    """A copy of the installed rllm package with agentboost's overrides applied by the patcher."""
    roots = rp.find_roots()
    site = tmp_path_factory.mktemp("patched-site")
    shutil.copytree(roots.rllm / "rllm", site / "rllm", ignore=shutil.ignore_patterns("__pycache__"))
    rllm_targets = tuple(t for t in rp.TARGETS if t.package == "rllm")
    p = rp.Patcher(rp.Roots(rllm=site, verl=roots.verl), targets=rllm_targets, out=lambda s: None)
    if any(p.status_of(t).state != rp.ORIGINAL for t in rllm_targets):
        assert p.revert() == 0  # the installation is patched: its copy starts from the originals
    assert p.apply() == 0
    return roots, site


@pytest.fixture(scope="module")
def model_dir(smollm2_path, tmp_path_factory):
    return _loadable_model_dir(Path(smollm2_path), tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    if not (QWEN3_DIR / "tokenizer.json").is_file():
        pytest.skip(f"the Qwen3 tokenizer fixture is not at {QWEN3_DIR}")
    return _loadable_model_dir(QWEN3_DIR, tmp_path_factory.mktemp("tok"), "Qwen2TokenizerFast")


@pytest.fixture(scope="module")
def text_completions_server(qwen3_dir):
    """The model for rLLM's own (text-prompt) path: a deterministic completion, the same for the
    patched and the unpatched engine, in the vLLM response shape rLLM's router reads."""
    from aiohttp import web
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(qwen3_dir))
    seen = []

    async def completions(request):
        body = await request.json()
        seen.append(body)
        ids = tok.encode(" The answer is \\boxed{4}.", add_special_tokens=False) + [tok.eos_token_id]
        return web.json_response({"choices": [{"index": 0, "text": tok.decode(ids), "finish_reason": "stop",
                                               "logprobs": {"tokens": [f"token_id:{i}" for i in ids]}}]})

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    server = AppThread(app)
    yield f"127.0.0.1:{server.port}", seen
    server.stop()


@pytest.mark.slow
def test_non_strands_agent_results_identical_to_the_unpatched_engine(patched_copy, text_completions_server,
                                                                    qwen3_dir, tmp_path):
    import json
    import subprocess
    import sys

    roots, site = patched_copy
    address, seen = text_completions_server
    results = {}
    for name, first in (("unpatched", roots.rllm), ("patched", site)):
        script = tmp_path / f"run_{name}.py"
        script.write_text(ENGINE_RUN.format(paths=[str(first), str(roots.verl), str(REPO)], site=str(first),
                                            address=address, model=str(qwen3_dir)))
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
        results[name] = json.loads(line[len("RESULT "):])
    assert results["patched"] == results["unpatched"]
    assert results["patched"]["events"] == ["wake", "sleep"]
    assert len(results["patched"]["rows"]) == 2 and len(seen) == 4  # the server answered both runs


def _loadable_model_dir(model_dir: Path, tmp: Path, tokenizer_class: str = "GPT2TokenizerFast") -> Path:
    from agentboost.integrations.rllm.cpu import transformers4_model_dir

    return transformers4_model_dir(model_dir, tmp, tokenizer_class)


STRANDS_RUN = r"""
import asyncio, json, sys, time
sys.path[:0] = {paths!r}
from omegaconf import OmegaConf
from transformers import AutoTokenizer
import rllm.engine.agent_execution_engine as mod
assert mod.__file__.startswith({site!r}), mod.__file__
from rllm.trainer.verl.agent_ppo_trainer import AgentPPOTrainer
from rllm.parser.chat_template.parser import ChatTemplateParser
from agentboost.integrations.rllm.agents import StrandsRLLMAgent, StrandsRLLMEnv

class Waker:
    def __init__(self): self.server_addresses, self.events = [{address!r}], []
    def wake_up(self): self.events.append(("wake", time.time()))
    def sleep(self): self.events.append(("sleep", time.time()))

tok = AutoTokenizer.from_pretrained({model!r})
cfg = OmegaConf.create({{
    "actor_rollout_ref": {{"model": {{"path": {model!r}}}, "rollout": {{
        "tensor_model_parallel_size": 1, "n": 1, "response_length": 16, "temperature": 0.9, "top_p": 0.95,
        "top_k": -1, "val_kwargs": {{"temperature": 0.0, "top_p": 1.0, "top_k": -1}}}}}},
    "data": {{"max_prompt_length": 2048, "max_response_length": 256}},
    "trainer": {{"default_local_dir": {out!r}}}}})
waker = Waker()
engine = mod.AsyncAgentExecutionEngine(
    # rLLM's get_parser() rejects SmolLM2's template (its equivalence check); the Strands path renders
    # with agentboost's own renderer, so rLLM's generic parser is given to satisfy the constructor
    chat_parser=ChatTemplateParser(tok),
    engine_name="verl", tokenizer=tok, rollout_engine=waker, config=cfg, max_prompt_length=2048,
    max_response_length=256, agent_class=StrandsRLLMAgent, env_class=StrandsRLLMEnv,
    agentboost_workers_per_server=1, agentboost_slots=4)
tasks = [{{"task_id": "add", "question": "What is 2 + 2?", "answer": "4"}},
         {{"task_id": "broken", "no_question": "x", "answer": "0"}}]
agent_args = {{"tools": ["agentboost.tools.calculator:calculator"], "max_model_calls": 2,
               "max_response_tokens": 64, "timeout_s": 900.0}}
env_args = {{"strands_env": {{"reward": "exact_answer", "failed_reward": -1.0}}}}
engine.update_envs_and_agents([StrandsRLLMEnv.from_dict({{**t, **env_args}}) for t in tasks],
                              [StrandsRLLMAgent(**agent_args) for _ in tasks])

async def collect(meta):
    return [x async for x in engine.trajectory_generator(timing_raw={{}}, mode="Token", meta_info=meta)]

if __name__ == "__main__":
    try:
        train = sorted(asyncio.run(collect({{"agent_rollout": True}})), key=lambda r: r["idx"])
        val = sorted(asyncio.run(collect({{"validate": True, "agent_rollout": True}})), key=lambda r: r["idx"])
    finally:
        engine.close_agentboost_pools()
    trainer = AgentPPOTrainer.__new__(AgentPPOTrainer)  # its constructor starts Ray workers
    trainer.config, trainer.tokenizer, trainer.global_steps = cfg, tok, 1
    data, metrics = trainer._transform_agent_trajectories(train)
    row = lambda r: {{k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in r.items() if k != "metrics"}}
    print("RESULT " + json.dumps({{
        "events": waker.events, "train": [row(r) for r in train], "val": [row(r) for r in val],
        "batch_keys": sorted(data.batch.keys()), "attention_sums": data.batch["attention_mask"].sum(-1).tolist(),
        "statuses": list(data.non_tensor_batch["episode_status"]), "metrics": {{k: float(v) for k, v in metrics.items()}},
    }}, default=str))
"""


@pytest.mark.slow
def test_strands_agents_through_the_real_patched_engine(patched_copy, model_dir, tmp_path):
    import json
    import subprocess
    import sys

    from agentboost.episodes.record import Episode, check_episode
    from agentboost.sampling.completions_server import CompletionsServer
    from agentboost.sampling.hf_engine import HFEngine

    roots, site = patched_copy
    model = model_dir
    requests = []

    class RecordingServer(CompletionsServer):
        async def _completions(self, request):
            body = await request.json()
            requests.append((body.get("temperature"), body.get("top_p"), body.get("max_tokens")))
            return await super()._completions(request)

    engine = HFEngine.from_pretrained(str(model), max_batch_size=8)
    srv = RecordingServer(engine)
    url = srv.start_in_thread()
    try:
        script = tmp_path / "run_strands.py"
        script.write_text(STRANDS_RUN.format(paths=[str(site), str(roots.verl), str(REPO)], site=str(site),
                                             address=url.split("://", 1)[1], model=str(model), out=str(tmp_path)))
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=1500)
    finally:
        srv.stop_thread()
        engine.close()
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1][len("RESULT "):])

    (w1, t_w1), (s1, t_s1), (w2, t_w2), (s2, t_s2) = res["events"]
    assert (w1, s1, w2, s2) == ("wake", "sleep", "wake", "sleep")
    for phase, (lo, hi) in (("train", (t_w1, t_s1)), ("val", (t_w2, t_s2))):
        assert [row["idx"] for row in res[phase]] == [0, 1]  # one row per env, the failed one included
        ok, broken = (Episode.from_dict(row["episode"]) for row in res[phase])
        assert check_episode(ok) == [] and ok.calls, ok.error
        assert all(lo <= c.started_at <= hi for c in ok.calls)  # sampled only while awake
        seg = ok.segments[-1]
        assert res[phase][0]["prompt_tokens"] + res[phase][0]["response_tokens"] == seg.input_ids
        assert broken.status == "error" and res[phase][1]["trajectory_reward"] == -1.0
    train_params = {(t, p) for t, p, _ in requests[: sum(len(Episode.from_dict(x["episode"]).calls) for x in res["train"])]}
    assert train_params == {(0.9, 0.95)} and (0.0, 1.0) in {(t, p) for t, p, _ in requests}
    assert all(m <= 16 for _, _, m in requests)
    assert {"input_ids", "attention_mask", "position_ids", "responses", "prompts", "token_level_scores",
            "traj_mask"} <= set(res["batch_keys"])
    assert res["statuses"][1] == "error" and res["metrics"]["agentboost/episodes_error"] == 1
    first = res["train"][0]
    assert res["attention_sums"][0] == len(first["prompt_tokens"]) + len(first["response_tokens"])
