"""A candidate version trained from served sessions, or a noised copy for a rollback drill.

The candidate starts from its parent's weights (the production version: its LoRA adapter, trained
further; a base model gets a fresh adapter as ``model.lora`` says, or is fine-tuned whole) and
learns from the round's rewarded sessions, all served by that parent:

- ``grpo``: sessions of one task (``task_id``: the feedback's task, else the session's opening)
  form a group; group advantages (veRL's estimator, ``algorithm.adv_estimator``) and the clipped
  policy loss, by the trainer's own update (``trainer.loop.policy_update``), with the log-probs
  the sessions were served with, at the serving temperature (``validation.temperature``): the
  parent served them, so the first pass is on-policy;
- ``rft``: rejection-sampling fine-tuning, the supervised loop of ``sft`` and the warm start
  (``trainer.sft.train_supervised``) on the successful sessions' sampled tokens;
- ``auto``: grpo where at least ``loop.min_groups`` groups have rewards that differ, else rft;
- ``prompt`` (a prompt run, ``algorithm.policy: prompt``: the weights stay as they are): the
  parent's prompt policy with the round's best sessions as demonstration turns (tier (a) of the
  prompt trainer, ``trainer/prompt/loop.py``: the highest-advantage successes, one per task, by
  group advantage where groups exist, else by reward against the round's mean), served as
  ``MODEL#prompt=PATH`` (``serving/policies.py``).

A weights candidate is written as a run directory of its own (``config.yaml`` and an intact checkpoint,
``run/checkpoint.py``), so ``serve``, ``eval``, ``export-model`` and another loop take it as
``DIR:step_000001``.
"""

from __future__ import annotations

import random
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..episodes.record import Episode
from ..errors import InputError
from ..run.config import TrainConfig, save_config

CHECKPOINT = "step_000001"


class NothingToLearn(InputError):
    """A round whose sessions teach nothing (no success to imitate, no group whose rewards differ)."""


def load_trainable(spec: str, cfg: TrainConfig):
    """``(model, tokenizer, base model path, lora)``: the parent's weights, ready to train."""
    import yaml

    from ..models.loading import load_policy, resolve_model_path
    from ..run.checkpoint import resolve_checkpoint, split_run_spec

    run, name = split_run_spec(spec)
    if (Path(run) / "config.yaml").is_file():
        model_cfg = (yaml.safe_load((Path(run) / "config.yaml").read_text()) or {}).get("model") or {}
        base = str(resolve_model_path(model_cfg.get("path", "smollm2-135m-instruct")))
        ckpt = resolve_checkpoint(run, name)
        if model_cfg.get("lora", True):
            from peft import PeftModel

            model, tok = load_policy(base, dtype=cfg.model.dtype, device=cfg.model.device)
            return PeftModel.from_pretrained(model, str(ckpt / "adapter"), is_trainable=True), tok, base, True
        model, tok = load_policy(str(ckpt / "model"), tokenizer=base, dtype=cfg.model.dtype, device=cfg.model.device)
        return model, tok, base, False
    base = str(resolve_model_path(spec))
    model, tok = load_policy(base, dtype=cfg.model.dtype, device=cfg.model.device)
    if cfg.model.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=cfg.model.lora_r, lora_alpha=cfg.model.lora_alpha,
                                                 lora_dropout=cfg.model.lora_dropout, task_type="CAUSAL_LM",
                                                 target_modules=list(cfg.model.lora_target_modules)))
    return model, tok, base, bool(cfg.model.lora)


def write_version(out: Path, cfg: TrainConfig, model, base: str, lora: bool, optimizer, state: dict[str, Any]) -> str:
    """The candidate as a run directory (its config, names its base model, and one intact
    checkpoint); returns its spec. A directory left by an interrupted attempt is replaced."""
    import dataclasses

    from ..run.checkpoint import save_checkpoint

    if (out / "checkpoints").exists():
        shutil.rmtree(out / "checkpoints")
    out.mkdir(parents=True, exist_ok=True)
    saved = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, path=base, lora=lora))
    save_config(saved, out / "config.yaml")
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    save_checkpoint(out, 1, model, optimizer, scheduler, state, lora)
    return f"{out}:{CHECKPOINT}"


