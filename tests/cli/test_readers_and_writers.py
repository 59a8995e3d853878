"""Every reader names the file, the line and the problem (bad encoding, nesting, a lone surrogate,
corruption, an unknown schema version); outputs are written atomically and a killed write's
leftovers are cleaned (issue 26, readers and writers)."""

import gzip
import json

import pytest
from helpers import cli, model_call

from agentboost.episodes.record import Episode, build_segments, write_episodes
from agentboost.files import clean_temporaries, iter_jsonl
from agentboost.run.checkpoint import verify_checkpoint
from agentboost.trainer.export import export_run
from agentboost.trainer.sft import SFTDataError, load_sft_rows


class Bad(ValueError):
    pass


@pytest.mark.parametrize("content, message", [
    (b'{"a": 1}\n{"b": "\xff\xfe"}\n', "t.jsonl:2: not UTF-8 text"),
    (b'{"a": 1}\n' + b"[" * 100_000 + b"]" * 100_000 + b"\n", "t.jsonl:2: JSON nested too deeply"),
    (b'{"q": "ok"}\n{"q": "half a pair: \\ud800"}\n', "t.jsonl:2: text holds a lone surrogate"),
    (b'{"a": 1}\n{"a": \n', "t.jsonl:2: invalid JSON"),
])
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path, content, message):
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    with pytest.raises(Bad, match=message):
        list(iter_jsonl(path, Bad))


def test_a_growing_file_ends_at_its_half_written_last_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1}\n{"a": ')
    assert list(iter_jsonl(path, Bad, growing=True)) == [(1, {"a": 1})]


def test_a_corrupt_gzip_file_is_named(tmp_path):
    path = tmp_path / "t.jsonl.gz"
    data = gzip.compress(b"".join(b'{"a": %d}\n' % i for i in range(1000)))
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(Bad, match="t.jsonl.gz: not a readable gzip file"):
        list(iter_jsonl(path, Bad))


def test_the_command_line_reports_it_in_one_line(tmp_path):
    path = tmp_path / "e.jsonl"
    write_episodes(path, [episode("a")])
    path.write_bytes(path.read_bytes() + b'{"x": "\xc3\x28"}\n')
    r = cli("check", str(path), timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "e.jsonl:2: not UTF-8 text" in r.stderr, r.stderr


def episode(eid, reward=1.0):
    calls = [model_call([1, 2], [3])]
    return Episode(episode_id=eid, task_id="t", group_id="g", calls=calls, segments=build_segments(calls), reward=reward)


def test_export_leaves_no_partial_file_on_error(tmp_path):
    run = tmp_path / "run"
    (run / "episodes").mkdir(parents=True)
    write_episodes(run / "episodes" / "step_000001.jsonl", [episode("a"), episode("b")])
    (run / "episodes" / "step_000002.jsonl").write_text('{"schema_version": 1, "broken": \n')
    out = tmp_path / "x.jsonl"
    with pytest.raises(ValueError, match="step_000002.jsonl:1"):
        export_run(run, out)
    assert not out.exists() and list(tmp_path.glob(".x.jsonl*")) == []
    assert export_run(run, out, limit=1) == 1 and len(out.read_text().splitlines()) == 1


def test_sft_refuses_episodes_of_an_unknown_schema_version(tmp_path):
    path = tmp_path / "e.jsonl"
    write_episodes(path, [episode("a")])
    assert len(load_sft_rows([path])) == 1
    rec = json.loads(path.read_text())
    path.write_text(json.dumps({**rec, "schema_version": 99}) + "\n")
    with pytest.raises(SFTDataError, match="e.jsonl:1: episode schema_version 99 is not supported"):
        load_sft_rows([path])


def test_a_manifest_listing_no_files_does_not_verify_and_leftovers_are_cleaned(tmp_path):
    ckpt = tmp_path / "checkpoints" / "step_000001"
    ckpt.mkdir(parents=True)
    (ckpt / "manifest.json").write_text(json.dumps({"files": {}}))
    assert verify_checkpoint(ckpt) == "the manifest lists no files"
    (tmp_path / "checkpoints" / ".step_000002.tmp-abc").mkdir()
    (tmp_path / "checkpoints" / ".latest.tmp-xyz").write_text("step_000002")
    assert sorted(clean_temporaries(tmp_path / "checkpoints")) == [".latest.tmp-xyz", ".step_000002.tmp-abc"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_000001"]



@pytest.mark.parametrize("suffix", [".jsonl", ".parquet", ".yaml"])
def test_no_bytes_make_a_reader_fail_but_by_name(tmp_path, suffix):
    # task files (JSONL and parquet) and training configs, of any bytes at all: read, or refused
    # with the file's name in one line; never another exception
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from agentboost.errors import InputError
    from agentboost.run.config import load_config
    from agentboost.tasks import load_tasks

    path = tmp_path / f"f{suffix}"
    prefixes = {".jsonl": [b"", b'{"question": "q"}\n'], ".parquet": [b"PAR1", b""], ".yaml": [b"", b"run:\n  steps: "]}

    @settings(max_examples=120, deadline=None, derandomize=True)
    @given(prefix=st.sampled_from(prefixes[suffix]), data=st.binary(max_size=300))
    def check(prefix, data):
        path.write_bytes(prefix + data + (b"PAR1" if suffix == ".parquet" else b""))
        try:
            load_config(path) if suffix == ".yaml" else load_tasks(path)
        except InputError as e:
            assert str(path) in str(e) or suffix == ".yaml", str(e)
            assert "\n" not in str(e).strip(), str(e)

    check()


def test_a_corrupt_parquet_task_file_is_named(tmp_path):
    path = tmp_path / "tasks.parquet"
    path.write_bytes(b"PAR1 not really a parquet file PAR1")
    r = cli("score", "--reward", "exact_answer", "--tasks", path, "--answers", path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert f"{path}: not a readable parquet file" in r.stderr
