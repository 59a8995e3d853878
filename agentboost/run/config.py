"""The run's configuration: YAML plus dotted overrides, validated before anything starts.

Each section is a dataclass whose fields carry their own help, bounds and choices (``schema.option``);
the ``agent`` section is the agent spec's own schema (``agents/config.py``). An unknown or misspelt key
is an error naming the closest valid key; a value of the wrong type, or outside its bounds or choices,
is an error naming the key and what was expected. The resolved configuration is saved in the run
directory; ``agentboost config`` and ``docs/configuration.md`` are generated from the fields
(``config_reference.py``).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..agents.config import AgentConfig
from ..schema import AT_LEAST_0, AT_LEAST_1, POSITIVE, TOKENS, ConfigError, apply, check, hints, option

__all__ = ["AgentConfig", "ConfigError", "TrainConfig", "load_config", "save_config", "config_from_dict",
           "parse_override", "shaping_config", "use_code_paths", "validate"]


def _advantage_estimators() -> tuple[str, ...]:
    from .algorithm import advantage_estimators  # veRL's registry, read only when checked

    return tuple(advantage_estimators())


def _policy_losses() -> tuple[str, ...]:
    from .algorithm import policy_losses

    return tuple(policy_losses())


def _group_policies() -> tuple[str, ...]:
    from ..rewards.groups import GROUP_POLICIES

    return tuple(GROUP_POLICIES)


@dataclass
class ModelConfig:
    """The policy model and its adapter."""
    path: str = option("smollm2-135m-instruct",
                       help="an embedded model's name, a Hugging Face model directory, or a hub id (org/name) found in "
                            "the local Hugging Face cache (downloaded first where the network allows)")
    dtype: str = option("float32", choices=("float32", "bfloat16", "float16", "auto"),
                        help="the weights' dtype: float32, bfloat16, float16, or auto (bfloat16 on a GPU that has it)")
    device: str = option("auto", help="auto (a CUDA GPU when there is one), cpu, cuda or cuda:N")
    lora: bool = option(True, help="False: full fine-tuning")
    lora_r: int = option(16, bounds=(1, 1024, True, True), help="the LoRA rank")
    lora_alpha: int = option(32, bounds=POSITIVE, help="the LoRA scaling numerator (scale = alpha / r)")
    lora_dropout: float = option(0.0, bounds=(0, 1, True, False), help="dropout on the LoRA path while training")
    lora_target_modules: list[str] = option(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
                                            help="the modules that get adapters (names of the model's linear layers)")


@dataclass
class DataConfig:
    """The tasks."""
    train_file: str = option("", help="training tasks (.jsonl or .parquet), relative to the config file")
    val_file: str = option("", help="held-out tasks for validation; \"\": no validation")
    question_field: str = option("question", help="the task field that is the prompt")
    tasks_per_step: int = option(4, bounds=(1, 100_000, True, True), help="tasks drawn per step")
    group_size: int = option(4, bounds=(1, 1024, True, True), help="episodes per task (a GRPO group)")
    shuffle: bool = option(True, help="reshuffle the tasks each epoch (seeded)")


@dataclass
class RewardConfig:
    """How episodes are scored."""
    name: str = option("exact_answer", help="a registered reward (exact_answer, code, math, ...) or module:function")
    failed_reward: float = option(0.0, help="the reward of an episode that failed (timeout, crash, error)")
    group_policy: str = option("keep", choices=_group_policies,
                               help="\"keep\": failed episodes stay in their group; \"drop\": groups with one are "
                                    "dropped")
    shaping: dict[str, Any] = option(default_factory=dict,
                                     help="shaping terms added to the outcome (rewards/shaping.py: tool_success, "
                                          "verification, step_penalty and their caps; verification_outcomes); {}: none")
    judge: dict[str, Any] = option(default_factory=dict,
                                   help="with name \"judge\" (tasks without a verifier; rewards/judge.py, "
                                        "docs/judge-rewards.md): model (a chat model: provider, model_id, base_url, "
                                        "api_key_env, params), rubric (text or a file), mode (\"episode\": each scored "
                                        "alone; \"group\": a GRPO group ranked in one call), max_tokens, pass_threshold")


@dataclass
class SandboxConfig:
    """The sandbox for model-written code."""
    allow_weak: bool = option(False, help="run model-written code (the code reward, the code tool) even where the "
                                          "sandbox cannot isolate it from the host (no bubblewrap or user namespaces): "
                                          "warned at start and in the run summary")


@dataclass
class EnvConfig:
    """The episode's environment."""
    conversation: str = option("", help="a multi-turn conversation per episode, e.g. "
                                        "agentboost.environments.tau2.conversation:tau2_conversation (a user simulator "
                                        "answers the agent); \"\": one prompt per episode")
    conversation_options: dict[str, Any] = option(default_factory=dict, help="the factory's keyword arguments")
    prompt_template: str = option("", help="a str.format template over the task's fields that makes the prompt, e.g. "
                                           "\"Answer with a number: {question}\"; \"\": the task's question as it is")


