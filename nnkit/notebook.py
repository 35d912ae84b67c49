"""Running the kit's modules as notebook cells.

In an assignment notebook, the code cells of each module (gemm_1_naive, net_2_backprop,
...) run in the notebook's one namespace, yet they are graded as separate modules, and
net_2_backprop.py imports from its sibling with `from .net_1_kernels import ...`. The
notebook's first code cell calls setup(), which makes such relative imports find the names
the notebook has already defined, so the cells run unchanged in both places.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

PACKAGE = "_nnkit_notebook"


class _NamespaceModule(ModuleType):
    """A module whose attributes are looked up in the notebook's namespace at import time."""

    def __init__(self, name: str, namespace: dict[str, Any]):
        super().__init__(name)
        self._namespace = namespace

    def __getattr__(self, attr: str) -> Any:
        try:
            return self._namespace[attr]
        except KeyError:  # the import then says it cannot import the name
            raise AttributeError(attr) from None


def setup(namespace: dict[str, Any], modules: Iterable[str]) -> str:
    """Choose the GPU or the simulator, and let `from .<module> import name` in the
    notebook resolve against `namespace` for each of `modules`. Returns the backend."""
    from nnkit.backend import select

    backend = select()
    package = ModuleType(PACKAGE)
    package.__path__ = []  # type: ignore[attr-defined]  # a package, with nothing on disk
    sys.modules[PACKAGE] = package
    for module in modules:
        sys.modules[f"{PACKAGE}.{module}"] = _NamespaceModule(f"{PACKAGE}.{module}", namespace)
    namespace["__package__"] = PACKAGE
    return backend.describe()
