import gzip

import numpy as np
import pytest

from nnkit.mnist import (
    FILES,
    SAMPLE_DIR,
    MnistFormatError,
    encode_idx,
    load_split,
    parse_idx,
    read_images,
    read_labels,
)


def test_sample_is_genuine_mnist():
    train, test = load_split("train", SAMPLE_DIR), load_split("test", SAMPLE_DIR)
    assert train.images.shape == (600, 784) and test.images.shape == (100, 784)
    assert train.images.dtype == np.float32
    assert 0.0 <= train.images.min() and train.images.max() == 1.0
    # First labels of the original files (shared/data/mnist/README.md).
    assert list(train.labels[:10]) == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    assert list(test.labels[:10]) == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]


def test_round_trip_raw_and_gzip(tmp_path):
    images = np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28)
    (tmp_path / "a.idx").write_bytes(encode_idx(images))
    (tmp_path / "a.gz").write_bytes(gzip.compress(encode_idx(images)))
    assert np.array_equal(read_images(tmp_path / "a.idx"), images)
    assert np.array_equal(read_images(tmp_path / "a.gz"), images)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x00", "too short"),
        (b"\x12\x34\x08\x01\x00\x00\x00\x01\x05", "bad magic"),
        (b"\x00\x00\x0d\x01\x00\x00\x00\x01\x05", "element type"),
        (b"\x00\x00\x08\x03\x00\x00\x00\x02", "inside the header"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x05\x01\x02", "truncated"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x01\x01\x02", "unexpected bytes"),
    ],
)
def test_corrupt_idx_rejected(data, message):
    with pytest.raises(MnistFormatError, match=message):
        parse_idx(data, "x")


def test_truncated_gzip_rejected(tmp_path):
    whole = (SAMPLE_DIR / FILES["train-images"]).read_bytes()
    cut = tmp_path / "cut.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(MnistFormatError, match="corrupt or truncated gzip"):
        read_images(cut)


def test_wrong_kind_of_file(tmp_path):
    labels = tmp_path / "labels.idx"
    labels.write_bytes(encode_idx(np.array([1, 2, 3], dtype=np.uint8)))
    with pytest.raises(MnistFormatError, match="expected \\(n, 28, 28\\)"):
        read_images(labels)
    bad = tmp_path / "bad-labels.idx"
    bad.write_bytes(encode_idx(np.array([1, 12], dtype=np.uint8)))
    with pytest.raises(MnistFormatError, match="out of range"):
        read_labels(bad)


def test_missing_file_says_how_to_get_it(tmp_path):
    with pytest.raises(MnistFormatError, match="make data"):
        load_split("train", tmp_path)


def test_image_label_count_mismatch(tmp_path):
    (tmp_path / FILES["train-images"]).write_bytes(
        gzip.compress(encode_idx(np.zeros((3, 28, 28), np.uint8))))
    (tmp_path / FILES["train-labels"]).write_bytes(
        gzip.compress(encode_idx(np.zeros(2, np.uint8))))
    with pytest.raises(MnistFormatError, match="3 train images but 2 labels"):
        load_split("train", tmp_path)
