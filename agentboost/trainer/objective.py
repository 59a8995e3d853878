"""Episodes -> training rows, advantages and the clipped policy loss, with veRL's ``core_algos``
(the same functions the distributed path uses).

Each segment of each scored episode is one row; its sampled tokens (loss mask 1) are trained with
the episode's advantage. Advantages are computed per episode (an episode split into several
segments still counts once in its group). Groups whose rewards are all equal carry no signal and
are left out of the loss; they are counted.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..episodes.record import Episode
from ..sampling.local_engine import shared_prefix_len


@dataclass
class TrainRow:
    episode_id: str
    group_id: str
    input_ids: list[int]
    loss_mask: list[int]
    old_logprobs: list[float]  # one per position of input_ids (0 where the mask is 0)
    advantage: float = 0.0


def rows_from_episodes(episodes: list[Episode]) -> list[TrainRow]:
    rows = []
    for ep in episodes:
        if ep.reward is None:
            continue
        for seg in ep.segments:
            lps = [lp for i in seg.call_indices for lp in ep.calls[i].response_logprobs]
            old, it = [], iter(lps)
            for m in seg.loss_mask:
                old.append(next(it) if m else 0.0)
            rows.append(TrainRow(ep.episode_id, ep.group_id, list(seg.input_ids), list(seg.loss_mask), old))
    return rows


@dataclass
class AdvantageResult:
    by_episode: dict[str, float]
    informative_groups: set[str]
    groups: int
    all_equal_groups: int


def compute_advantages(episodes: list[Episode], estimator: str, norm_by_std: bool = True,
                       gamma: float = 1.0) -> AdvantageResult:
    """Outcome advantages with veRL's estimators, one scalar per episode."""
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo import core_algos

    scored = [ep for ep in episodes if ep.reward is not None]
    rewards_by_group: dict[str, list[float]] = defaultdict(list)
    for ep in scored:
        rewards_by_group[ep.group_id].append(float(ep.reward))
    informative = {g for g, rs in rewards_by_group.items() if len(rs) > 1 and max(rs) - min(rs) > 1e-9}
    if not scored:
        return AdvantageResult({}, set(), 0, 0)
    rewards = torch.tensor([[float(ep.reward)] for ep in scored])
    mask = torch.ones_like(rewards)
    index = np.array([ep.group_id for ep in scored], dtype=object)
    if estimator == "grpo":
        adv, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index, norm_adv_by_std_in_grpo=norm_by_std)
    elif estimator == "rloo":
        adv, _ = core_algos.compute_rloo_outcome_advantage(rewards, mask, index)
    elif estimator == "reinforce_plus_plus":
        adv, _ = core_algos.compute_reinforce_plus_plus_outcome_advantage(rewards, mask, config=AlgoConfig(gamma=gamma))
    else:
        raise ValueError(f"unknown advantage estimator {estimator!r}")
    return AdvantageResult({ep.episode_id: float(a) for ep, a in zip(scored, adv[:, 0])}, informative,
                           len(rewards_by_group), len(rewards_by_group) - len(informative))


def actor_config(clip_low: float, clip_high: float, clip_c: float, loss_agg_mode: str):
    from verl.workers.config import ActorConfig

    return ActorConfig(strategy="fsdp", clip_ratio=clip_low, clip_ratio_low=clip_low, clip_ratio_high=clip_high,
                       clip_ratio_c=clip_c, loss_agg_mode=loss_agg_mode, ppo_micro_batch_size_per_gpu=1, rollout_n=1)


def micro_batches(rows: list[TrainRow], token_budget: int) -> list[list[TrainRow]]:
    """Rows grouped so that rows x longest row stays within the budget (one row always fits)."""
    batches: list[list[TrainRow]] = []
    cur: list[TrainRow] = []
    longest = 0
    for row in sorted(rows, key=lambda r: len(r.input_ids)):
        new_longest = max(longest, len(row.input_ids))
        if cur and new_longest * (len(cur) + 1) > token_budget:
            batches.append(cur)
            cur, new_longest = [], len(row.input_ids)
        cur.append(row)
        longest = new_longest
    if cur:
        batches.append(cur)
    return batches


def pad_batch(rows: list[TrainRow], pad_id: int, min_shared_prefix: int = 32) -> dict[str, Any]:
    width = max(len(r.input_ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.float32)
    old = torch.zeros((len(rows), width), dtype=torch.float32)
    adv = torch.zeros((len(rows),), dtype=torch.float32)
    for i, r in enumerate(rows):
        n = len(r.input_ids)
        ids[i, :n] = torch.tensor(r.input_ids)
        attn[i, :n] = 1
        mask[i, :n] = torch.tensor(r.loss_mask, dtype=torch.float32)
        old[i, :n] = torch.tensor(r.old_logprobs)
        adv[i] = r.advantage
    # position t predicts token t+1: the "response" tensors are shifted by one
    m = mask[:, 1:]
    return {"input_ids": ids, "attention_mask": attn, "response_mask": m, "old_log_prob": old[:, 1:] * m,
            "advantages": adv[:, None] * m, "shared_prefix": _trainable_shared_prefix(rows, min_shared_prefix)}


def _trainable_shared_prefix(rows: list[TrainRow], minimum: int) -> int:
    """The rows' common head, ending before any trained token's predecessor (a token at t is
    predicted at t-1, and the head's logits are not computed)."""
    if len(rows) < 2 or not minimum:
        return 0
    n = shared_prefix_len([r.input_ids for r in rows])
    for r in rows:
        n = min(n, next((t for t, v in enumerate(r.loss_mask) if v), len(r.input_ids)) - 1)
    return n if n >= minimum else 0


def token_logprobs(model, batch: dict[str, Any], temperature: float) -> torch.Tensor:
    """Log-probs of each next token, (rows, width - 1). A shared prefix runs once (batch 1) and its
    KV cache is repeated for the rows, gradients flowing back through it; the entries it covers
    predict no trained token and are 0."""
    ids, attn = batch["input_ids"], batch["attention_mask"]
    shared = batch.get("shared_prefix", 0)
    if shared:
        head = model(input_ids=ids[:1, :shared], use_cache=True, logits_to_keep=1)
        cache = head.past_key_values
        cache.batch_repeat_interleave(ids.shape[0])
        logits = model(input_ids=ids[:, shared:], attention_mask=attn, past_key_values=cache,
                       use_cache=True).logits[:, :-1].float()
    else:
        logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()
    if temperature > 0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, shared + 1:, None]).squeeze(-1)
    if shared:
        logp = torch.cat([logp.new_zeros((ids.shape[0], shared)), logp], dim=1)
    return logp


def policy_loss(log_prob: torch.Tensor, batch: dict[str, torch.Tensor], config) -> tuple[torch.Tensor, dict]:
    from verl.trainer.ppo import core_algos

    return core_algos.compute_policy_loss_vanilla(
        old_log_prob=batch["old_log_prob"], log_prob=log_prob, advantages=batch["advantages"],
        response_mask=batch["response_mask"], loss_agg_mode=config.loss_agg_mode, config=config)


def kl_loss(log_prob: torch.Tensor, ref_log_prob: torch.Tensor, mask: torch.Tensor, kl_type: str,
            loss_agg_mode: str) -> torch.Tensor:
    from verl.trainer.ppo import core_algos

    kl = core_algos.kl_penalty(log_prob, ref_log_prob, kl_penalty=kl_type)
    return core_algos.agg_loss(loss_mat=kl, loss_mask=mask, loss_agg_mode=loss_agg_mode)