@dataclass
class SamplingConfig:
    """Training samples."""
    temperature: float = option(1.0, bounds=(0, 10, False, True), help="training samples' temperature")
    top_p: float = option(1.0, bounds=(0, 1, False, True), help="nucleus sampling for training samples")
    max_new_tokens: int = option(128, bounds=TOKENS, help="tokens per model call while training")


@dataclass
class ValidationConfig:
    """Held-out evaluation during and after training."""
    every: int = option(0, bounds=AT_LEAST_0, help="steps; 0: only at the start and the end")
    at_start: bool = option(True, help="validate before the first step (the baseline)")
    max_tasks: int = option(64, bounds=AT_LEAST_1, help="validation tasks used, from the start of val_file")
    k: int = option(4, bounds=(1, 1024, True, True), help="samples per task for pass@k")
    temperature: float = option(0.7, bounds=(0, 10, True, True), help="validation samples' temperature")
    top_p: float = option(1.0, bounds=(0, 1, False, True), help="nucleus sampling for validation samples")
    max_new_tokens: int = option(128, bounds=TOKENS, help="tokens per model call in validation")
    compare_to_base: bool = option(False, help="after the final validation: `agentboost eval` of the trained policy "
                                               "against model.path on the same held-out tasks (k samples each, the "
                                               "run's seed), written to <run>/compare_to_base/")


@dataclass
class WarmStartConfig:
    """Supervised steps on demonstrations before the first GRPO step.

    A small model that never calls its tools gives GRPO nothing to reinforce (see
    ``agents/demonstrations.py``)."""
    demonstrations: int = option(0, bounds=AT_LEAST_0, help="0: no warm start; N: the first N tasks of tasks_file, "
                                                            "answered from their solution")
    tasks_file: str = option("", help="tasks with a `solution` to demonstrate, relative to the config file; \"\": "
                                      "data.train_file")
    epochs: int = option(2, bounds=AT_LEAST_1, help="passes over the demonstrations")
    lr: float = option(1e-3, bounds=(0, 1, False, True),
                       help="AdamW learning rate of the warm start (its own optimizer; GRPO's starts fresh)")
    batch_rows: int = option(8, bounds=AT_LEAST_1, help="model calls (segments) per warm-start optimizer step")


@dataclass
class AlgorithmConfig:
    """Advantages and the policy loss (veRL's registries); what training changes."""
    policy: str = option("weights", choices=("weights", "prompt"),
                         help="what training changes: \"weights\" (GRPO updates of the policy model) or \"prompt\" "
                              "(the agent's prompt: demonstrations, instructions and edits proposed from the groups' "
                              "advantages, each kept only if it wins a paired test on held-out tasks; no weight "
                              "changes, see the prompt section)")
    adv_estimator: str = option("grpo", choices=_advantage_estimators,
                                help="any estimator veRL registers that needs no critic (see run/algorithm.py)")
    policy_loss: str = option("vanilla", choices=_policy_losses,
                              help="any policy loss veRL registers: vanilla (PPO clip), gspo, gpg, cispo, ...")
    norm_adv_by_std: bool = option(True, help="divide group advantages by the group's standard deviation")
    clip_ratio_low: float = option(0.2, bounds=AT_LEAST_0, help="PPO clip below 1")
    clip_ratio_high: float = option(0.28, bounds=AT_LEAST_0, help="PPO clip above 1 (DAPO's clip-higher)")
    clip_ratio_c: float = option(3.0, bounds=(1, None, False, False), help="dual-clip bound for negative advantages")
    loss_agg_mode: str = option("seq-mean-token-mean",
                                choices=("token-mean", "seq-mean-token-sum", "seq-mean-token-mean",
                                         "seq-mean-token-sum-norm"),
                                help="how token losses aggregate (veRL's modes)")
    kl_coef: float = option(0.0, bounds=AT_LEAST_0,
                            help="> 0: KL to the reference policy (the base model, adapters disabled)")
    kl_type: str = option("low_var_kl", choices=("kl", "abs", "mse", "low_var_kl"),
                          help="the KL estimator (veRL's names)")
    importance_cap: float = option(2.0, bounds=(1, None, True, False),
                                   help="with rollout.max_staleness > 0: the cap of the token-level truncated "
                                        "importance weight (current weights over the stale ones that sampled; "
                                        "veRL's rollout_is_weights, docs/async.md)")
    gamma: float = option(1.0, bounds=(0, 1, True, True), help="reinforce_plus_plus")


