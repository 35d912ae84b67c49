import numpy as np
import pytest

from tests.conftest import run_kit

SMALL = ["--data", "sample", "--limit", "60", "--pool", "4", "--hidden", "6", "--batch", "25",
         "--epochs", "2"]


def test_reference_run_saves_parameters(tmp_path):
    out = tmp_path / "params.npz"
    result = run_kit("nnkit", "train", *SMALL, "--save", str(out))
    assert result.returncode == 0, result.stderr
    assert "epoch   2: loss" in result.stdout and "test accuracy" in result.stdout
    with np.load(out) as saved:
        assert saved["W1"].shape == (6, 49) and saved["b2"].shape == (10,)
        assert "test_accuracy" in str(saved["meta"])


@pytest.mark.slow
def test_solution_in_the_simulator_with_its_own_gemm():
    result = run_kit("nnkit", "train", "--impl", "solution", "--gemm", "register", *SMALL[:-2],
                     "--epochs", "1")
    assert result.returncode == 0, result.stderr
    assert "test accuracy" in result.stdout


def test_full_mnist_in_the_simulator_is_refused_with_advice(tmp_path):
    result = run_kit("nnkit", "train", "--impl", "solution", "--data", "sample",
                     env={"NNKIT_DEVICE": "sim"})
    assert result.returncode == 2
    assert "hours" in result.stderr and "--impl reference" in result.stderr


def test_bad_values_get_clear_errors():
    for args, message in [(["--batch", "0"], "batch size"), (["--lr", "-1"], "learning rate"),
                          (["--hidden", "0"], "positive integers"),
                          (["--gemm", "fastest"], "invalid choice"),
                          (["--impl", "nowhere"], "not 'solution', 'starter'"),
                          (["--data", "/nonexistent"], "no such file")]:
        result = run_kit("nnkit", "train", *SMALL[:2], *args)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
