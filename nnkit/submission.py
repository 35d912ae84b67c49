"""Finding and loading the modules of an implementation: solution/, starter/ or a folder.

Modules are loaded from their file as members of a package private to the folder, so two
implementations can be loaded side by side, modules of one folder can import one another
relatively, and nothing is imported from the folder that the kit did not ask for.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

KIT_ROOT = Path(__file__).resolve().parents[1]
NAMED = {"solution": KIT_ROOT / "solution", "starter": KIT_ROOT / "starter"}


class SubmissionError(RuntimeError):
    """A module or function the kit expects is missing from an implementation."""


def resolve(impl: str | Path) -> Path:
    """'solution', 'starter', or the path of a folder holding the student modules."""
    folder = NAMED.get(str(impl), Path(impl))
    if not folder.is_dir():
        raise SubmissionError(f"{impl}: not 'solution', 'starter' or an existing folder")
    return folder.resolve()


def package_name(folder: Path) -> str:
    """The name of the private package the folder's modules are loaded under."""
    return "_nnkit_impl_" + hashlib.sha1(str(Path(folder).resolve()).encode()).hexdigest()[:12]


def _package_for(folder: Path) -> str:
    """A private package whose path is the folder, so that the folder's modules can import
    one another with relative imports (`from .net_1_kernels import ...`)."""
    folder = Path(folder).resolve()
    name = package_name(folder)
    if name not in sys.modules:
        package = ModuleType(name)
        package.__path__ = [str(folder)]  # type: ignore[attr-defined]
        package.__package__ = name
        sys.modules[name] = package
    return name


def load_module(folder: Path, module: str) -> ModuleType:
    path = Path(folder) / f"{module}.py"
    if not path.is_file():
        raise SubmissionError(f"{path}: missing (expected module {module}.py)")
    name = f"{_package_for(folder)}.{module}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[name]
        raise
    return mod


def load_function(folder: Path, module: str, function: str) -> Any:
    mod = load_module(folder, module)
    fn = getattr(mod, function, None)
    if not callable(fn):
        raise SubmissionError(f"{module}.py defines no function {function}()")
    return fn
