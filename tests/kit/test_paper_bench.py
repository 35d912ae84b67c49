"""`python -m nnkit bench --quick` and `python -m nnkit tune --quick`, end to end on the
bundled sample, at a size that keeps each under half a minute on two cores."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_kit

TINY = ["--data", "sample", "--width", "16", "--out"]


@pytest.mark.slow
def test_bench_quick_end_to_end(tmp_path):
    result = run_kit("nnkit", "bench", "--quick", "--batches", "1,50", "--seconds", "0.2",
                     "--leapfrog-nets", "4x32", "--leapfrog-repeats", "1", *TINY,
                     str(tmp_path), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "bench.json").read_text())
    ran = {r["impl"] for r in report["rows"]}
    assert {"naive", "threads", "matpar", "blas-1", "blas-all"} <= ran
    for r in report["rows"]:
        assert r["seconds_per_epoch"] > 0 and r["gflops"] > 0
        assert 0 <= r["test_accuracy"] <= 1
        assert r["speedup_naive"] > 0 and r["speedup_serial"] > 0
    assert {(r["net"], r["batch"]) for r in report["rows"]} == {
        (net, batch) for net in ("Net-1h", "Net-2h") for batch in (1, 50)}
    assert report["machine"]["blas"] and report["machine"]["cpu"]
    if not report["machine"]["gpu"]:  # GPU implementations are listed with the reason
        assert any(s.startswith("gpu-register: no GPU") for s in report["skipped"])
    leap = json.loads((tmp_path / "leapfrog.json").read_text())
    assert {(r["variant"], r["k"]) for r in leap} >= {(v, k) for v in ("paper", "pipelined")
                                                      for k in (1, 2, 3, 4)}
    for name in ("bench.md", "time.png", "gflops.png", "speedup.png", "leapfrog.md",
                 "leapfrog.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert "| naive | 1 |" in (tmp_path / "bench.md").read_text()


@pytest.mark.slow
def test_tune_quick_end_to_end(tmp_path):
    result = run_kit("nnkit", "tune", "--quick", *TINY, str(tmp_path), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads((tmp_path / "tune.json").read_text())
    assert [r["lr"] for r in rows] == [0.001, 0.002, 0.01, 0.1, 0.5, 1.0]
    best = [r for r in rows if r.get("best")]
    assert len(best) == 1 and best[0]["val_accuracy"] == max(r["val_accuracy"] for r in rows)
    assert 0 <= best[0]["test_accuracy"] <= 1
    assert (tmp_path / "tune.png").stat().st_size > 0