def groups_of(episodes: list[Episode], min_size: int) -> dict[str, list[Episode]]:
    by: dict[str, list[Episode]] = defaultdict(list)
    for ep in episodes:
        by[ep.group_id].append(ep)
    return {g: eps for g, eps in by.items() if len(eps) >= min_size}


def informative(groups: dict[str, list[Episode]]) -> dict[str, list[Episode]]:
    return {g: eps for g, eps in groups.items() if max(e.reward for e in eps) - min(e.reward for e in eps) > 1e-9}


def choose_method(cfg: TrainConfig, episodes: list[Episode]) -> str:
    loop = cfg.loop
    if cfg.algorithm.policy == "prompt":
        return "prompt"
    if loop.method != "auto":
        return loop.method
    enough = len(informative(groups_of(episodes, loop.min_group_size))) >= loop.min_groups
    return "grpo" if enough and cfg.validation.temperature > 0 else "rft"


def train_candidate(cfg: TrainConfig, parent: str, episodes: list[Episode], out: Path, seed: int = 0,
                    log=print) -> dict[str, Any]:
    """Train a candidate from ``parent`` on ``episodes`` (rewarded sessions ``parent`` served) into
    the run directory ``out``: ``{"spec", "method", "sessions", ...figures}``. ``NothingToLearn``
    when the sessions hold nothing to learn from."""
    from ..run import health
    from ..trainer import batch as batching
    from ..trainer import loss as losses
    from ..trainer.loop import policy_update
    from ..trainer.sft import train_supervised

    loop = cfg.loop
    method = choose_method(cfg, episodes)
    if method == "prompt":
        return prompt_candidate(cfg, parent, episodes, out)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    if method == "grpo":
        groups = informative(groups_of(episodes, loop.min_group_size))
        if not groups:
            raise NothingToLearn(f"grpo: no task has {loop.min_group_size}+ sessions whose rewards differ "
                                 f"(among {len(episodes)} sessions)")
        chosen = [ep for eps in groups.values() for ep in eps]
        adv = losses.compute_advantages(chosen, cfg.algorithm.adv_estimator, cfg.algorithm.norm_adv_by_std,
                                        cfg.algorithm.gamma)
        rows = [r for r in batching.rows_from_episodes(chosen) if r.group_id in adv.informative_groups]
        for r in rows:
            r.advantage = adv.by_episode[r.episode_id]
    else:
        chosen = [ep for ep in episodes if ep.succeeded]
        if not chosen:
            raise NothingToLearn(f"rft: none of the {len(episodes)} sessions succeeded: nothing to imitate")
        rows = [r for r in batching.rows_from_episodes(chosen) if any(r.loss_mask)]
    model, tok, base, lora = load_trainable(parent, cfg)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr if method == "grpo" else loop.sft_lr,
                                  weight_decay=cfg.optim.weight_decay)
    history: list[dict[str, Any]] = []
    if method == "grpo":
        for epoch in range(loop.train_epochs):
            m = policy_update(model, optimizer, None, rows, cfg, tok.pad_token_id,
                              temperature=cfg.validation.temperature, step=epoch + 1)
            history.append(m)
            log(f"candidate (grpo on {len(groups)} groups, {len(rows)} rows) pass {epoch + 1}/{loop.train_epochs}: "
                f"loss {m['loss']:+.4f}, clip {m['pg_clipfrac']:.3f}, grad {m['grad_norm']:.3f}")
    else:
        history = train_supervised(model, rows, tok.pad_token_id, epochs=loop.train_epochs, lr=loop.sft_lr,
                                   batch_rows=cfg.warm_start.batch_rows,
                                   micro_batch_tokens=cfg.optim.micro_batch_tokens, grad_clip=cfg.optim.grad_clip,
                                   log=log, label="candidate (rft)")
        health.check_weights(params, 1)
    train_s = time.perf_counter() - t0
    spec = write_version(out, cfg, model, base, lora, optimizer,
                         {"parent": parent, "method": method, "sessions": len(episodes), "trained_on": len(chosen)})
    del model
    return {"spec": spec, "method": method, "sessions": len(episodes), "trained_on": len(chosen), "rows": len(rows),
            "groups": len(groups) if method == "grpo" else 0, "first": history[0], "last": history[-1],
            "train_s": train_s, "episode_ids": [ep.episode_id for ep in chosen]}


