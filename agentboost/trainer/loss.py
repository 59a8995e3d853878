"""Advantages and the policy loss through veRL's registries (``core_algos.get_adv_estimator_fn``,
``get_policy_loss_fn``): the same functions, by the same names, as the distributed path.

Advantages are computed per episode (an episode split into several segments still counts once in
its group): each episode is one row of veRL's token-level tensors, as long as its sampled tokens,
with its reward on the last one. Estimators whose advantage is constant over an episode's tokens
(GRPO, RLOO, OPO, GPG, REINFORCE++ with gamma 1, ...) give that constant; for the others the
episode gets the mean over its tokens. Groups whose rewards are all equal carry no signal and are
left out of the loss; they are counted.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..episodes.record import Episode

# the update computes with the very functions the run's configuration was checked with
from ..run.algorithm import AlgorithmError, actor_config, estimator_missing_inputs, policy_loss

__all__ = ["AdvantageResult", "AlgorithmError", "actor_config", "compute_advantages", "kl_loss", "policy_loss",
           "token_logprobs"]


@dataclass
class AdvantageResult:
    by_episode: dict[str, float]
    informative_groups: set[str]
    groups: int
    all_equal_groups: int


def compute_advantages(episodes: list[Episode], estimator: str, norm_by_std: bool = True,
                       gamma: float = 1.0) -> AdvantageResult:
    """Outcome advantages with veRL's registered estimator ``estimator``, one scalar per episode."""
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo import core_algos

    try:
        fn = core_algos.get_adv_estimator_fn(estimator)
    except (ValueError, KeyError, NotImplementedError) as e:
        raise AlgorithmError(f"unknown advantage estimator {estimator!r}: {e}") from None
    missing = estimator_missing_inputs(fn)
    if missing:
        raise AlgorithmError(f"advantage estimator {estimator!r} needs {', '.join(missing)}, which the local trainer "
                             "does not have")
    scored = [ep for ep in episodes if ep.reward is not None]
    rewards_by_group: dict[str, list[float]] = defaultdict(list)
    for ep in scored:
        rewards_by_group[ep.group_id].append(float(ep.reward))
    informative = {g for g, rs in rewards_by_group.items() if len(rs) > 1 and max(rs) - min(rs) > 1e-9}
    if not scored:
        return AdvantageResult({}, set(), 0, 0)
    lengths = torch.tensor([max(1, ep.num_response_tokens) for ep in scored])
    width = int(lengths.max())
    mask = (torch.arange(width)[None, :] < lengths[:, None]).float()
    rewards = torch.zeros(len(scored), width)
    rewards[torch.arange(len(scored)), lengths - 1] = torch.tensor([float(ep.reward) for ep in scored])
    available = {"token_level_rewards": rewards, "response_mask": mask,
                 "index": np.array([ep.group_id for ep in scored], dtype=object),
                 "norm_adv_by_std_in_grpo": norm_by_std,
                 "config": AlgoConfig(gamma=gamma, adv_estimator=estimator, norm_adv_by_std_in_grpo=norm_by_std)}
    params = inspect.signature(fn).parameters
    adv, _ = fn(**{k: v for k, v in available.items() if k in params})
    per_episode = (adv * mask).sum(-1) / mask.sum(-1)
    return AdvantageResult({ep.episode_id: float(a) for ep, a in zip(scored, per_episode)}, informative,
                           len(rewards_by_group), len(rewards_by_group) - len(informative))


def token_logprobs(model, batch: dict[str, Any], temperature: float, checkpoint_layers: bool = True) -> torch.Tensor:
    """Log-probs of each next token, (rows, width - 1). Only the entries under the batch's
    ``response_mask`` (the positions that predict a trained token) are computed: the output
    projection, over the whole vocabulary, runs for those positions alone, and every other entry
    is 0 (a batch without a ``response_mask`` gets every position). A shared prefix runs once
    (batch 1) and its KV cache is repeated for the rows, gradients flowing back through it. The
    vocabulary-wide log-softmax is never materialised for the whole batch, and with
    ``checkpoint_layers`` (when gradients are recorded) the rows' pass keeps only each decoder
    layer's input, recomputing the layer in backward (see ``logprobs``)."""
    from .logprobs import (
        checkpointed_layers,
        head_supports_chunking,
        hidden_logprobs,
        logits_logprobs,
        read_only_prefix,
    )

    ids, attn = batch["input_ids"], batch["attention_mask"]
    shared = batch.get("shared_prefix", 0)
    chunked = head_supports_chunking(model)
    # the decoder alone returns hidden states; the output projection then runs chunk by chunk
    body = model.get_decoder() if chunked else model
    if shared:
        # batch 1, not checkpointed: its cache must be built exactly once
        head = body(input_ids=ids[:1, :shared], use_cache=True, **({} if chunked else {"logits_to_keep": 1}))
        cache = read_only_prefix(head.past_key_values)
        cache.batch_repeat_interleave(ids.shape[0])
        with checkpointed_layers(model, checkpoint_layers):
            out = body(input_ids=ids[:, shared:], attention_mask=attn, past_key_values=cache, use_cache=True)
    else:
        with checkpointed_layers(model, checkpoint_layers):
            out = body(input_ids=ids, attention_mask=attn, use_cache=False)
    targets = ids[:, shared + 1:]
    mask = batch.get("response_mask")
    wanted = mask[:, shared:] != 0 if mask is not None else torch.ones_like(targets, dtype=torch.bool)
    states = out.last_hidden_state if chunked else out.logits
    picked = states[:, :-1][wanted]  # (positions, hidden or vocabulary)
    if chunked:
        values = hidden_logprobs(picked, targets[wanted], model.get_output_embeddings(), temperature)
    else:
        values = logits_logprobs(picked, targets[wanted], temperature)
    logp = values.new_zeros(targets.shape).masked_scatter(wanted, values)
    if shared:
        logp = torch.cat([logp.new_zeros((ids.shape[0], shared)), logp], dim=1)
    return logp


def kl_loss(log_prob: torch.Tensor, ref_log_prob: torch.Tensor, mask: torch.Tensor, kl_type: str,
            loss_agg_mode: str) -> torch.Tensor:
    from verl.trainer.ppo import core_algos

    kl = core_algos.kl_penalty(log_prob, ref_log_prob, kl_penalty=kl_type)
    return core_algos.agg_loss(loss_mat=kl, loss_mask=mask, loss_agg_mode=loss_agg_mode)
