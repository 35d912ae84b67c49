"""The job a worker is told, as the grader writes it and the worker reads it back."""

import json

import pytest

from grader.worker.jobs import GemmJob, Job, MpiJob, NetJob, NotebookJob, TimedKernel


@pytest.mark.parametrize("job", [
    GemmJob(submission="/s", module="gemm_1_naive", function="gemm_naive",
            cases=[{"M": 1}], replay=[0], counted=None, perf_seed=7),
    GemmJob(perf=[{"M": 2}], timed=[TimedKernel("naive", "gemm_1_naive", "gemm_naive", 3)]),
    NetJob(kind="net_train", submission="/s", data={"images": "x"}, modes=[{"epochs": 1}],
           audit_calls=[[1, 2]]),
    MpiJob(kind="ring", cases=[{"ranks": 3}], ranks_dir="/r", limits={"processes": 8}),
    NotebookJob(submission="/s", checks=[{"function": "f", "seed": 1}], thread_stack_kb=64),
])
def test_a_job_comes_back_as_it_was_written(job):
    again = Job.from_json(json.loads(json.dumps(job.to_json())))
    assert again == job and type(again) is type(job)


def test_an_unknown_kind_or_field_is_refused():
    with pytest.raises(ValueError, match="unknown job kind"):
        Job.from_json({"kind": "gemm_fast"})
    with pytest.raises(ValueError, match="secret"):
        Job.from_json({"kind": "gemm", "secret": 1})
    with pytest.raises(ValueError, match="unknown job kind"):
        Job.from_json({"module": "gemm_1_naive"})  # no kind at all
