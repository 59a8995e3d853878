"""The hf engine's scheduling with more episodes in flight than its batch cap: started episodes
finish first (oldest episode first), instead of every episode's first turn running before anyone's
second (arrival order), which under a slow engine made all of them time out together."""

import threading

import pytest
import torch
from helpers import chat_prompt_ids

from agentboost.sampling.hf_engine import HFEngine
from agentboost.sampling.protocol import SamplingParams

EPISODES, TURNS, CAP = 4, 2, 2
TOOL_RESULT = [28, 1456, 27]  # a few token ids standing for the tool result and the next turn's header


def run_episodes(engine: HFEngine, prompts: list[list[int]]) -> list[int]:
    """Each episode: TURNS model calls, each prompt extending the previous prompt + response.
    Returns, per episode, how many batches the engine had run when the episode finished."""
    params = SamplingParams(temperature=0.0, max_new_tokens=1)
    finished_at = [0] * len(prompts)
    submitted = threading.Barrier(len(prompts) + 1)

    def episode(i: int) -> None:
        prompt = prompts[i]
        fut = engine.submit(prompt, params)
        submitted.wait()
        for turn in range(TURNS):
            res = fut.result(timeout=120)
            if turn == TURNS - 1:
                break
            prompt = prompt + res.response_ids + TOOL_RESULT
            fut = engine.submit(prompt, params)
        finished_at[i] = engine.stats.batches

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(len(prompts))]
    # every first turn is queued before the first batch runs (the engine blocks on the weights
    # lock), so the order the engine sees does not depend on thread timing
    with engine.weights_lock:
        for t in threads:
            t.start()
        submitted.wait()
    for t in threads:
        t.join(timeout=120)
    return finished_at


@pytest.mark.parametrize("schedule", ["oldest-episode", "fifo"])
def test_started_episodes_finish_first(smollm2_engine, schedule):
    tok = smollm2_engine.tokenizer
    prompts = [chat_prompt_ids(tok, f"Episode {i}: what is {i} + {i}?") for i in range(EPISODES)]
    # one torch thread: on a busy machine two threads per decode step stall each other (tens of
    # seconds for this test instead of a few)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    engine = HFEngine(smollm2_engine.model, tok, max_batch_size=CAP, batch_wait_s=0.05,
                         schedule=schedule, continuation_wait_s=1.0)
    try:
        finished_at = sorted(run_episodes(engine, prompts))
    finally:
        engine.close()
        torch.set_num_threads(threads)
    total = EPISODES * TURNS // CAP
    assert engine.stats.batches == total and engine.stats.max_batch_seen == CAP
    if schedule == "oldest-episode":
        # the first CAP episodes take their TURNS batches back to back, then the next CAP
        assert finished_at == [TURNS] * CAP + [2 * TURNS] * CAP
        assert engine.stats.continuations == EPISODES * (TURNS - 1)
    else:
        # the baseline this replaces: nobody finishes before every first turn ran
        assert finished_at == [total - 1] * CAP + [total] * CAP


def test_a_later_turn_is_found_by_the_longest_served_sequence_it_extends():
    from agentboost.sampling.hf_engine import _Lineage

    lineage = _Lineage(capacity=3)
    lineage.add([1, 2, 3], 1.0, 1, 0)  # episode A's first turn: prompt [1, 2] + response [3]
    lineage.add([1, 2, 3, 4, 5], 1.0, 2, 1)  # its second turn
    assert lineage.parent([1, 2, 3, 4, 5, 6]) == (1.0, 2, 1)  # the third turn: the longest match
    assert lineage.parent([1, 2, 3, 9]) == (1.0, 1, 0)
    assert lineage.parent([1, 2, 3]) is None and lineage.parent([2, 3, 4, 5]) is None  # equal or not a prefix
    lineage.add([7], 2.0, 1, 2)
    lineage.add([8, 9], 3.0, 1, 3)  # the oldest entry goes
    assert lineage.parent([1, 2, 3, 9]) is None and lineage.parent([8, 9, 10]) == (3.0, 1, 3)
