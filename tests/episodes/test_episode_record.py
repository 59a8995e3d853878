"""The episode record: segment building, the invariant, JSONL round trip."""

from helpers import model_call as call

from agentboost.episodes.record import (
    SCHEMA_VERSION,
    Episode,
    build_segments,
    check_episode,
    read_episodes,
    write_episodes,
)


def test_extending_calls_merge_and_others_split():
    calls = [call([1, 2], [3, 4]), call([1, 2, 3, 4, 5, 6], [7]), call([9, 9], [8])]
    segs = build_segments(calls)
    assert [s.call_indices for s in segs] == [[0, 1], [2]]
    assert segs[0].input_ids == [1, 2, 3, 4, 5, 6, 7]
    assert segs[0].loss_mask == [0, 0, 1, 1, 0, 0, 1]
    ep = Episode(episode_id="e", task_id="t", group_id="g", calls=calls, segments=segs)
    assert check_episode(ep) == []


def test_invariant_violations_are_reported():
    calls = [call([1, 2], [3, 4])]
    segs = build_segments(calls)
    segs[0].loss_mask[1] = 1  # a prompt token under the loss
    ep = Episode(episode_id="e", task_id="t", group_id="g", calls=calls, segments=segs)
    assert any("mask 1" in p for p in check_episode(ep))
    segs[0].loss_mask.pop()
    assert any("differ" in p for p in check_episode(ep))


def test_jsonl_round_trip(tmp_path):
    calls = [call([1, 2], [3])]
    ep = Episode(episode_id="e", task_id="t", group_id="g", calls=calls, segments=build_segments(calls),
                 reward=1.0, reward_components={"outcome": 1.0})
    write_episodes(tmp_path / "e.jsonl", [ep])
    back = list(read_episodes(tmp_path / "e.jsonl"))
    assert back[0] == ep and back[0].schema_version == SCHEMA_VERSION
    assert check_episode(back[0].to_dict()) == []