@dataclass
class PromptConfig:
    """The prompt policy (algorithm.policy: prompt): candidates and the held-out gate.

    Candidates come from each step's groups (``trainer/prompt/candidates.py``); a paired test on held-out
    tasks keeps only a significant improvement."""
    demonstrations: bool = option(True, help="tier (a): the step's highest-advantage successful episodes become "
                                             "demonstration turns")
    demonstration_source: str = option("auto", choices=("auto", "policy", "solutions"),
                                       help="where tier (a)'s demonstrations come from: \"policy\" (the step's own "
                                            "high-advantage successes), \"solutions\" (the step's tasks answered from "
                                            "the `solution` their rows carry, through the agent and its tools: "
                                            "agents/demonstrations.py), \"auto\" (the policy's own, solutions where it "
                                            "has none)")
    demonstrations_per_candidate: int = option(2, bounds=AT_LEAST_1, help="demonstrations a tier (a) candidate adds")
    max_demonstrations: int = option(4, bounds=AT_LEAST_1, help="demonstrations the policy holds; a candidate past it "
                                                                "drops the oldest")
    instruction_pool: list[str] = option(default_factory=list,
                                         help="tier (b): instructions to try, one candidate each, appended to the "
                                              "system prompt in turn; []: none")
    optimizer: str = option("", help="tier (c): module:function(contrast, **optimizer_options) -> an instruction "
                                     "(text) or None, given high- and low-advantage episodes of a step "
                                     "(trainer.prompt.candidates.Contrast); \"\": none. "
                                     "agentboost.trainer.prompt.candidates:strands_optimizer asks any chat model "
                                     "(models/chat.py)")
    optimizer_options: dict[str, Any] = option(default_factory=dict,
                                               help="the optimizer's keyword arguments, e.g. {provider: anthropic, "
                                                    "model_id: ..., api_key_env: ANTHROPIC_API_KEY} (the key is read "
                                                    "from that environment variable at call time, never written "
                                                    "anywhere)")
    gate_file: str = option("", help="the gate's held-out tasks: a task file relative to the config; \"\": the last "
                                     "gate_tasks rows of data.train_file, which then never serve as training tasks "
                                     "(data.val_file stays untouched by the selection, for an honest final figure)")
    gate_tasks: int = option(16, bounds=(2, None, True, False), help="held-out tasks per gate (the first ones of "
                                                                     "gate_file)")
    gate_samples: int = option(2, bounds=(1, 1024, True, True),
                               help="episodes per gate task and prompt, averaged within the task")
    gate_alpha: float = option(0.05, bounds=(0, 1, False, False),
                               help="the paired test's significance level: a candidate needs p below it")
    gate_min_effect: float = option(0.0, bounds=(0, 1, True, True),
                                    help="and a mean difference in success rate of at least this")
    gate_temperature: float = option(0.7, bounds=(0, 10, True, True),
                                     help="the gate's sampling temperature; the same seed for the candidate and the "
                                          "current prompt")
    policy_model: dict[str, Any] = option(default_factory=dict,
                                          help="the policy as a chat model we do not train, through its Strands "
                                               "provider (models/chat.py: provider, model_id, base_url, api_key_env, "
                                               "params, usd_per_million_input_tokens and "
                                               "usd_per_million_output_tokens), e.g. a hosted model; its episodes are "
                                               "text-level and the cost of their token usage at those prices counts "
                                               "against run.max_cost. {}: model.path, served here")


