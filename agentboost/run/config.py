"""Training configuration: YAML plus dotted overrides, validated before anything starts.

An unknown or misspelt key is an error naming the closest valid key; a value of the wrong type is
an error naming the key and the expected type. The resolved configuration is saved in the run
directory.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError


class ConfigError(InputError):
    pass


@dataclass
class ModelConfig:
    # an embedded model's name, a Hugging Face model directory, or a hub id (org/name) found in the
    # local Hugging Face cache (downloaded first where the network allows)
    path: str = "smollm2-135m-instruct"
    dtype: str = "float32"  # the weights' dtype: float32, bfloat16, float16, or auto (bfloat16 on a GPU that has it)
    device: str = "auto"  # auto (a CUDA GPU when there is one), cpu, cuda or cuda:N
    lora: bool = True  # False: full fine-tuning
    lora_r: int = 16  # the LoRA rank
    lora_alpha: int = 32  # the LoRA scaling numerator (scale = alpha / r)
    lora_dropout: float = 0.0  # dropout on the LoRA path while training
    # the modules that get adapters (names of the model's linear layers)
    lora_target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


@dataclass
class DataConfig:
    train_file: str = ""  # training tasks (.jsonl or .parquet), relative to the config file
    val_file: str = ""  # held-out tasks for validation; "": no validation
    question_field: str = "question"  # the task field that is the prompt
    tasks_per_step: int = 4  # tasks drawn per step
    group_size: int = 4  # episodes per task (a GRPO group)
    shuffle: bool = True  # reshuffle the tasks each epoch (seeded)


@dataclass
class AgentConfig:
    # "strands": a Strands agent built here around the trainable model (tools, system_prompt, factory);
    # "http": the user's own agent in its own process, given OPENAI_BASE_URL and OPENAI_API_KEY (a
    # gateway session) and the task, scored here by the run's reward (docs/gateway.md)
    kind: str = "strands"
    # kind http: the agent's command line (a leading `python` is the run's interpreter), run in the
    # current directory; it prints its answer or posts {"output": ...} to $AGENTBOOST_FINISH_URL
    command: str = ""
    # kind http, instead of command: module:function(prompt, task) -> answer, run in a process of its own
    entry_point: str = ""
    # kind http: the gateway answers a larger request 413 before parsing it (a whole history comes with
    # every call: a 32k-token context is about 130 KiB)
    max_request_bytes: int = 1 << 20
    # the agent's @tool functions, as import paths (module:function or a module's tools)
    tools: list[str] = field(default_factory=lambda: ["agentboost.tools.calculator:calculator"])
    system_prompt: str | None = None  # None: the StrandsAgentSpec default
    max_model_calls: int = 4  # model calls per episode (each tool round is one)
    max_response_tokens: int = 512  # sampled tokens per episode, all calls together
    timeout_s: float = 300.0  # wall time per episode; past it the episode is a timeout
    agent_type: str = "calculator"  # the kind of agent, for the per-type default reward
    # the policy's reasoning markers: auto (from its chat template), none, or a format or family name
    # (think, qwen3, deepseek_r1, ...): tool calls, the final answer and rewards read the content only
    reasoning: str = "auto"
    # the policy's tool-call format: auto (from its chat template; hermes where it shows no other family)
    # or a parser name (hermes, qwen3_xml, llama3_json, mistral, glm45, kimi_k2; agents/tool_parsers)
    tool_parser: str = "auto"
    # module:function(model, tools, system_prompt) -> strands.Agent, for agents with their own
    # conversation managers, hooks or state; "" builds a plain Strands Agent
    factory: str = ""
    # a prompt policy (run/prompt_policy.py) the agent runs with: its system prompt, instructions
    # and demonstration turns replace agent.system_prompt; a prompt_policy.json, a checkpoint or a
    # prompt-training run directory (its newest intact checkpoint). "": none. Prompt first, then GRPO
    # from the improved prompt: a weights run that names the prompt run's policy here
    prompt_policy: str = ""


@dataclass
class RewardConfig:
    name: str = "exact_answer"  # a registered reward (exact_answer, code, math, ...) or module:function
    failed_reward: float = 0.0  # the reward of an episode that failed (timeout, crash, error)
    group_policy: str = "keep"  # "keep": failed episodes stay in their group; "drop": groups with one are dropped
    # shaping terms added to the outcome (rewards/shaping.py: tool_success, verification, step_penalty
    # and their caps; verification_outcomes); {}: none
    shaping: dict[str, Any] = field(default_factory=dict)
    # with name "judge" (tasks without a verifier; rewards/judge.py, docs/judge-rewards.md): model (a chat
    # model: provider, model_id, base_url, api_key_env, params), rubric (text or a file), mode
    # ("episode": each scored alone; "group": a GRPO group ranked in one call), max_tokens, pass_threshold
    judge: dict[str, Any] = field(default_factory=dict)


@dataclass
class SandboxConfig:
    # run model-written code (the code reward, the code tool) even where the sandbox cannot isolate
    # it from the host (no bubblewrap or user namespaces): warned at start and in the run summary
    allow_weak: bool = False


@dataclass
class EnvConfig:
    # a multi-turn conversation per episode, e.g. agentboost.environments.tau2.conversation:tau2_conversation
    # (a user simulator answers the agent); "": one prompt per episode
    conversation: str = ""
    conversation_options: dict[str, Any] = field(default_factory=dict)  # the factory's keyword arguments
    # a str.format template over the task's fields that makes the prompt, e.g. "Answer with a number: {question}";
    # "": the task's question as it is
    prompt_template: str = ""


@dataclass
class SamplingConfig:
    temperature: float = 1.0  # training samples' temperature
    top_p: float = 1.0  # nucleus sampling for training samples
    max_new_tokens: int = 128  # tokens per model call while training


@dataclass
class ValidationConfig:
    every: int = 0  # steps; 0: only at the start and the end
    at_start: bool = True  # validate before the first step (the baseline)
    max_tasks: int = 64  # validation tasks used, from the start of val_file
    k: int = 4  # samples per task for pass@k
    temperature: float = 0.7  # validation samples' temperature
    top_p: float = 1.0  # nucleus sampling for validation samples
    max_new_tokens: int = 128  # tokens per model call in validation
    # after the final validation: `agentboost eval` of the trained policy against model.path on the
    # same held-out tasks (k samples each, the run's seed), written to <run>/compare_to_base/
    compare_to_base: bool = False


@dataclass
class WarmStartConfig:
    """Supervised steps on demonstrations before the first GRPO step: a small model that never calls
    its tools gives GRPO nothing to reinforce (see ``agents/demonstrations.py``)."""
    demonstrations: int = 0  # 0: no warm start; N: the first N tasks of tasks_file, answered from their solution
    tasks_file: str = ""  # tasks with a `solution` to demonstrate, relative to the config file; "": data.train_file
    epochs: int = 2  # passes over the demonstrations
    lr: float = 1e-3  # AdamW learning rate of the warm start (its own optimizer; GRPO's starts fresh)
    batch_rows: int = 8  # model calls (segments) per warm-start optimizer step


@dataclass
class AlgorithmConfig:
    # what training changes: "weights" (GRPO updates of the policy model) or "prompt" (the agent's
    # prompt: demonstrations, instructions and edits proposed from the groups' advantages, each kept
    # only if it wins a paired test on held-out tasks; no weight changes, see the prompt section)
    policy: str = "weights"
    adv_estimator: str = "grpo"  # any estimator veRL registers that needs no critic (see run/algorithm.py)
    policy_loss: str = "vanilla"  # any policy loss veRL registers: vanilla (PPO clip), gspo, gpg, cispo, ...
    norm_adv_by_std: bool = True  # divide group advantages by the group's standard deviation
    clip_ratio_low: float = 0.2  # PPO clip below 1
    clip_ratio_high: float = 0.28  # PPO clip above 1 (DAPO's clip-higher)
    clip_ratio_c: float = 3.0  # dual-clip bound for negative advantages
    loss_agg_mode: str = "seq-mean-token-mean"  # how token losses aggregate (veRL's modes)
    kl_coef: float = 0.0  # > 0: KL to the reference policy (the base model, adapters disabled)
    kl_type: str = "low_var_kl"  # the KL estimator (veRL's names)
    gamma: float = 1.0  # reinforce_plus_plus


@dataclass
class PromptConfig:
    """The prompt policy (``algorithm.policy: prompt``, trainer/prompt/loop.py): candidates from
    each step's groups, a paired test on held-out tasks that keeps only a significant improvement."""
    # tier (a): the step's highest-advantage successful episodes become demonstration turns
    demonstrations: bool = True
    # where tier (a)'s demonstrations come from: "policy" (the step's own high-advantage successes),
    # "solutions" (the step's tasks answered from the `solution` their rows carry, through the agent
    # and its tools: agents/demonstrations.py), "auto" (the policy's own, solutions where it has none)
    demonstration_source: str = "auto"
    demonstrations_per_candidate: int = 2  # demonstrations a tier (a) candidate adds
    max_demonstrations: int = 4  # demonstrations the policy holds; a candidate past it drops the oldest
    # tier (b): instructions to try, one candidate each, appended to the system prompt in turn; []: none
    instruction_pool: list[str] = field(default_factory=list)
    # tier (c): module:function(contrast, **optimizer_options) -> an instruction (text) or None, given
    # high- and low-advantage episodes of a step (trainer.prompt.loop.Contrast); "": none.
    # agentboost.trainer.prompt.loop:strands_optimizer asks any Strands model provider
    optimizer: str = ""
    # the optimizer's keyword arguments, e.g. {provider: anthropic, model_id: ..., api_key_env: ANTHROPIC_API_KEY}
    # (the key is read from that environment variable at call time, never written anywhere)
    optimizer_options: dict[str, Any] = field(default_factory=dict)
    # the gate's held-out tasks: a task file relative to the config; "": the last gate_tasks rows of
    # data.train_file, which then never serve as training tasks (data.val_file stays untouched by
    # the selection, for an honest final figure)
    gate_file: str = ""
    gate_tasks: int = 16  # held-out tasks per gate (the first ones of gate_file)
    gate_samples: int = 2  # episodes per gate task and prompt, averaged within the task
    gate_alpha: float = 0.05  # the paired test's significance level: a candidate needs p below it
    gate_min_effect: float = 0.0  # and a mean difference in success rate of at least this
    # the gate's sampling temperature; the same seed for the candidate and the current prompt
    gate_temperature: float = 0.7
    # the policy as a chat model we do not train, through its Strands provider (models/chat.py:
    # provider, model_id, base_url, api_key_env, params, usd_per_million_input_tokens and
    # usd_per_million_output_tokens), e.g. a hosted model; its episodes are text-level and the cost of
    # their token usage at those prices counts against run.max_cost. {}: model.path, served here
    policy_model: dict[str, Any] = field(default_factory=dict)


