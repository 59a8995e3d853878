"""The one episode -> training-row conversion the veRL loop and the rLLM engine share
(``agentboost.integrations.episode_rows``): which tokens form the row, the mask, the limits, the placeholder."""

from helpers import model_call as call

from agentboost.episodes.record import Episode, Status, build_segments
from agentboost.integrations.episode_rows import episode_row

PAD = 0


def episode(calls, **kw):
    return Episode(episode_id="e", task_id="t", group_id="g", calls=calls, segments=build_segments(calls), **kw)


def two_turns(**kw):
    # turn 1 samples 3,4; a tool result 5,6 is appended; turn 2 samples 7
    return episode([call([1, 2], [3, 4], -0.5), call([1, 2, 3, 4, 5, 6], [7], -0.25)], **kw)


def test_the_row_is_the_segment_split_at_the_first_prompt_with_its_mask_and_logprobs():
    r = episode_row(two_turns(reward=1.0), PAD, failed_reward=-1.0, logprobs=True)
    assert (r.prompt_ids, r.response_ids, r.response_mask) == ([1, 2], [3, 4, 5, 6, 7], [1, 1, 0, 0, 1])
    assert r.response_logprobs == [-0.5, -0.5, 0.0, 0.0, -0.25]
    assert (r.reward, r.status, r.calls_in_row, r.calls_total, r.cut) == (1.0, "ok", 2, 2, False)


def test_a_re_rendered_episode_trains_on_its_last_segment_and_counts_the_rest():
    ep = episode([call([1, 2], [3], -0.1), call([9, 9], [8], -0.2)], reward=0.5)  # the second does not extend
    r = episode_row(ep, PAD, failed_reward=0.0)
    assert (r.prompt_ids, r.response_ids, r.response_mask) == ([9, 9], [8], [1])
    assert (r.calls_in_row, r.calls_total, r.splits) == (1, 2, ep.num_splits) and r.response_logprobs is None


def test_over_long_sequences_are_marked_truncated_with_the_failed_reward_never_silently():
    ep = two_turns(reward=1.0)
    r = episode_row(ep, PAD, failed_reward=-1.0, max_response_length=3)
    assert (r.response_ids, r.response_mask, r.cut) == ([3, 4, 5], [1, 1, 0], True)
    assert ep.status == Status.TRUNCATED and r.reward == -1.0 and "max_response_length=3" in r.error
    ep = two_turns(reward=1.0)
    r = episode_row(ep, PAD, failed_reward=-1.0, max_prompt_length=1)
    assert (r.prompt_ids, r.response_ids, r.response_mask, r.calls_in_row) == ([PAD], [PAD], [1], 0)
    assert ep.status == Status.TRUNCATED and "max_prompt_length=1" in ep.error and r.reward == -1.0


def test_failed_or_empty_episodes_still_give_one_placeholder_row():
    failed = two_turns(status=Status.TIMEOUT, error="too slow")
    r = episode_row(failed, PAD, failed_reward=-1.0, failed_as_placeholder=True, logprobs=True)
    assert (r.prompt_ids, r.response_ids, r.response_mask, r.response_logprobs) == ([PAD], [PAD], [1], [0.0])
    assert (r.reward, r.status, r.error) == (-1.0, "timeout", "too slow")
    # without failed_as_placeholder (rLLM) a failed episode keeps its tokens, with the failed reward
    r = episode_row(two_turns(status=Status.TIMEOUT, error="too slow"), PAD, failed_reward=-1.0)
    assert r.response_ids == [3, 4, 5, 6, 7] and r.reward == -1.0
    none = episode([], status=Status.CRASHED, error="worker died")
    assert episode_row(none, PAD, failed_reward=0.0).response_mask == [1]
    # aborted by an outage: no outcome, nothing of it trained (mask 0), whatever it sampled
    out = episode_row(two_turns(status=Status.ABORTED, error="serving side unavailable"), PAD, failed_reward=-1.0)
    assert (out.response_ids, out.response_mask, out.aborted, out.status) == ([PAD], [0], True, "aborted")