@dataclass
class OptimConfig:
    """The optimizer and the update."""
    lr: float = option(1e-4, bounds=(0, 1, False, True), help="AdamW learning rate")
    weight_decay: float = option(0.0, bounds=AT_LEAST_0, help="AdamW weight decay")
    warmup_steps: int = option(0, bounds=AT_LEAST_0, help="linear warm-up steps of the learning rate")
    grad_clip: float = option(1.0, bounds=POSITIVE, help="gradient norm clip")
    micro_batch_tokens: int = option(4096, bounds=AT_LEAST_1,
                                     help="token budget per micro-batch; gradients accumulate over the step")
    updates_per_step: int = option(1, bounds=AT_LEAST_1, help="passes over the step's data")
    gradient_checkpointing: bool = option(True, help="decoder layers recomputed in backward: about half the update's "
                                                     "peak memory for one more forward pass")


@dataclass
class RunConfig:
    """Budgets, checkpoints, logging and workers."""
    steps: int = option(10, bounds=AT_LEAST_1, help="training steps")
    seed: int = option(0, help="seeds the task order, sampling and initialisation")
    checkpoint_every: int = option(5, bounds=AT_LEAST_0, help="steps between checkpoints (and one at the end)")
    max_wall_s: float = option(0.0, bounds=AT_LEAST_0, help="0: no limit")
    max_cost: float = option(0.0, bounds=AT_LEAST_0, help="0: no limit; stops when hours x cost_per_hour + a prompt "
                                                          "run's token costs reach it")
    cost_per_hour: float = option(0.0, bounds=AT_LEAST_0, help="what an hour of this machine costs, for max_cost")
    workers: int = option(1, bounds=AT_LEAST_1, help="rollout worker processes")
    slots: int = option(8, bounds=AT_LEAST_1, help="episodes in flight per worker")
    max_batch: int = option(32, bounds=AT_LEAST_1,
                            help="requests the local sampler decodes together (at most workers x slots)")
    tensorboard: bool = option(True, help="write TensorBoard logs under the run directory")
    wandb_project: str = option("", help="set to log to W&B (WANDB_MODE=offline works)")
    prometheus_port: int = option(0, bounds=(0, 65535, True, True),
                                  help="> 0: this run's metrics at http://127.0.0.1:PORT/metrics")
    max_failed_share: float = option(1.0, bounds=(0, 1, False, True),
                                     help="a step in which this share of episodes failed (timeout, crash, error) stops "
                                          "the run with the commonest errors (run/health.py); 1.0: only a step in "
                                          "which every episode failed")
    max_split_share: float = option(1.0, bounds=(0, 1, True, True),
                                    help="the merge-rate gate: a share of the run's episodes split (recorded as more "
                                         "than one training sequence: a client that rewrote its history, a template "
                                         "that re-renders) above this stops the run, naming the commonest split "
                                         "reasons (run/health.py); 1.0: off")
    split_gate_min_episodes: int = option(16, bounds=AT_LEAST_1,
                                          help="the merge-rate gate waits for the run to have this many episodes")
    stop_grace_s: float = option(120.0, bounds=AT_LEAST_0,
                                 help="after SIGTERM the step in progress may finish (then a checkpoint) for this "
                                      "long; past it (or at a second SIGTERM) the step is abandoned and the run stops "
                                      "at its last checkpoint")
    code_paths: list[str] = option(default_factory=list,
                                   help="directories the run's own modules (tools, reward, agent factory) import from, "
                                        "for the trainer, its workers and a resumed run; loading a config file adds "
                                        "its directory and the working directory (relative entries are relative to "
                                        "the config file)")


