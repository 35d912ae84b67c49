"""Reading MNIST from its original IDX files (optionally gzip-compressed).

IDX layout: two zero bytes, a type code (0x08 = unsigned byte), the number of dimensions,
then one big-endian uint32 per dimension, then the data in C order. Every check below
raises MnistFormatError naming the file and what is wrong with it.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

UBYTE = 0x08
IMAGE_SIDE = 28
N_CLASSES = 10

# The four files of the distribution and their SHA-256 (of the .gz files).
FILES = {
    "train-images": "train-images-idx3-ubyte.gz",
    "train-labels": "train-labels-idx1-ubyte.gz",
    "test-images": "t10k-images-idx3-ubyte.gz",
    "test-labels": "t10k-labels-idx1-ubyte.gz",
}
SHA256 = {
    FILES["train-images"]: "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    FILES["train-labels"]: "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    FILES["test-images"]: "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    FILES["test-labels"]: "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}

# A genuine 600/100-image excerpt shipped with the package, for tests and the simulator.
SAMPLE_DIR = Path(__file__).parent / "data" / "sample"


class MnistFormatError(ValueError):
    """An IDX file is missing, truncated, corrupt or not the expected kind."""


def default_dir() -> Path:
    """Where `make data` puts the files: $NNKIT_DATA, else ./data/mnist."""
    return Path(os.environ.get("NNKIT_DATA", "data/mnist"))


def _read_bytes(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise MnistFormatError(f"{path}: no such file (run `make data` first)") from None
    if path.suffix != ".gz":
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise MnistFormatError(f"{path}: corrupt or truncated gzip data ({err})") from None


def parse_idx(data: bytes, name: str = "<bytes>") -> np.ndarray:
    """Decode the bytes of an IDX file of unsigned bytes into an array."""
    if len(data) < 4:
        raise MnistFormatError(f"{name}: {len(data)} bytes, too short for an IDX header")
    zero1, zero2, type_code, ndim = data[:4]
    if zero1 or zero2 or ndim == 0:
        raise MnistFormatError(f"{name}: bad magic number {data[:4].hex()}, not an IDX file")
    if type_code != UBYTE:
        raise MnistFormatError(f"{name}: element type 0x{type_code:02x}, expected 0x08 (ubyte)")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise MnistFormatError(f"{name}: truncated inside the header")
    dims = struct.unpack(f">{ndim}I", data[4:header])
    expected = int(np.prod(dims, dtype=np.int64))
    found = len(data) - header
    if found < expected:
        raise MnistFormatError(
            f"{name}: truncated: shape {dims} needs {expected} data bytes, found {found}"
        )
    if found > expected:
        raise MnistFormatError(f"{name}: {found - expected} unexpected bytes after the data")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def read_idx(path: str | os.PathLike) -> np.ndarray:
    path = Path(path)
    return parse_idx(_read_bytes(path), str(path))


def encode_idx(array: np.ndarray) -> bytes:
    """The IDX bytes of a uint8 array (used to write samples and test fixtures)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, UBYTE, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.tobytes()


def read_images(path: str | os.PathLike) -> np.ndarray:
    images = read_idx(path)
    if images.ndim != 3 or images.shape[1:] != (IMAGE_SIDE, IMAGE_SIDE):
        raise MnistFormatError(f"{path}: shape {images.shape}, expected (n, 28, 28) images")
    return images


def read_labels(path: str | os.PathLike) -> np.ndarray:
    labels = read_idx(path)
    if labels.ndim != 1:
        raise MnistFormatError(f"{path}: shape {labels.shape}, expected a vector of labels")
    if labels.size and labels.max() >= N_CLASSES:
        raise MnistFormatError(f"{path}: label {labels.max()} out of range 0..9")
    return labels


@dataclass(frozen=True)
class Split:
    """Images as float32 rows scaled to [0, 1], labels as int64."""

    images: np.ndarray  # (n, 784)
    labels: np.ndarray  # (n,)

    def __len__(self) -> int:
        return len(self.labels)


def load_split(split: str, folder: str | os.PathLike | None = None) -> Split:
    """Load 'train' or 'test' from a folder holding the four .gz files."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    folder = Path(folder) if folder is not None else default_dir()
    images = read_images(folder / FILES[f"{split}-images"])
    labels = read_labels(folder / FILES[f"{split}-labels"])
    if len(images) != len(labels):
        raise MnistFormatError(
            f"{folder}: {len(images)} {split} images but {len(labels)} labels"
        )
    flat = images.reshape(len(images), -1).astype(np.float32) / np.float32(255)
    return Split(flat, labels.astype(np.int64))
