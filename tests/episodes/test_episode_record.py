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


def test_to_dict_is_asdict_and_a_copy():
    """``to_dict`` builds the record field by field (a worker sends every episode through it), and
    gives exactly what ``dataclasses.asdict`` does, as an independent copy."""
    import dataclasses
    from collections import namedtuple

    from agentboost.episodes.record import Status, ToolCallRecord

    Point = namedtuple("Point", "x y")

    @dataclasses.dataclass
    class Note:
        text: str
        tags: list

    calls = [call([1, 2], [3, 4]), call([1, 2, 3, 4, 5], [6])]
    calls[1].rerendered, calls[1].rerender_reason, calls[1].weight_version = True, "rewritten_history", 3
    ep = Episode(episode_id="e", task_id="t", group_id="g", status=Status.TRUNCATED, error="cut",
                 messages=[{"role": "user", "content": [{"text": "hi", "extra": {"n": [1, 2]}}]}],
                 calls=calls, segments=build_segments(calls), split_reasons={"rewritten_history": 1},
                 reward=0.5, reward_components={"outcome": 0.5}, reward_metadata={"note": Note("n", [1, (2, 3)])},
                 tool_calls=[ToolCallRecord("add", True, outcome="passed")], final_answer="42",
                 timings={"wall_s": 0.1}, metadata={"pair": (1, [2]), "point": Point(1, {"a": [3]}), 7: None})
    d = ep.to_dict()
    assert d == dataclasses.asdict(ep)
    assert list(d) == [f.name for f in dataclasses.fields(Episode)]
    assert type(d["metadata"]["pair"]) is tuple and type(d["metadata"]["point"]) is Point
    # nothing is shared with the episode: changing the dict leaves the record as it was
    d["calls"][0]["prompt_ids"].append(99)
    d["segments"][0]["input_ids"].append(99)
    d["messages"][0]["content"][0]["extra"]["n"].append(99)
    d["reward_metadata"]["note"]["tags"].append(99)
    d["tool_calls"][0]["name"] = "mul"
    assert ep.to_dict() == dataclasses.asdict(ep) != d
    assert Episode.from_dict(ep.to_dict()).calls == ep.calls