@dataclass
class RolloutConfig:
    """The engine that samples the policy."""
    engine: str = option("hf", choices=("hf", "vllm", "auto"),
                         help="the engine that samples the policy: \"hf\" (batched HF generate in the trainer process, "
                              "no extra dependency), \"vllm\" (a vLLM server subprocess, LoRA hot-swapped every step; "
                              "needs `setup.sh --vllm`), \"auto\" (vllm when it is installed, else hf)")
    vllm_python: str = option("", help="the interpreter with vLLM; \"\" = $AGENTBOOST_VLLM_PYTHON, else .venv-vllm")
    vllm_kv_cache_gib: float = option(2.0, bounds=POSITIVE, help="KV cache of the CPU build (VLLM_CPU_KVCACHE_SPACE)")
    vllm_max_model_len: int = option(0, bounds=AT_LEAST_0, help="0: the model's own context length")
    vllm_startup_timeout_s: float = option(900.0, bounds=POSITIVE,
                                           help="the first start on a machine compiles the model (minutes)")
    vllm_lora_sync: str = option("auto", choices=("auto", "adapter", "merged"),
                                 help="how a LoRA policy reaches vLLM after each update: \"adapter\" (hot-loaded as "
                                      "a runtime LoRA adapter), \"merged\" (the adapter merged into the weights, "
                                      "which every vLLM worker reloads), \"auto\": merged on the CPU build, whose "
                                      "runtime-LoRA path samples at a third of the merged model's speed "
                                      "(benchmarks/vllm_lora_sync.py), adapter elsewhere")
    max_staleness: int = option(0, bounds=(0, 8, True, True),
                                help="asynchronous training: K >= 1 samples the next steps' episodes while an update "
                                     "runs, no episode starting more than K weight versions behind the update that "
                                     "trains on it, with an off-policy correction; 0: synchronous (each step samples "
                                     "with the newest weights, then updates). The hf engine, agents built here and "
                                     "the weights trainer only, for now (docs/async.md)")


@dataclass
class VerifyConfig:
    """That the policy served is the policy trained: weight fingerprints, log-prob parity.

    The checks are in run/verify.py and trainer/verify.py; docs/verification.md."""
    weights: bool = option(True, help="fingerprint every weight sync: the engine's weights against the trainer's, and "
                                      "every sampled call's weight version against the versions synced; a difference "
                                      "stops the run")
    logprob_parity: bool = option(True, help="compare the sampler's log-probs of each step's sampled tokens with the "
                                             "trainer's, read from the update's first forward pass before the optimizer "
                                             "steps; a mean or 99th-percentile |diff| above its bound stops the run")
    parity_tokens: int = option(1024, bounds=AT_LEAST_1,
                                help="tokens of forward pass recomputed for the parity sample on a step whose update "
                                     "has no tokens of the current version to read (whole rows, at random)")
    parity_mean_bound: float = option(0.0, bounds=AT_LEAST_0,
                                      help="the bound on the mean |diff| (nats); 0: the measured default for the "
                                           "engine and dtype (docs/verification.md)")
    parity_p99_bound: float = option(0.0, bounds=AT_LEAST_0,
                                     help="the bound on the 99th percentile |diff| (nats); 0: the measured default "
                                          "for the engine and dtype")


