"""One episode -> one training row: the conversion the veRL agent loop and the rLLM engine share.

Both paths give every episode exactly one row (veRL's agent loop returns one output per sample;
rLLM joins rows to its batch by position), so that its GRPO group stays whole:

- the row is the episode's last segment (the final turns, those the reward judged; episodes run
  in always-extend mode have only one): the prompt of the segment's first call is the row's
  prompt, the rest of the segment its response, with the segment's loss mask as the response mask
  (1: sampled by the policy; 0: tool results, template text); calls of earlier segments are left
  out and counted (``calls_in_row`` against ``calls_total``);
- with ``max_prompt_length``/``max_response_length``, an episode whose sequence does not fit is
  marked ``truncated`` with the failed reward (its score no longer describes what is trained):
  an over-long first prompt gives the placeholder, an over-long response is cut to the limit
  (``cut``), never silently;
- an episode with nothing to train on (no segment; failed, where ``failed_as_placeholder``;
  nothing sampled left in the response) still gives a row, the placeholder: one pad token of
  prompt and one of response, with mask 1, because an all-zero mask makes veRL's per-sequence
  loss modes (seq-mean-token-*) divide by zero;
- an ``aborted`` episode (the serving side was down: no outcome, never a wrong answer) gives the
  placeholder with mask 0: no token of it is trained (veRL's loss modes leave fully masked rows
  out; rLLM's fork already pads its batches with such rows). Its reward, which a row must carry,
  is ``failed_reward`` until the caller sets a neutral one (``rllm.trainer`` gives it its group's
  mean, where the whole group is visible); ``EpisodeRow.aborted`` says so;
- the reward is the episode's, or ``failed_reward`` where the episode has none (a failed episode
  that never reached the group policy); the row carries the episode's status and error as they
  are after the limits above.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..episodes.record import Episode, Status, segment_logprobs
from ..rewards.groups import give_failed_reward

__all__ = ["EpisodeRow", "episode_row", "placeholder_row"]


@dataclass
class EpisodeRow:
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]  # 1: sampled by the policy; 0: tool results, template text
    reward: float
    status: str  # the episode's Status value
    error: str | None
    splits: int  # the episode's template re-renders (each starts a new segment)
    calls_in_row: int  # 0 for the placeholder
    calls_total: int
    cut: bool = False  # the response was shortened to fit max_response_length
    # with ``logprobs=True``: the sampled log-prob of each response token, 0.0 under mask 0
    response_logprobs: list[float] | None = None
    aborted: bool = False  # an outage, no outcome: mask 0, its reward a stand-in (see the module's docstring)


def placeholder_row(pad_token_id: int) -> tuple[list[int], list[int], list[int], list[float]]:
    """Prompt, response, mask and log-probs of a row with nothing to train on: one pad token each
    way, mask 1 (an all-zero mask divides by zero in veRL's per-sequence loss modes)."""
    return [pad_token_id], [pad_token_id], [1], [0.0]


def episode_row(ep: Episode, pad_token_id: int, failed_reward: float, *, max_prompt_length: int | None = None,
                max_response_length: int | None = None, failed_as_placeholder: bool = False,
                logprobs: bool = False) -> EpisodeRow:
    """The one training row of ``ep`` (see the module's docstring). May change ``ep``: a sequence
    over the limits marks it ``truncated``, appends the reason to its error and gives it the
    failed reward."""
    calls_total = len(ep.calls)

    def row(prompt, response, mask, lps, calls_in_row: int, cut: bool = False) -> EpisodeRow:
        reward = ep.reward if ep.reward is not None else failed_reward
        return EpisodeRow(list(prompt), list(response), list(mask), float(reward), str(ep.status), ep.error,
                          ep.num_splits, calls_in_row, calls_total, cut, list(lps) if logprobs else None)

    def fail(reason: str) -> None:
        if ep.status == Status.OK:
            ep.status = Status.TRUNCATED
        ep.error = f"{ep.error}; {reason}" if ep.error else reason
        give_failed_reward(ep, failed_reward)

    # an aborted episode (an outage of the serving side) is no sample of the policy's: nothing to train on
    if ep.aborted:
        prompt, response, _, lps = placeholder_row(pad_token_id)
        out = row(prompt, response, [0], lps, 0)
        out.aborted = True
        return out
    if not ep.segments or (failed_as_placeholder and ep.failed):
        return row(*placeholder_row(pad_token_id), 0)
    seg = ep.segments[-1]
    first_prompt = len(ep.calls[seg.call_indices[0]].prompt_ids)
    prompt, response = seg.input_ids[:first_prompt], seg.input_ids[first_prompt:]
    mask = seg.loss_mask[first_prompt:]
    lps = segment_logprobs(ep, seg)[first_prompt:] if logprobs else []
    cut = False
    if max_prompt_length is not None and len(prompt) > max_prompt_length:
        fail(f"first prompt of {len(prompt)} tokens exceeds data.max_prompt_length={max_prompt_length}")
        return row(*placeholder_row(pad_token_id), 0)
    if max_response_length is not None and len(response) > max_response_length:
        fail(f"sequence of {len(response)} response tokens (sampled and tool) exceeds "
             f"data.max_response_length={max_response_length}; trained on its first {max_response_length}")
        response, mask, lps, cut = response[:max_response_length], mask[:max_response_length], \
            lps[:max_response_length], True
    if not any(mask):  # e.g. cut inside the first tool result: nothing sampled survives
        return row(*placeholder_row(pad_token_id), 0, cut)
    return row(prompt, response, mask, lps, len(seg.call_indices), cut)
