"""Job and export names are matched whole: a name ending in a newline is refused (issue 26)."""

import pytest


def test_job_and_export_names_match_whole_never_up_to_a_final_newline(tmp_path):
    from agentboost.jobs.store import JobError, JobStore, UnknownJob, check_name

    assert check_name("my-job_1.v2", "name") == "my-job_1.v2"
    for bad in ("job\n", "a/b", "..x", "", "x" * 65, " job"):
        with pytest.raises(JobError):
            check_name(bad, "name")
    with pytest.raises(UnknownJob):
        JobStore(tmp_path)._dir("job-0123abcd\n")