@dataclass
class LoopConfig:
    """The continual loop (``agentboost continual``, docs/continual.md): serve with sessions recorded,
    train a candidate from rewarded sessions, gate it offline, A/B test it live with a sequential
    test, promote it or roll it back; every version's lineage and cost, within ``loop.max_cost``."""
    production: str = option("", help="the policy served at the start: a model or RUN_DIR[:CHECKPOINT]; \"\": model.path")
    sessions_per_round: int = option(64, bounds=AT_LEAST_1,
                                     help="rewarded sessions served by the production version (not learned from "
                                          "before) that make a candidate")
    method: str = option("auto", choices=("auto", "grpo", "rft"),
                         help="how a candidate learns: \"grpo\" (groups of sessions of one task), \"rft\" "
                              "(supervised steps on the successful sessions), \"auto\" (grpo where groups with "
                              "differing rewards exist, else rft); a prompt run (algorithm.policy: prompt) takes a "
                              "prompt step instead, whatever this says")
    min_group_size: int = option(2, bounds=(2, None, True, False), help="sessions of one task that form a GRPO group")
    min_groups: int = option(2, bounds=AT_LEAST_1, help="auto: groups whose rewards differ needed for grpo")
    train_epochs: int = option(2, bounds=AT_LEAST_1,
                               help="passes over the round's sessions (GRPO updates, or supervised epochs)")
    sft_lr: float = option(1.0e-4, bounds=(0, 1, False, True), help="the rft step's learning rate (GRPO uses optim.lr)")
    gate_file: str = option("", help="the offline gate's held-out tasks (relative to the config); \"\": data.val_file")
    gate_tasks: int = option(16, bounds=(2, None, True, False), help="the first ones of gate_file")
    gate_samples: int = option(1, bounds=(1, 1024, True, True), help="episodes per gate task and policy")
    gate_max_drop: float = option(0.1, bounds=(0, 1, True, True),
                                  help="the candidate is kept out of the live test when its held-out success rate "
                                       "is below its parent's by more than this")
    split: float = option(0.5, bounds=(0, 1, False, False),
                          help="the candidate's share of new sessions during its live test")
    alpha: float = option(0.01, bounds=(0, 1, False, False), help="the sequential test's level for a promotion")
    rollback_alpha: float = option(0.05, bounds=(0, 1, False, False),
                                   help="its level for a rollback (a worse candidate leaves sooner)")
    mixture_sd: float = option(0.1, bounds=POSITIVE,
                               help="the spread of differences the sequential test is tuned to (the mSPRT's "
                                    "mixture, in the metric's units)")
    min_outcomes: int = option(10, bounds=(2, None, True, False),
                               help="outcomes per arm before the test's first look")
    window: int = option(400, bounds=(4, None, True, False),
                         help="outcomes (both arms) after which an undecided test ends: the candidate is rolled "
                              "back as inconclusive")
    metric: str = option("reward", choices=("reward", "success"),
                         help="what the live test compares: the sessions' \"reward\" or \"success\"")
    guard_error_rate: float = option(0.05, bounds=(0, 1, True, True),
                                     help="guard: the candidate is rolled back when, over at least guard_min_calls "
                                          "calls an arm, its error rate exceeds the baseline's by more than this")
    guard_latency_ratio: float = option(2.0, bounds=AT_LEAST_1,
                                        help="guard: ... or its p95 latency is more than this times the baseline's")
    guard_cost_ratio: float = option(2.0, bounds=AT_LEAST_1,
                                     help="guard: ... or its cost per session (tokens) is more than this times the "
                                          "baseline's")
    guard_min_calls: int = option(20, bounds=AT_LEAST_1, help="calls an arm before the guards look")
    max_cost: float = option(0.0, bounds=AT_LEAST_0,
                             help="USD; 0: no limit. The loop's machine time (hours x run.cost_per_hour) counts "
                                  "against it")
    max_rounds: int = option(0, bounds=AT_LEAST_0,
                             help="candidates to train (0: until the budget); then the loop stops")
    judge: dict[str, Any] = option(default_factory=dict,
                                   help="a chat model judge for sessions that get no outcome (reward.judge's keys: "
                                        "model, rubric, ...); {}: none. Judged sessions are trained on; the live "
                                        "test counts users' outcomes only")
    feedback_wait_s: float = option(300.0, bounds=AT_LEAST_0,
                                    help="a session with no outcome this long after its record is judged")
    poll_s: float = option(1.0, bounds=POSITIVE, help="how often the loop reads the served sessions and the live test")


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def parse_override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like key.sub=value")
    key, _, raw = text.partition("=")
    if not raw.strip():
        return key.strip(), ""
    try:
        return key.strip(), yaml.safe_load(raw)
    except yaml.YAMLError as e:
        problem = str(getattr(e, "problem", None) or e).splitlines()[0]
        raise ConfigError(f"override {text!r}: the value is not valid YAML ({problem})") from None


def _text_for_text_keys(cfg: TrainConfig, text: str) -> tuple[str, Any]:
    """An override's key and value; a key that holds text takes the text as written (YAML would make
    ``Answer: {question}`` a mapping and ``null`` None)."""
    if "=" not in text:
        return parse_override(text)  # the one error for that
    key, _, raw = text.partition("=")
    obj: Any = cfg
    parts = key.strip().split(".")
    for part in parts[:-1]:
        obj = getattr(obj, part, None)
    if len(parts) == 2 and dataclasses.is_dataclass(obj) and hints(type(obj)).get(parts[-1]) is str:
        value = raw.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            return parse_override(text)  # quoted: YAML unquotes it
        return key.strip(), value
    return parse_override(text)


