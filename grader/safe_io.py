"""Reading what a worker wrote, with caps: the grader's memory and its reports never grow
with what a submission chose to write.

A job's results folder holds whatever its processes left there (grader/isolation/sandbox.py copies
out regular files of up to [sandbox] file_mb each): arrays the worker saved, but also
anything the submission wrote under the same names. Every reader here

- opens regular files only (O_NOFOLLOW | O_NONBLOCK, then fstat: a symlink, FIFO, socket
  or device is refused without blocking);
- refuses or cuts a file beyond the size the caller expects, before reading it whole;
- for .npz, checks every member's .npy header (a plain numeric, bool or fixed-length
  string dtype, never object or structured; shape x itemsize within the cap) before any
  array is allocated: a 1.5 MB file that declares three 512 MiB arrays costs nothing;
- for text, decodes binary-safely (errors="replace") and strips terminal control
  sequences (CSI and OSC escapes, C0 and C1 controls but newline and tab), which would
  otherwise reach the instructor's terminal (window title, clipboard) through a message.

UnsafeFile (a ValueError) says what was refused; a missing file stays FileNotFoundError.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import zipfile
import zlib
from pathlib import Path

import numpy as np

ERROR_CHARS = 4000  # characters of one error text kept for the reports
HEADER_BYTES = 10_000  # an .npy header longer than this is refused (numpy's own default)
KINDS = "biufcSU"  # bool, integers, floats, complex, fixed-length byte and unicode strings


class UnsafeFile(ValueError):
    """A file refused: not a regular file, larger than expected, or not the format."""


# ---------------------------------------------------------------------------------------
# Opening


def open_regular(path: str | os.PathLike) -> tuple[int, int]:
    """(fd, size) of a regular file, opened read-only without following a final symlink
    and without blocking on a FIFO; FileNotFoundError when absent, UnsafeFile otherwise."""
    name = Path(path).name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UnsafeFile(f"{name}: a symbolic link, not read") from None
        if err.errno in (errno.ENXIO, errno.EOPNOTSUPP):  # a socket
            raise UnsafeFile(f"{name}: not a regular file") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnsafeFile(f"{name}: not a regular file")
    return fd, info.st_size


def read_head(path: str | os.PathLike, max_bytes: int) -> tuple[bytes, int]:
    """At most max_bytes from the start of a regular file, and the file's size."""
    fd, size = open_regular(path)
    with os.fdopen(fd, "rb") as f:
        return f.read(min(size, max_bytes) if size else max_bytes), size


def read_bytes(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The whole of a regular file of at most max_bytes; UnsafeFile if it is larger."""
    fd, size = open_regular(path)
    with os.fdopen(fd, "rb") as f:
        if size > max_bytes:
            raise UnsafeFile(f"{Path(path).name}: {size:,} bytes, more than the "
                             f"{max_bytes:,} accepted")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew while read
        raise UnsafeFile(f"{Path(path).name}: more than the {max_bytes:,} bytes accepted")
    return data


# ---------------------------------------------------------------------------------------
# Text

# Escape sequences of terminals (ECMA-48): CSI (ESC [ or 0x9b) with parameters and a final
# byte; OSC, DCS, SOS, PM and APC strings (ESC ] P X ^ _, or 0x9d 0x90 0x98 0x9e 0x9f) up
# to BEL or ST, or to the end of the line when unterminated; other two-byte escapes.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
# C0 but newline and tab, DEL, C1, and the bidi controls that can reorder what follows
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")


def _surrogate(match: re.Match) -> str:
    code = ord(match.group())
    # os.fsdecode's surrogateescape: an undecodable byte b becomes U+DC00 + b
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "?"


def clean_text(text: object, max_chars: int | None = None) -> str:
    """`text` as printable str: undecodable bytes (surrogate escapes) as \\xNN, CR as
    newline, terminal escape sequences and control characters (C0 but newline and tab,
    C1, DEL, bidi overrides) removed; past max_chars, cut with "... (N more characters)"."""
    s = "" if text is None else str(text)
    s = _SURROGATES.sub(_surrogate, s)
    s = s.replace("\r\n", "\n").replace("\r", "\n")
    s = _CONTROLS.sub("", _ESCAPES.sub("", s))
    if max_chars is not None and len(s) > max_chars:
        s = f"{s[:max_chars]}... ({len(s) - max_chars:,} more characters)"
    return s


def one_line(text: object, max_chars: int = 300) -> str:
    """clean_text on one line (for the terminal: progress, failure lines)."""
    return clean_text(" ".join(clean_text(text).split()), max_chars)


def read_text(path: str | os.PathLike, max_chars: int = ERROR_CHARS) -> str:
    """A regular text file's start, decoded with errors="replace", cleaned (clean_text)
    and cut at max_chars; reads at most 4 * max_chars bytes whatever the file's size."""
    data, size = read_head(path, 4 * max_chars + 4)
    text = clean_text(data.decode("utf-8", errors="replace"))
    unread = max(0, size - len(data))
    extra = max(0, len(text) - max_chars)
    if unread:
        return f"{text[:max_chars]}... (about {extra + unread:,} more characters)"
    if extra:
        return f"{text[:max_chars]}... ({extra:,} more characters)"
    return text


def read_json(path: str | os.PathLike, max_bytes: int) -> object:
    """The JSON value of a regular file of at most max_bytes (UnsafeFile beyond, or when
    it is not JSON)."""
    data = read_bytes(path, max_bytes)
    try:
        return json.loads(data.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError) as err:
        raise UnsafeFile(f"{Path(path).name}: not valid JSON ({err})") from None


# Messages that carry an error text (as the checks word them), not a verdict
_ERROR_MESSAGE = re.compile(r"(?:rank \d+:? )?(?:raised |training raised |no result|unreadable)")


def collapse_repeats(outcomes: list, min_chars: int = 80) -> None:
    """Outcomes (objects with .label and .message) of one item, where many cases failed
    with the same long error text (an error at import, say): the first keeps it, with "(the
    same error in N more cases)", and the others point to it, so that the reports hold the
    text once per item. Verdicts (a wrong element, a finding) are left as they are."""
    first: dict[str, object] = {}
    count: dict[str, int] = {}
    for outcome in outcomes:
        if len(outcome.message) > min_chars and _ERROR_MESSAGE.match(outcome.message):
            first.setdefault(outcome.message, outcome)
            count[outcome.message] = count.get(outcome.message, 0) + 1
    for message, head in first.items():
        more = count[message] - 1
        if not more:
            continue
        for outcome in outcomes:
            if outcome is not head and outcome.message == message:
                outcome.message = f"the same error as {head.label}"
        head.message = f"{message} (the same error in {more} more case{'s' * (more > 1)})"


# ---------------------------------------------------------------------------------------
# Arrays


def _check_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path) -> tuple[str, int]:
    """(array name, its size in bytes) from a member's .npy header, read alone."""
    key = info.filename
    if not key.endswith(".npy") or "/" in key or key.startswith("."):
        raise UnsafeFile(f"{path.name}: member {clean_text(key, 60)!r} is not an array")
    with zf.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(
                member, max_header_size=HEADER_BYTES)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(
                member, max_header_size=HEADER_BYTES)
        else:
            raise UnsafeFile(f"{path.name}: {key}: .npy format {version} not accepted")
    name = key[:-4]
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None \
            or dtype.kind not in KINDS:
        raise UnsafeFile(f"{path.name}: array {name!r} has dtype {dtype}: only plain "
                         "numeric, bool and fixed-length string arrays are accepted")
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise UnsafeFile(f"{path.name}: array {name!r} has a bad shape {shape}")
    return name, math.prod(shape) * dtype.itemsize