@dataclass
class OptimConfig:
    lr: float = 1e-4  # AdamW learning rate
    weight_decay: float = 0.0  # AdamW weight decay
    warmup_steps: int = 0  # linear warm-up steps of the learning rate
    grad_clip: float = 1.0  # gradient norm clip
    micro_batch_tokens: int = 4096  # token budget per micro-batch; gradients accumulate over the step
    updates_per_step: int = 1  # passes over the step's data
    # decoder layers recomputed in backward: about half the update's peak memory for one more forward pass
    gradient_checkpointing: bool = True


@dataclass
class RunConfig:
    steps: int = 10  # training steps
    seed: int = 0  # seeds the task order, sampling and initialisation
    checkpoint_every: int = 5  # steps between checkpoints (and one at the end)
    max_wall_s: float = 0.0  # 0: no limit
    max_cost: float = 0.0  # 0: no limit; stops when hours x cost_per_hour + a prompt run's token costs reach it
    cost_per_hour: float = 0.0  # what an hour of this machine costs, for max_cost
    workers: int = 1  # rollout worker processes
    slots: int = 8  # episodes in flight per worker
    max_batch: int = 32  # requests the local sampler decodes together (at most workers x slots)
    tensorboard: bool = True  # write TensorBoard logs under the run directory
    wandb_project: str = ""  # set to log to W&B (WANDB_MODE=offline works)
    prometheus_port: int = 0  # > 0: this run's metrics at http://127.0.0.1:PORT/metrics
    # a step in which this share of episodes failed (timeout, crash, error) stops the run with the
    # commonest errors (run/health.py); 1.0: only a step in which every episode failed
    max_failed_share: float = 1.0
    # the merge-rate gate: a share of the run's episodes split (recorded as more than one training
    # sequence: a client that rewrote its history, a template that re-renders) above this stops the run,
    # naming the commonest split reasons (run/health.py); 1.0: off
    max_split_share: float = 1.0
    split_gate_min_episodes: int = 16  # the merge-rate gate waits for the run to have this many episodes
    # after SIGTERM the step in progress may finish (then a checkpoint) for this long; past it (or
    # at a second SIGTERM) the step is abandoned and the run stops at its last checkpoint
    stop_grace_s: float = 120.0
    # directories the run's own modules (tools, reward, agent factory) import from, for the trainer,
    # its workers and a resumed run; loading a config file adds its directory and the working
    # directory (relative entries are relative to the config file)
    code_paths: list[str] = field(default_factory=list)