def load_config(path: str | Path | None, overrides: list[str] = (), for_training: bool = True) -> TrainConfig:
    """The configuration at ``path`` (or the defaults) with dotted overrides, validated;
    ``for_training=False`` (evaluation) needs no training data."""
    cfg = TrainConfig()
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            problem = str(getattr(e, "problem", None) or e).splitlines()[0]
            raise ConfigError(f"{p}: not valid YAML{where}: {problem}") from None
        except UnicodeDecodeError as e:
            raise ConfigError(f"{p}: not UTF-8 text (byte {e.start})") from None
        apply(cfg, data, str(p))
        for section, key in (("data", "train_file"), ("data", "val_file"), ("warm_start", "tasks_file"),
                             ("prompt", "gate_file"), ("agent", "prompt_policy"),
                             ("loop", "gate_file")):
            # relative paths are relative to the config file
            value = getattr(getattr(cfg, section), key)
            if value and not Path(value).is_absolute() and (p.parent / value).exists():
                setattr(getattr(cfg, section), key, str((p.parent / value).resolve()))
    for text in overrides:
        key, value = _text_for_text_keys(cfg, text)
        nested: dict[str, Any] = {}
        cur = nested
        parts = key.split(".")
        for part in parts[:-1]:
            cur = cur.setdefault(part, {})
        cur[parts[-1]] = value
        apply(cfg, nested, f"override {text!r}")
    base = Path(path).parent if path is not None else Path.cwd()
    try:
        found = [str((base / d).resolve()) for d in cfg.run.code_paths]
    except (ValueError, OSError) as e:  # a NUL byte, a loop of links
        raise ConfigError(f"{path or 'defaults'}: run.code_paths: {e}") from None
    if path is not None:
        found.append(str(base.resolve()))
    found.append(str(Path.cwd().resolve()))
    cfg.run.code_paths = list(dict.fromkeys(found))  # saved in the run's config.yaml: a resume finds them too
    use_code_paths(cfg)  # tools.py and reward.py beside the config import by name, before the checks
    validate(cfg, str(path) if path else "defaults", for_training)
    return cfg


def use_code_paths(cfg: TrainConfig) -> None:
    """Make ``run.code_paths`` importable here and in the processes this one starts."""
    from ..imports import add_user_paths

    add_user_paths(*[d for d in cfg.run.code_paths if Path(d).is_dir()])


def validate(cfg: TrainConfig, where: str, for_training: bool = True) -> None:
    """Every key within its choices and bounds (the fields say which: ``schema.check``), then what
    involves several keys or veRL's registries."""
    from .algorithm import AlgorithmError, actor_config, advantage_estimators, check_policy_loss

    check(cfg, where)
    why_not = advantage_estimators()[cfg.algorithm.adv_estimator]
    if why_not:
        raise ConfigError(f"{where}: algorithm.adv_estimator {cfg.algorithm.adv_estimator!r} {why_not}")
    a = cfg.algorithm
    try:
        check_policy_loss(actor_config(a.clip_ratio_low, a.clip_ratio_high, a.clip_ratio_c, a.loss_agg_mode,
                                       a.policy_loss))
    except AlgorithmError as e:
        raise ConfigError(f"{where}: algorithm.policy_loss: {e}") from None
    if cfg.data.group_size < 2 and cfg.algorithm.adv_estimator != "reinforce_plus_plus":  # group baselines
        raise ConfigError(f"{where}: data.group_size must be >= 2 for {cfg.algorithm.adv_estimator}")
    if for_training and not cfg.data.train_file:
        raise ConfigError(f"{where}: data.train_file is required")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", cfg.model.device):
        raise ConfigError(f"{where}: model.device must be auto, cpu, cuda or cuda:N; got {cfg.model.device!r}")
    if cfg.reward.shaping:
        shaping_config(cfg.reward.shaping, where)
    if cfg.reward.name == "judge" or cfg.reward.judge:
        from ..models.chat import ChatModelError
        from ..rewards.judge import JudgeConfigError, judge_config

        try:
            judge_config(cfg.reward.judge, "reward.judge")
        except (JudgeConfigError, ChatModelError) as e:
            raise ConfigError(f"{where}: {e}") from None
        if cfg.reward.name != "judge":
            raise ConfigError(f"{where}: reward.judge is set but reward.name is {cfg.reward.name!r}; set reward.name: judge")
    if cfg.loop.judge:
        from ..models.chat import ChatModelError
        from ..rewards.judge import JudgeConfigError, judge_config

        try:
            judge_config(cfg.loop.judge, "loop.judge")
        except (JudgeConfigError, ChatModelError) as e:
            raise ConfigError(f"{where}: {e}") from None
    if cfg.loop.method == "grpo" and cfg.validation.temperature == 0:
        raise ConfigError(f"{where}: loop.method grpo learns from sessions served at validation.temperature, which is "
                          "0 (greedy): the sessions of one task are alike and their log-probs undefined; serve at a "
                          "temperature > 0, or use loop.method rft")
    if cfg.algorithm.policy == "prompt":
        if cfg.warm_start.demonstrations:
            raise ConfigError(f"{where}: warm_start trains weights; algorithm.policy: prompt changes only the prompt "
                              "(use prompt.demonstration_source: solutions for demonstrations from solutions)")
        if cfg.agent.prompt_policy:
            raise ConfigError(f"{where}: algorithm.policy: prompt trains its own prompt policy; agent.prompt_policy "
                              "names one for a weights run (or for eval and rollout)")
        p = cfg.prompt
        if not (p.demonstrations or p.instruction_pool or p.optimizer):
            raise ConfigError(f"{where}: algorithm.policy: prompt with no candidate tier: set prompt.demonstrations, "
                              "prompt.instruction_pool or prompt.optimizer")
        if p.demonstrations_per_candidate > p.max_demonstrations:
            raise ConfigError(f"{where}: prompt.demonstrations_per_candidate ({p.demonstrations_per_candidate}) "
                              f"exceeds prompt.max_demonstrations ({p.max_demonstrations})")
        if any(not isinstance(i, str) or not i.strip() for i in p.instruction_pool):
            raise ConfigError(f"{where}: prompt.instruction_pool must hold non-empty instructions (text)")
        if p.policy_model:
            from ..models.chat import ChatModelError, chat_model_spec

            try:
                chat_model_spec(p.policy_model, "prompt.policy_model")
            except ChatModelError as e:
                raise ConfigError(f"{where}: {e}") from None
    elif cfg.prompt.policy_model:
        raise ConfigError(f"{where}: prompt.policy_model is the policy of a prompt run (algorithm.policy: prompt); "
                          "a weights run trains model.path")
    if cfg.rollout.max_staleness:
        check_async(cfg, where)