def noised_candidate(cfg: TrainConfig, parent: str, std: float, out: Path, seed: int = 0) -> dict[str, Any]:
    """A rollback drill's candidate: the parent with Gaussian noise of standard deviation ``std``
    added to every trainable weight (its LoRA adapter's; a base model's fresh adapter, whose zero
    half then carries the noise too)."""
    from ..serving.policies import split_prompt_spec, with_prompt

    if not std > 0:
        raise InputError(f"--noise must be > 0, got {std}")
    torch.manual_seed(seed)
    weights, prompt = split_prompt_spec(parent)  # a prompt policy stays as it is: the weights get the noise
    model, _, base, lora = load_trainable(weights, cfg)
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.no_grad():
        for p in params:
            p.add_(torch.randn_like(p) * std)
    optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr)
    spec = write_version(out, cfg, model, base, lora, optimizer, {"parent": parent, "noise_std": std, "seed": seed})
    return {"spec": with_prompt(spec, prompt) if prompt else spec, "method": "noise", "noise_std": std}


def prompt_candidate(cfg: TrainConfig, parent: str, episodes: list[Episode], out: Path) -> dict[str, Any]:
    """The parent's prompt policy (``MODEL#prompt=PATH``; a model alone: the configuration's system
    prompt and no demonstration) with the round's best sessions added as demonstrations, written
    to ``out/prompt_policy.json``; the model is the parent's."""
    from ..run.prompt_policy import FILE_NAME, PromptPolicy, load_prompt_policy
    from ..serving.policies import split_prompt_spec, with_prompt
    from ..trainer import loss as losses
    from ..trainer.prompt.loop import policy_demonstrations

    t0 = time.perf_counter()
    model, path = split_prompt_spec(parent)
    # as the prompt trainer starts: the configuration's system prompt (null: none)
    base = load_prompt_policy(path) if path else PromptPolicy(system_prompt=cfg.agent.system_prompt or "")
    groups = informative(groups_of(episodes, cfg.loop.min_group_size))
    if groups:
        chosen = [ep for eps in groups.values() for ep in eps]
        advantages = losses.compute_advantages(chosen, cfg.algorithm.adv_estimator, cfg.algorithm.norm_adv_by_std,
                                               cfg.algorithm.gamma).by_episode
    else:  # no group: each session against the round's mean reward
        chosen = episodes
        mean = float(np.mean([ep.reward for ep in episodes])) if episodes else 0.0
        advantages = {ep.episode_id: float(ep.reward) - mean for ep in episodes}
    have = {d.task_id for d in base.demonstrations}
    demos = policy_demonstrations(chosen, advantages, cfg.prompt.demonstrations_per_candidate, step=0, exclude=have)
    if not demos:
        raise NothingToLearn(f"prompt: no successful session better than its {'group' if groups else 'round'} "
                             f"to demonstrate (among {len(episodes)} sessions)")
    kept = [*base.demonstrations, *demos][-cfg.prompt.max_demonstrations:]
    candidate = base.with_change(demonstrations=kept)
    candidate.history.append({"tier": "demonstrations", "source": "served sessions", "parent": parent,
                              "added": [d.task_id for d in demos], "episodes": [d.episode_id for d in demos]})
    out.mkdir(parents=True, exist_ok=True)
    saved = candidate.save(out / FILE_NAME)
    return {"spec": with_prompt(model, saved), "method": "prompt", "sessions": len(episodes), "trained_on": len(demos),
            "rows": 0, "groups": len(groups), "first": {"demonstrations": len(base.demonstrations)},
            "last": {"demonstrations": len(kept)}, "train_s": time.perf_counter() - t0,
            "episode_ids": [d.episode_id for d in demos]}