def load_npz(path: str | os.PathLike, *, max_bytes: int, max_members: int,
             names: set[str] | list[str] | None = None) -> dict[str, np.ndarray]:
    """The arrays of an .npz file, as np.load(allow_pickle=False) gives them, provided
    that it holds at most max_members arrays (only those in `names`, when given) whose
    data declare at most max_bytes in all. Every member's header is checked before any
    array is read; UnsafeFile says what was refused."""
    path = Path(path)
    fd, size = open_regular(path)
    with os.fdopen(fd, "rb") as f:
        # The zip's own overhead: headers of each member, twice, and the .npy headers.
        if size > max_bytes + (max_members + 1) * (2 * HEADER_BYTES):
            raise UnsafeFile(f"{path.name}: {size:,} bytes, more than the {max_bytes:,} "
                             "the grader expects of this result")
        try:
            with zipfile.ZipFile(f) as zf:
                infos = zf.infolist()
                if len(infos) > max_members:
                    raise UnsafeFile(f"{path.name}: {len(infos)} arrays, more than the "
                                     f"{max_members} expected")
                total, seen = 0, set()
                for info in infos:
                    name, nbytes = _check_member(zf, info, path)
                    if names is not None and name not in names:
                        raise UnsafeFile(f"{path.name}: unexpected array {name!r}")
                    if name in seen:
                        raise UnsafeFile(f"{path.name}: array {name!r} twice")
                    seen.add(name)
                    total += nbytes
                    if total > max_bytes:
                        raise UnsafeFile(
                            f"{path.name}: its arrays declare {total:,} bytes or more, over "
                            f"the {max_bytes:,} the grader expects of this result: refused "
                            "unread")
                arrays = {}
                for info in infos:
                    with zf.open(info) as member:
                        arrays[info.filename[:-4]] = np.lib.format.read_array(
                            member, allow_pickle=False, max_header_size=HEADER_BYTES)
                return arrays
        except UnsafeFile:
            raise
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError,
                NotImplementedError, RuntimeError, KeyError, SyntaxError) as err:
            raise UnsafeFile(f"{path.name}: not a readable .npz ({type(err).__name__}: "
                             f"{clean_text(err, 200)})") from None


def nbytes(*arrays: np.ndarray) -> int:
    return sum(int(a.nbytes) for a in arrays)


def npz_cap(expected_bytes: int) -> int:
    """What load_npz accepts of a result expected to hold expected_bytes: room for the
    same arrays in float64 (a wrong dtype is reported, not refused), and 1 MiB."""
    return 2 * expected_bytes + (1 << 20)