def check_async(cfg: TrainConfig, where: str) -> None:
    """What asynchronous training (``rollout.max_staleness`` > 0) supports so far: refused in one
    line before any work, never ignored."""
    k = f"rollout.max_staleness={cfg.rollout.max_staleness}"
    if cfg.algorithm.policy == "prompt":
        raise ConfigError(f"{where}: {k} is not supported with algorithm.policy: prompt (it trains weights "
                          "asynchronously; set rollout.max_staleness: 0)")
    if cfg.rollout.engine != "hf":
        raise ConfigError(f"{where}: {k} is not supported yet on rollout.engine {cfg.rollout.engine!r}: only "
                          "\"hf\" keeps several weight versions servable (set rollout.engine: hf, or max_staleness: 0)")
    if cfg.agent.kind != "strands":
        raise ConfigError(f"{where}: {k} is not supported yet with agent.kind {cfg.agent.kind!r}: only agents "
                          "agentboost builds (agent.kind: strands) are pinned to a weight version for now")
    from verl.trainer.ppo import core_algos

    if "rollout_is_weights" not in inspect.signature(core_algos.get_policy_loss_fn(cfg.algorithm.policy_loss)).parameters:
        raise ConfigError(f"{where}: {k} needs the off-policy correction, and algorithm.policy_loss "
                          f"{cfg.algorithm.policy_loss!r} takes no rollout_is_weights (vanilla does)")


def shaping_config(values: dict[str, Any], where: str = "config"):
    """``reward.shaping`` as the ``ShapingConfig`` it names; a bad key or value is a ``ConfigError``."""
    from ..rewards.shaping import ShapingConfig

    names = [f.name for f in dataclasses.fields(ShapingConfig)]
    unknown = [k for k in values if k not in names]
    if unknown:
        raise ConfigError(f"{where}: reward.shaping: unknown {', '.join(map(repr, unknown))}; known: {', '.join(names)}")
    values = dict(values)
    for k, v in values.items():
        if k == "verification_outcomes":
            if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
                raise ConfigError(f"{where}: reward.shaping.verification_outcomes must be a list of outcome names")
            values[k] = tuple(v)
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(f"{where}: reward.shaping.{k} must be a finite number, got {v!r}")
    try:
        return ShapingConfig(**values)
    except ValueError as e:
        raise ConfigError(f"{where}: reward.shaping: {e}") from None


def save_config(cfg: TrainConfig, path: Path) -> None:
    path.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    cfg = TrainConfig()
    apply(cfg, json.loads(json.dumps(data)), "saved config")
    use_code_paths(cfg)  # a resumed run imports its tools and reward from where the first one did
    return cfg
