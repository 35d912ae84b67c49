"""Why the audit hook stopped a job, in words for the feedback: the refusals the worker's
guard (grader/worker/guard.py) recorded in the job's output folder, read back by the
grader (capped and checked: the file is in a folder the job could write)."""

from __future__ import annotations

import json
from pathlib import Path

from grader.worker.guard import GUARD_FILE


def read_refusals(outdir: Path, limit: int = 20) -> list[dict]:
    """What the guard refused in a job, for the grader (capped; malformed lines skipped)."""
    try:
        with open(Path(outdir) / GUARD_FILE, "rb") as f:
            text = f.read(64 * 1024).decode(errors="replace")
    except OSError:
        return []
    found = []
    for line in text.splitlines()[:limit]:
        try:
            data = json.loads(line)
            found.append({"event": str(data["event"])[:60], "detail": str(data["detail"])[:200],
                          "file": str(data["file"])[:100], "line": int(data["line"])})
        except (ValueError, KeyError, TypeError):
            continue
    return found


def stop_message(outdir: Path) -> str:
    """'' or why the guard stopped the submission in the job whose output is outdir, in
    words for the feedback (the grader calls this; every item of that job fails)."""
    found = read_refusals(outdir)
    if not found:
        return ""
    return ("the grader stopped the submission: it " + describe(found[0])
            + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""))


def describe(refusal: dict) -> str:
    """'loaded a shared library (ctypes.dlopen: ...) at gemm_1_naive.py, line 12'."""
    event = refusal["event"]
    what = WORDS.get(event) or next((w for prefix, w in PREFIX_WORDS if event.startswith(prefix)),
                                    "did something graded code may not do")
    return (f"{what} ({refusal['event']}: {refusal['detail']}) at {refusal['file']}, "
            f"line {refusal['line']}")


PREFIX_WORDS = (("ctypes.", "used ctypes (raw memory or foreign functions)"),
                ("socket.", "used the network"), ("glob.", "listed files outside its folder"),
                ("os.", "used the operating system outside its folder"),
                ("shutil.", "touched files outside its folder"))
WORDS = {
    "open": "opened a file outside its folder",
    **dict.fromkeys(("os.listdir", "os.scandir", "glob.glob"), "listed a folder outside its own"),
    "import": "imported a module graded code may not use",
    "builtins.id": "took an object's address with id()",
    "sys._getframe": "inspected the interpreter's frames",
    "object.__getattr__": "reached an interpreter frame",
    "object.__setattr__": "changed an attribute of the kit or a library",
    **dict.fromkeys(("gc.get_objects", "gc.get_referrers", "gc.get_referents"),
                    "searched the interpreter's objects with gc"),
    "_thread.start_new_thread": "started a thread",
    "subprocess.Popen": "started a process",
    "os.system": "started a process",
    "os.fork": "forked the worker",
    "os.kill": "sent a signal to a process",
    "compile": "compiled code from a string",
    "pickle.find_class": "sent a pickle that names a function or class to call (only "
                         "NumPy arrays, numbers, strings and plain tuples, lists and dicts "
                         "may go through pickled calls such as comm.bcast: not an object of "
                         "a class of your own, a NamedTuple or a dataclass, which each rank "
                         "loads under a name of its own)",
    "exec": "executed code from a string",
    "os.rename": "moved a file into or out of its folder",
    "shutil.move": "moved a file into or out of its folder",
    "shutil.copyfile": "copied a file into or out of its folder",
    "shutil.copytree": "copied a folder into or out of its folder",
    "os.remove": "removed a file outside its folder",
}
