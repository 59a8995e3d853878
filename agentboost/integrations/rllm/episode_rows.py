"""Episodes -> rLLM training rows: one row per episode, token for token.

rLLM's ``AgentPPOTrainer`` needs exactly one row per trajectory (it joins rows to its batch by
position), a left-padded prompt of ``data.max_prompt_length`` and a right-padded response of
``data.max_response_length``, the reward on the last response token and ``traj_mask`` as the
loss mask. This module builds those rows from agentboost episodes (the rLLM engine override) and
the batch tensors from rows (the trainer override).
"""

from __future__ import annotations

from typing import Any, Sequence

from ...episodes.record import Episode
from ..episode_rows import EpisodeRow
from ..episode_rows import episode_row as shared_episode_row

__all__ = ["EpisodeRow", "batch_tensors", "episode_row"]


def episode_row(ep: Episode, max_prompt_length: int, max_response_length: int, failed_reward: float,
                pad_token_id: int) -> EpisodeRow:
    """The row for one episode (``integrations.episode_rows.episode_row``, the one conversion, under rLLM's
    limits). An episode whose sequence cannot fit is marked ``truncated`` with the failed reward
    (its score no longer describes what is trained), never silently cut."""
    if ep.reward is None and not ep.aborted:  # an aborted one has none by design: no outcome
        raise ValueError(f"episode {ep.episode_id} (task {ep.task_id}, status {ep.status}) has no reward: the "
                         "rLLM path needs a reward in StrandsEnv (env_args.strands_env.reward), and failed "
                         "episodes get the failed reward from environments.groups first")
    return shared_episode_row(ep, pad_token_id, failed_reward, max_prompt_length=max_prompt_length,
                              max_response_length=max_response_length)


def batch_tensors(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
                  masks: Sequence[Sequence[int]], rewards: Sequence[float], max_prompt_length: int,
                  max_response_length: int, pad_token_id: int) -> dict[str, Any]:
    """rLLM's trajectory batch. The attention mask comes from the rows' lengths, not from
    ``token != pad`` (a pad id that is also the end-of-turn id, or appears in a tool result, would
    otherwise be masked out of the sequence)."""
    import torch

    n = len(prompts)
    if not (len(responses) == len(masks) == len(rewards) == n) or n == 0:
        raise ValueError(f"rows disagree or are empty: {n} prompts, {len(responses)} responses, "
                         f"{len(masks)} masks, {len(rewards)} rewards")
    P, R = max_prompt_length, max_response_length
    prompt_t = torch.full((n, P), pad_token_id, dtype=torch.long)
    response_t = torch.full((n, R), pad_token_id, dtype=torch.long)
    attention = torch.zeros((n, P + R), dtype=torch.long)
    traj_mask = torch.zeros((n, R), dtype=torch.long)
    scores = torch.zeros((n, R), dtype=torch.float32)
    for i, (p, r, m, rew) in enumerate(zip(prompts, responses, masks, rewards)):
        p, r, m = list(map(int, p)), list(map(int, r)), list(map(int, m))
        if not p or not r:
            raise ValueError(f"row {i}: empty prompt ({len(p)}) or response ({len(r)})")
        if len(p) > P:
            raise ValueError(f"row {i}: prompt of {len(p)} tokens exceeds data.max_prompt_length={P}")
        if len(r) > R:
            raise ValueError(f"row {i}: response of {len(r)} tokens exceeds data.max_response_length={R}")
        if len(m) != len(r):
            raise ValueError(f"row {i}: response ({len(r)}) and its mask ({len(m)}) differ in length")
        prompt_t[i, P - len(p):] = torch.tensor(p)
        response_t[i, : len(r)] = torch.tensor(r)
        attention[i, P - len(p): P + len(r)] = 1
        traj_mask[i, : len(m)] = torch.tensor(m)
        scores[i, len(r) - 1] = float(rew)
    position_ids = (torch.cumsum(attention, dim=1) - 1).clamp(min=0) * attention
    return {
        "input_ids": torch.cat([prompt_t, response_t], dim=1),
        "attention_mask": attention,
        "position_ids": position_ids,
        "responses": response_t,
        "prompts": prompt_t,
        "token_level_scores": scores,
        "traj_mask": traj_mask,
    }
