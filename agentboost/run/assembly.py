"""The one assembly of a run: a configuration into an agent, an environment, a policy server, the
samplers workers reach it with, and the pool that runs episodes. The weights and prompt trainers,
``eval``, ``rollout``, ``serve`` (and through them the job service) and the benchmarks build here, so
a policy is trained, measured and served with one agent, one reward and one way of sampling.

- ``agent_spec``, ``environment``: the agent and the reward a configuration describes;
- ``config_for``, ``load_policy_spec``: the configuration and the weights a policy spec names (an
  embedded model, a model directory, a run directory with its checkpoint);
- ``start_policy``, ``start_policy_for_spec``: its policy server (``rollout.engine`` and its
  options, the batching);
- ``sampling``, ``sampler_spec``, ``chat_sampler_spec``, ``policy_pool``: how workers sample it and
  the pool they run in.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agents.http_agent import HttpAgentSpec
from ..agents.strands_agent import AgentSpecError, StrandsAgentSpec
from ..environments.strands_env import StrandsEnv
from ..sampling.protocol import SamplingParams
from ..sampling.spec import SamplerSpec
from .config import TrainConfig

if TYPE_CHECKING:
    from ..models.chat import ChatModelSpec
    from ..rollout.pool import StrandsProcessPool

# hf engine: a step's first turns arrive within ~0.1 s of each other; gathering them into one batch
# lets them share the prompt head's prefill
BATCH_WAIT_S = 0.1


def agent_spec(cfg: TrainConfig) -> StrandsAgentSpec | HttpAgentSpec:
    """The agent the config describes (``agent.kind``: built here, or its own process behind the
    gateway), with ``agent.prompt_policy`` applied when it names one."""
    a = cfg.agent
    spec = a.spec()  # the section is the spec's own schema: nothing is translated, no default is added
    if isinstance(spec, HttpAgentSpec):
        if a.prompt_policy:
            raise AgentSpecError("agent.prompt_policy sets the prompt of an agent agentboost builds; an http "
                                 "agent keeps its own")
        if cfg.algorithm.policy == "prompt":
            raise AgentSpecError("algorithm.policy prompt trains the prompt of an agent agentboost builds; an "
                                 "http agent keeps its own (train its weights: algorithm.policy weights)")
        if cfg.env.conversation:
            raise AgentSpecError("env.conversation needs an agent agentboost builds (agent.kind strands): an "
                                 "http agent runs its own conversation")
        return spec
    if a.prompt_policy:
        from .prompt_policy import load_prompt_policy

        spec = load_prompt_policy(a.prompt_policy).apply(spec)
    return spec


def runs_model_code(reward: str | None, tools: list[str]) -> list[str]:
    """Which of ``reward`` (None: the agent type's default, decided later) and ``tools`` run
    model-written code (those marked ``runs_model_code``)."""
    from ..imports import import_object
    from ..rewards.registry import get_reward

    found = []
    if reward and reward != "judge" and getattr(get_reward(reward), "runs_model_code", False):
        found.append(f"reward {reward}")
    for path in tools:
        if getattr(import_object(path, what="tool"), "runs_model_code", False):
            found.append(f"tool {path}")
    return found


def check_sandbox(reward: str | None, tools: list[str], allow_weak: bool | None) -> str | None:
    """Before any work: a run whose reward or tools execute model-written code refuses to start
    (``InputError``, one line) where the sandbox cannot isolate it, unless weak is allowed
    (``sandbox.allow_weak``, ``--allow-weak-sandbox`` or ``AGENTBOOST_SANDBOX_ALLOW_WEAK=1``); then
    the warning to give at start and keep in the run's result. None when nothing runs code or the
    sandbox isolates."""
    users = runs_model_code(reward, tools)
    if not users:
        return None
    import os

    from ..sandbox.runner import require_isolation

    warning = require_isolation(allow_weak, what=f"this run ({' and '.join(users)})")
    if warning is not None:
        os.environ["AGENTBOOST_SANDBOX_ALLOW_WEAK"] = "1"  # the rollout workers run the code: they inherit it
    return warning


def check_config_sandbox(cfg: TrainConfig) -> str | None:
    # an http agent's tools run in its own process, not here: only the reward is the host's
    tools = list(cfg.agent.tools) if cfg.agent.kind != "http" else []
    return check_sandbox(cfg.reward.name, tools, cfg.sandbox.allow_weak or None)


def environment(cfg: TrainConfig) -> StrandsEnv:
    from .config import shaping_config

    return StrandsEnv(reward=cfg.reward.name, failed_reward=cfg.reward.failed_reward,
                      prompt_template=cfg.env.prompt_template or None,
                      shaping=shaping_config(cfg.reward.shaping) if cfg.reward.shaping else None,
                      conversation=cfg.env.conversation or None,
                      conversation_options=dict(cfg.env.conversation_options),
                      judge=dict(cfg.reward.judge) or None)


# -- the policy and its server -------------------------------------------------------------------
def config_for(model: str, config: str | None, overrides: list[str] = ()) -> TrainConfig:
    """The agent, reward and validation sampling a policy spec runs with: from ``config`` (a
    training YAML), else from the model's run directory, else the defaults."""
    from .checkpoint import split_run_spec
    from .config import load_config

    saved = Path(split_run_spec(model)[0]) / "config.yaml"
    if config is None and saved.is_file():
        config = saved
    return load_config(config, list(overrides), for_training=False)


def load_policy_spec(spec: str):
    """(model, tokenizer, description, tokenizer path) for an embedded model name, a model
    directory, or a training run directory, ``RUN_DIR[:CHECKPOINT]`` (its newest intact
    checkpoint, or the one named: ``best``, ``latest``, ``step_000012``, on its base model)."""
    from ..models.loading import load_policy, resolve_model_path
    from .checkpoint import load_policy_from_run, split_run_spec

    run, checkpoint = split_run_spec(spec)
    if (Path(run) / "config.yaml").is_file():  # a training run directory
        return load_policy_from_run(Path(run), checkpoint)
    model, tok = load_policy(spec)
    return model, tok, spec, str(resolve_model_path(spec))


def server_options(cfg: TrainConfig) -> dict[str, Any]:
    """``engine``, ``batch_wait_s`` and ``vllm`` for ``sampling.policy_server.start_policy_server``."""
    from ..sampling.policy_server import VLLMOptions

    r = cfg.rollout
    return {"engine": r.engine, "batch_wait_s": BATCH_WAIT_S,
            "vllm": VLLMOptions(python=r.vllm_python or None, lora_sync=r.vllm_lora_sync,
                                kv_cache_gib=r.vllm_kv_cache_gib, max_model_len=r.vllm_max_model_len or None,
                                startup_timeout_s=r.vllm_startup_timeout_s)}


def start_policy(cfg: TrainConfig, model_path: str, *, model: Any = None, tokenizer: Any = None,
                 slots: int | None = None, max_batch: int | None = None, seed: int | None = None,
                 engine: str | None = None, lora_rank: int = 0, full_weight_sync: bool = False,
                 weights_version: int = 0, workdir: str | Path | None = None):
    """(engine name, started server) for the policy at ``model_path`` (``model``: already loaded),
    on the configured engine (``rollout.engine``, or ``engine``) with its options: every command
    starts its policy here, so a trained policy's validation, its baseline and its served form are
    sampled the same way. ``slots``: episodes in flight (default ``run.workers x run.slots``);
    ``max_batch``: the hf engine's batch (default ``min(slots, run.max_batch)``)."""
    from ..sampling.policy_server import start_policy_server

    slots = slots or cfg.run.workers * cfg.run.slots
    options = server_options(cfg)
    if engine is not None:
        options["engine"] = engine
    return start_policy_server(model_path=model_path, model=model, tokenizer=tokenizer,
                               seed=cfg.run.seed if seed is None else seed, slots=slots,
                               max_batch_size=max_batch or min(slots, cfg.run.max_batch), lora_rank=lora_rank,
                               full_weight_sync=full_weight_sync, weights_version=weights_version, workdir=workdir,
                               **options)


def start_policy_for_spec(spec: str, cfg: TrainConfig, seed: int, slots: int, max_batch_size: int,
                          engine: str | None = None):
    """(engine name, started policy server, description, tokenizer path, tokenizer) for a policy
    spec, as in training: a run's checkpoint goes onto a vLLM server as its adapter (or full
    weights) over the base model. ``eval`` and ``serve`` start their policies here."""
    from .checkpoint import split_run_spec

    model, tok, desc, tokenizer_path = load_policy_spec(spec)
    trained = (Path(split_run_spec(spec)[0]) / "config.yaml").is_file()
    lora_rank = model.peft_config["default"].r if hasattr(model, "peft_config") else 0
    name, server = start_policy(cfg, tokenizer_path, model=model, tokenizer=tok, seed=seed, slots=slots,
                                max_batch=max_batch_size, engine=engine, lora_rank=lora_rank,
                                full_weight_sync=trained and not lora_rank, weights_version=int(trained))
    try:
        server.identity = _verified_identity(spec, server, model, int(trained))
    except BaseException:
        server.close()
        raise
    return name, server, desc, tokenizer_path, tok


def _verified_identity(spec: str, server, model, version: int) -> dict:
    """The engine holds the policy loaded here, and a run's checkpoint is what the run trained
    (``run/verify.py``): ``serve`` answers with its digest."""
    from .checkpoint import resolve_checkpoint, split_run_spec
    from .verify import verify_served

    run, checkpoint = split_run_spec(spec)
    step = None
    if version:
        name = resolve_checkpoint(Path(run), checkpoint).name
        step = int(name.rsplit("_", 1)[1]) if name.startswith("step_") else None
    return verify_served(server, model, version, run_dir=run if version else None, checkpoint_step=step)


# -- how workers sample it, and the pool they run in -----------------------------------------------
def sampling(cfg: TrainConfig, kind: str = "train", seed: int | None = None,
             temperature: float | None = None) -> SamplingParams:
    """The sampling settings of ``kind``: ``train`` (``sampling.*``) or ``validation``
    (``validation.*``: validation, ``eval``, a prompt run's gate); ``seed`` for common random
    numbers between two policies, ``temperature`` in place of the section's."""
    section = cfg.sampling if kind == "train" else cfg.validation
    return SamplingParams(temperature=section.temperature if temperature is None else temperature,
                          top_p=section.top_p, max_new_tokens=section.max_new_tokens, seed=seed)


def sampler_spec(server, engine_name: str, tokenizer: str, params: SamplingParams,
                 template_kwargs: dict[str, Any] | None = None) -> SamplerSpec:
    """Workers' way to a policy server: its URL, and on vLLM the file naming the weights version
    every request samples."""
    return SamplerSpec(tokenizer=tokenizer, sampling=params, url=server.url,
                       template_kwargs=dict(template_kwargs or {}),
                       policy_file=str(server.policy_file) if engine_name == "vllm" else None)


def chat_sampler_spec(chat: "ChatModelSpec", params: SamplingParams) -> SamplerSpec:
    """Workers' way to a chat model we do not train, through its Strands provider (text-level)."""
    return SamplerSpec(tokenizer=None, sampling=params, kind="chat", chat=chat.as_dict())


def policy_pool(cfg: TrainConfig, spec, sampler: SamplerSpec, env: StrandsEnv | None,
                workers: int | None = None, slots: int | None = None) -> "StrandsProcessPool":
    """The worker pool that runs ``spec`` against ``sampler`` (``run.workers`` x ``run.slots``
    episodes in flight unless given)."""
    from ..rollout.pool import StrandsProcessPool

    return StrandsProcessPool(spec, sampler, env, workers=workers or cfg.run.workers, slots=slots or cfg.run.slots)


def run_episodes(pool: "StrandsProcessPool", tasks: list[dict], samples: int, label: str,
                 seed: int | None = None) -> list:
    """``samples`` episodes of each task on ``pool``, with a progress bar; a group-ranking judge
    (``reward.judge.mode: group``) then scores each whole group at once. ``seed``: the episodes'
    sampling seed (``pool.submit``'s)."""
    return collect_episodes(pool, tasks, pool.submit_groups(tasks, samples, seed=seed), label)


def collect_episodes(pool: "StrandsProcessPool", tasks: list[dict], futures: list, label: str) -> list:
    """The episodes of ``tasks`` already queued on ``pool`` (``futures``, from ``submit_groups``:
    asynchronous training queues them steps ahead), with a progress bar, then scored by a
    group-ranking judge as in ``run_episodes``."""
    from ..progress import progress_bar
    from ..rollout.pool import collect

    with progress_bar(label, len(futures)) as advance:
        episodes = collect(futures, lambda ep: advance())
    if pool.env is not None and pool.env.scores_groups:
        pool.env.score_groups({str(t["task_id"]): t for t in tasks}, episodes)
    return episodes