@dataclass
class RolloutConfig:
    # the engine that samples the policy: "hf" (batched HF generate in the trainer process, no extra
    # dependency), "vllm" (a vLLM server subprocess, LoRA hot-swapped every step; needs
    # `setup.sh --vllm`), "auto" (vllm when it is installed, else hf)
    engine: str = "hf"
    vllm_python: str = ""  # the interpreter with vLLM; "" = $AGENTBOOST_VLLM_PYTHON, else .venv-vllm
    vllm_kv_cache_gib: float = 2.0  # KV cache of the CPU build (VLLM_CPU_KVCACHE_SPACE)
    vllm_max_model_len: int = 0  # 0: the model's own context length
    vllm_startup_timeout_s: float = 900.0  # the first start on a machine compiles the model (minutes)
    # how a LoRA policy reaches vLLM after each update: "adapter" (hot-loaded as a runtime LoRA
    # adapter), "merged" (the adapter merged into the weights, which every vLLM worker reloads),
    # "auto": merged on the CPU build, whose runtime-LoRA path samples at a third of the merged
    # model's speed (benchmarks/vllm_lora_sync.py), adapter elsewhere
    vllm_lora_sync: str = "auto"


@dataclass
class VerifyConfig:
    """That the policy served is the policy trained (run/verify.py, docs/verification.md)."""
    # fingerprint every weight sync: the engine's weights against the trainer's, and every sampled
    # call's weight version against the versions synced; a difference stops the run
    weights: bool = True
    # before each update, recompute a sample of the step's sampled tokens with the trainer and compare
    # the log-probs with the sampler's; a mean or 99th-percentile |diff| above its bound stops the run
    logprob_parity: bool = True
    parity_tokens: int = 1024  # tokens of forward pass per step for the parity sample (whole rows, at random)
    # the bound on the mean |diff| (nats); 0: the measured default for the engine and dtype (docs/verification.md)
    parity_mean_bound: float = 0.0
    # the bound on the 99th percentile |diff| (nats); 0: the measured default for the engine and dtype
    parity_p99_bound: float = 0.0


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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _choices() -> dict[str, tuple[str, ...]]:
    # estimators and losses are whatever veRL's registries hold (imported only when validating)
    from ..agents.http_agent import AGENT_KINDS
    from ..agents.tool_parsers import registered_tool_parsers
    from ..reasoning import reasoning_formats
    from ..rewards.groups import GROUP_POLICIES
    from .algorithm import advantage_estimators, policy_losses

    return {
        "model.dtype": ("float32", "bfloat16", "float16", "auto"),
        "agent.kind": AGENT_KINDS,
        "agent.reasoning": ("auto", *reasoning_formats()),
        "agent.tool_parser": ("auto", *registered_tool_parsers()),
        "algorithm.policy": ("weights", "prompt"),
        "prompt.demonstration_source": ("auto", "policy", "solutions"),
        "algorithm.adv_estimator": tuple(advantage_estimators()),
        "algorithm.policy_loss": tuple(policy_losses()),
        "algorithm.loss_agg_mode": ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"),
        "algorithm.kl_type": ("kl", "abs", "mse", "low_var_kl"),
        "reward.group_policy": GROUP_POLICIES,
        "rollout.engine": ("hf", "vllm", "auto"),
        "rollout.vllm_lora_sync": ("auto", "adapter", "merged"),
    }


