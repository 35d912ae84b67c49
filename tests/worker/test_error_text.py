"""The error text a worker writes for a submission's exception (grader/worker/common.py):
the line of the submission where it was raised, and the call in another of its files that
led there (a helper that raised on what a caller gave it)."""

import importlib.util
import sys

from grader.worker.common import describe_error


def _load(folder, name):
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_raising_line_and_the_call_from_another_file_are_named(tmp_path):
    (tmp_path / "helpers_x.py").write_text(
        "def column(values, j):\n    return values[j]\n")
    (tmp_path / "backprop_x.py").write_text(
        "from helpers_x import column\n\n"
        "def backward(values):\n    return column(values, 5)\n\n"
        "def local(values):\n    return values[9]\n")
    sys.path.insert(0, str(tmp_path))
    try:
        backprop = _load(tmp_path, "backprop_x")
        try:
            backprop.backward([1, 2])
        except IndexError as err:
            text = describe_error(err, tmp_path)
        assert text.endswith("(helpers_x.py, line 2: return values[j]; called from "
                             "backprop_x.py, line 4: return column(values, 5))"), text
        try:
            backprop.local([1])
        except IndexError as err:
            text = describe_error(err, tmp_path)
        assert text.endswith("(backprop_x.py, line 7: return values[9])"), text
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("helpers_x", "backprop_x"):
            sys.modules.pop(name, None)
