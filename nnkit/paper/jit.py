"""numba for the CPU implementations, imported only once the kit has chosen its backend.

numba reads NUMBA_ENABLE_CUDASIM when numba itself is first imported, not numba.cuda:
importing numba for a CPU loop before nnkit.backend.select() would fix the CUDA mode too
early, and the simulator would then fail to start on a machine without a GPU. Every
module of this package takes numba from here.
"""

from nnkit.backend import select

select()

import numba  # noqa: E402
from numba import njit, prange  # noqa: E402

__all__ = ["numba", "njit", "prange"]
