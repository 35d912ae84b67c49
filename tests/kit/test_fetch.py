import os
from pathlib import Path

import pytest

from nnkit import fetch
from nnkit.mnist import FILES, SAMPLE_DIR, load_split


def _pin_sample(monkeypatch):
    """Pretend the sample files are the genuine ones, so fetching needs no network."""
    pins = {name: fetch.sha256_of(SAMPLE_DIR / name) for name in FILES.values()}
    monkeypatch.setattr(fetch, "SHA256", pins)


def test_fetch_from_folder_verifies_and_is_idempotent(tmp_path, monkeypatch):
    _pin_sample(monkeypatch)
    fetch.fetch_all(tmp_path, str(SAMPLE_DIR))
    assert len(load_split("test", tmp_path)) == 100
    assert fetch.fetch_file(FILES["test-labels"], tmp_path, ["/nonexistent"]) == "already present"


def test_checksum_mismatch_is_refused_and_nothing_left(tmp_path, monkeypatch):
    _pin_sample(monkeypatch)
    src = tmp_path / "src"
    src.mkdir()
    name = FILES["test-labels"]
    (src / name).write_bytes(b"not the real file")
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(fetch.FetchError, match="refusing it"):
        fetch.fetch_file(name, dest, [str(src)])
    assert list(dest.iterdir()) == []


def test_missing_source_file(tmp_path):
    with pytest.raises(fetch.FetchError, match="no such file"):
        fetch.fetch_file(FILES["test-labels"], tmp_path, [str(tmp_path / "nowhere")])


def test_corrupted_existing_file_is_replaced(tmp_path, monkeypatch):
    _pin_sample(monkeypatch)
    name = FILES["test-labels"]
    (tmp_path / name).write_bytes(b"garbage")
    fetch.fetch_file(name, tmp_path, [str(SAMPLE_DIR)])
    assert fetch.sha256_of(tmp_path / name) == fetch.SHA256[name]


@pytest.mark.skipif(not os.environ.get("MNIST_SRC"), reason="MNIST_SRC not set")
def test_full_mnist_from_mnist_src(tmp_path):
    fetch.fetch_all(tmp_path, os.environ["MNIST_SRC"])
    train = load_split("train", tmp_path)
    assert len(train) == 60000 and len(load_split("test", Path(tmp_path))) == 10000
    assert int(train.labels.sum()) == sum(d * n for d, n in enumerate(
        [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]))
