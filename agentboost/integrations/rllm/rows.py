"""Episodes -> rLLM training rows: one row per episode, token for token.

rLLM's ``AgentPPOTrainer`` needs exactly one row per trajectory (it joins rows to its batch by
position), a left-padded prompt of ``data.max_prompt_length`` and a right-padded response of
``data.max_response_length``, the reward on the last response token and ``traj_mask`` as the
loss mask. This module builds those rows from agentboost episodes (the rLLM engine override) and
the batch tensors from rows (the trainer override).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ...rewards.groups import give_failed_reward
from ...episodes.record import Episode, Status


@dataclass
class EpisodeRow:
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]  # 1: sampled by the policy; 0: tool results, template text
    reward: float
    status: str  # the episode's Status value
    error: str | None
    splits: int  # the episode's template re-renders (each starts a new segment)
    calls_in_row: int
    calls_total: int
    cut: bool = False  # the response was shortened to fit max_response_length


def _placeholder(pad_token_id: int) -> tuple[list[int], list[int], list[int]]:
    # An episode with nothing to train on still needs a row, so that its GRPO group stays whole
    # and its failed reward counts in the group's baseline. One token with mask 1: an all-zero
    # mask makes veRL's per-sequence loss modes (seq-mean-token-*) divide by zero.
    return [pad_token_id], [pad_token_id], [1]


def episode_row(ep: Episode, max_prompt_length: int, max_response_length: int, failed_reward: float,
                pad_token_id: int) -> EpisodeRow:
    """The row for one episode. An episode whose sequence cannot fit is marked ``truncated`` with
    the failed reward (its score no longer describes what is trained), never silently cut."""
    if ep.reward is None:
        raise ValueError(f"episode {ep.episode_id} (task {ep.task_id}, status {ep.status}) has no reward: the "
                         "rLLM path needs a reward in StrandsEnv (env_args.strands_env.reward), and failed "
                         "episodes get the failed reward from environments.groups first")
    calls_total = len(ep.calls)

    def fail(reason: str) -> None:
        if ep.status == Status.OK:
            ep.status = Status.TRUNCATED
        ep.error = f"{ep.error}; {reason}" if ep.error else reason
        give_failed_reward(ep, failed_reward)

    if not ep.segments:
        p, r, m = _placeholder(pad_token_id)
        return EpisodeRow(p, r, m, float(ep.reward), str(ep.status), ep.error, ep.num_splits, 0, calls_total)
    # One sequence per row. The engine runs episodes with always_extend, so there is one segment;
    # should an episode still have several (a spec run without it), the last segment (the final
    # turns the reward judged) is the row and the calls left out are counted in the row and metrics.
    seg = ep.segments[-1]
    first_prompt = len(ep.calls[seg.call_indices[0]].prompt_ids)
    prompt, response = seg.input_ids[:first_prompt], seg.input_ids[first_prompt:]
    mask = seg.loss_mask[first_prompt:]
    cut = False
    if len(prompt) > max_prompt_length:
        fail(f"first prompt of {len(prompt)} tokens exceeds data.max_prompt_length={max_prompt_length}")
        p, r, m = _placeholder(pad_token_id)
        return EpisodeRow(p, r, m, float(ep.reward), str(ep.status), ep.error, ep.num_splits, 0, calls_total)
    if len(response) > max_response_length:
        fail(f"sequence of {len(response)} response tokens (sampled and tool) exceeds "
             f"data.max_response_length={max_response_length}; trained on its first {max_response_length}")
        response, mask, cut = response[:max_response_length], mask[:max_response_length], True
    if not any(mask):  # e.g. cut inside the first tool result: nothing sampled survives
        p, r, m = _placeholder(pad_token_id)
        return EpisodeRow(p, r, m, float(ep.reward), str(ep.status), ep.error, ep.num_splits, 0, calls_total, cut)
    return EpisodeRow(list(prompt), list(response), list(mask), float(ep.reward), str(ep.status), ep.error,
                      ep.num_splits, len(seg.call_indices), calls_total, cut)


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
