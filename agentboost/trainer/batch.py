"""Episodes -> training rows -> padded micro-batches.

Each segment of each scored episode is one row; its sampled tokens (loss mask 1) are trained with
the episode's advantage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..episodes.record import Episode, segment_logprobs, shared_prefix_len


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
        if ep.text_level:  # a chat model's text: what a policy would have sampled is unknown
            raise ValueError(f"episode {ep.episode_id} is text-level (run by a chat model, "
                             f"{ep.metadata['text_level']}): it has no sampled tokens to train on with RL; "
                             "export it for sft instead")
        if ep.reward is None:
            continue
        for seg in ep.segments:
            rows.append(TrainRow(ep.episode_id, ep.group_id, list(seg.input_ids), list(seg.loss_mask),
                                 segment_logprobs(ep, seg)))
    return rows


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


def pad_batch(rows: list[TrainRow], pad_id: int, min_shared_prefix: int = 32,
              device: torch.device | str | None = None) -> dict[str, Any]:
    """Right-padded tensors on ``device`` (the model's: the update must not mix devices)."""
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
    tensors = {"input_ids": ids, "attention_mask": attn, "response_mask": m, "old_log_prob": old[:, 1:] * m,
               "advantages": adv[:, None] * m}
    if device is not None:
        tensors = {k: v.to(device) for k, v in tensors.items()}
    return {**tensors, "shared_prefix": _trainable_shared_prefix(rows, min_shared_prefix)}


def _trainable_shared_prefix(rows: list[TrainRow], minimum: int) -> int:
    """The rows' common head, ending before any trained token's predecessor (a token at t is
    predicted at t-1, and the head's logits are not computed)."""
    if len(rows) < 2 or not minimum:
        return 0
    n = shared_prefix_len([r.input_ids for r in rows])
    for r in rows:
        n = min(n, next((t for t, v in enumerate(r.loss_mask) if v), len(r.input_ids)) - 1)
    return n if n >= minimum else 0