def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(value: Any, hint: Any, key: str, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or str(origin) == "types.UnionType":
        if value is None and type(None) in args:
            return None
        hint = next(a for a in args if a is not type(None))
        origin = typing.get_origin(hint)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: {key} must be a list, got {value!r}")
        return [_coerce(v, typing.get_args(hint)[0], key, where) for v in value]
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where}: {key} must be true or false, got {value!r}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{where}: {key} must be an integer, got {value!r}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 3e-5 (no dot) as text
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{where}: {key} must be a number, got {value!r}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{where}: {key} must be text, got {value!r}")
    if origin is dict:
        if isinstance(value, dict):
            return value
        raise ConfigError(f"{where}: {key} must be a mapping, got {value!r}")
    return value


def _all_keys(cls=TrainConfig, prefix: str = "") -> list[str]:
    keys = []
    for f in dataclasses.fields(cls):
        hint = _hints(cls)[f.name]
        if dataclasses.is_dataclass(hint):
            keys += _all_keys(hint, f"{prefix}{f.name}.")
        else:
            keys.append(prefix + f.name)
    return keys


def _unknown(key: str) -> ConfigError:
    close = difflib.get_close_matches(key, _all_keys(), n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown configuration key {key!r}{hint}")


def _apply(obj: Any, data: dict[str, Any], prefix: str, where: str) -> None:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: {prefix.rstrip('.') or 'the configuration'} must be a mapping")
    hints = _hints(type(obj))
    for key, value in data.items():
        full = prefix + str(key)
        if key not in hints:
            raise _unknown(full)
        hint = hints[key]
        if dataclasses.is_dataclass(hint):
            _apply(getattr(obj, key), value, full + ".", where)
        elif typing.get_origin(hint) is dict:  # a mapping's keys are merged (key.sub=value overrides one)
            setattr(obj, key, {**getattr(obj, key), **_coerce(value, hint, full, where)})
        else:
            setattr(obj, key, _coerce(value, hint, full, where))


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
    if len(parts) == 2 and dataclasses.is_dataclass(obj) and _hints(type(obj)).get(parts[-1]) is str:
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
        _apply(cfg, data, "", str(p))
        for section, key in (("data", "train_file"), ("data", "val_file"), ("warm_start", "tasks_file"),
                             ("prompt", "gate_file"), ("agent", "prompt_policy")):
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
        _apply(cfg, nested, "", f"override {text!r}")
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
    from .algorithm import (
        AlgorithmError,
        actor_config,
        advantage_estimators,
        check_policy_loss,
    )

    for key, choices in _choices().items():
        section, name = key.split(".")
        value = getattr(getattr(cfg, section), name)
        if value not in choices:
            close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{where}: {key} must be one of {', '.join(choices)}; got {value!r}{hint}")
    why_not = advantage_estimators()[cfg.algorithm.adv_estimator]
    if why_not:
        raise ConfigError(f"{where}: algorithm.adv_estimator {cfg.algorithm.adv_estimator!r} {why_not}")
    a = cfg.algorithm
    try:
        check_policy_loss(actor_config(a.clip_ratio_low, a.clip_ratio_high, a.clip_ratio_c, a.loss_agg_mode,
                                       a.policy_loss))
    except AlgorithmError as e:
        raise ConfigError(f"{where}: algorithm.policy_loss: {e}") from None
    positive = {"data.tasks_per_step": cfg.data.tasks_per_step, "data.group_size": cfg.data.group_size,
                "run.steps": cfg.run.steps, "optim.micro_batch_tokens": cfg.optim.micro_batch_tokens,
                "sampling.max_new_tokens": cfg.sampling.max_new_tokens, "run.workers": cfg.run.workers,
                "run.slots": cfg.run.slots, "run.max_batch": cfg.run.max_batch, "optim.updates_per_step": cfg.optim.updates_per_step}
    for key, value in positive.items():
        if value < 1:
            raise ConfigError(f"{where}: {key} must be >= 1, got {value}")
    if cfg.data.group_size < 2 and cfg.algorithm.adv_estimator != "reinforce_plus_plus":  # group baselines
        raise ConfigError(f"{where}: data.group_size must be >= 2 for {cfg.algorithm.adv_estimator}")
    if for_training and not cfg.data.train_file:
        raise ConfigError(f"{where}: data.train_file is required")
    check_bounds(cfg, where)
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


# Documented bounds of the numeric keys: (low, high, low inclusive, high inclusive); None is open.
# Every float key must also be finite (nan and inf are refused for all of them).
BOUNDS: dict[str, tuple[float | None, float | None, bool, bool]] = {
    "model.lora_r": (1, 1024, True, True),
    "model.lora_alpha": (0, None, False, False),
    "model.lora_dropout": (0, 1, True, False),
    "data.group_size": (1, 1024, True, True),
    "data.tasks_per_step": (1, 100_000, True, True),
    "agent.max_model_calls": (1, None, True, False),
    "agent.max_response_tokens": (1, None, True, False),
    "agent.timeout_s": (0, None, False, False),
    "agent.max_request_bytes": (1024, None, True, False),
    "sampling.temperature": (0, 10, False, True),
    "sampling.top_p": (0, 1, False, True),
    "validation.every": (0, None, True, False),
    "validation.max_tasks": (1, None, True, False),
    "validation.k": (1, 1024, True, True),
    "validation.temperature": (0, 10, True, True),
    "validation.top_p": (0, 1, False, True),
    "validation.max_new_tokens": (1, None, True, False),
    "warm_start.demonstrations": (0, None, True, False),
    "warm_start.epochs": (1, None, True, False),
    "warm_start.lr": (0, 1, False, True),
    "warm_start.batch_rows": (1, None, True, False),
    "prompt.demonstrations_per_candidate": (1, None, True, False),
    "prompt.max_demonstrations": (1, None, True, False),
    "prompt.gate_tasks": (2, None, True, False),
    "prompt.gate_samples": (1, 1024, True, True),
    "prompt.gate_alpha": (0, 1, False, False),
    "prompt.gate_min_effect": (0, 1, True, True),
    "prompt.gate_temperature": (0, 10, True, True),
    "algorithm.clip_ratio_low": (0, None, True, False),
    "algorithm.clip_ratio_high": (0, None, True, False),
    "algorithm.clip_ratio_c": (1, None, False, False),
    "algorithm.kl_coef": (0, None, True, False),
    "algorithm.gamma": (0, 1, True, True),
    "optim.lr": (0, 1, False, True),
    "optim.weight_decay": (0, None, True, False),
    "optim.warmup_steps": (0, None, True, False),
    "optim.grad_clip": (0, None, False, False),
    "run.checkpoint_every": (0, None, True, False),
    "run.max_wall_s": (0, None, True, False),
    "run.max_cost": (0, None, True, False),
    "run.cost_per_hour": (0, None, True, False),
    "run.prometheus_port": (0, 65535, True, True),
    "run.stop_grace_s": (0, None, True, False),
    "run.max_failed_share": (0, 1, False, True),
    "run.max_split_share": (0, 1, True, True),
    "run.split_gate_min_episodes": (1, None, True, False),
    "rollout.vllm_kv_cache_gib": (0, None, False, False),
    "rollout.vllm_max_model_len": (0, None, True, False),
    "rollout.vllm_startup_timeout_s": (0, None, False, False),
    "verify.parity_tokens": (1, None, True, False),
    "verify.parity_mean_bound": (0, None, True, False),
    "verify.parity_p99_bound": (0, None, True, False),
}


def _describe_bounds(lo, hi, lo_in, hi_in) -> str:
    parts = []
    if lo is not None:
        parts.append(f"{'>=' if lo_in else '>'} {lo:g}")
    if hi is not None:
        parts.append(f"{'<=' if hi_in else '<'} {hi:g}")
    return " and ".join(parts)


def check_bounds(cfg: TrainConfig, where: str) -> None:
    """Every float key finite; every key of ``BOUNDS`` within its bounds. One line names the key,
    the value and what was expected."""
    def walk(obj, prefix):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                yield from walk(value, f"{prefix}{f.name}.")
            else:
                yield prefix + f.name, value

    for key, value in walk(cfg, ""):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}: {key} must be a finite number, got {value}")
        if key in BOUNDS and isinstance(value, (int, float)) and not isinstance(value, bool):
            lo, hi, lo_in, hi_in = BOUNDS[key]
            if (lo is not None and (value < lo or (value == lo and not lo_in))) or \
                    (hi is not None and (value > hi or (value == hi and not hi_in))):
                raise ConfigError(f"{where}: {key} must be {_describe_bounds(lo, hi, lo_in, hi_in)}, got {value:g}")


def save_config(cfg: TrainConfig, path: Path) -> None:
    path.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    cfg = TrainConfig()
    _apply(cfg, json.loads(json.dumps(data)), "", "saved config")
    use_code_paths(cfg)  # a resumed run imports its tools and reward from where the first one did
    return cfg
