"""Code hidden under `if __name__ == "__main__":` (which is not checked) and made to run
anyway, and protocol hooks that hand raw memory to numpy and numba."""

# ruff: noqa (hostile code, written to be refused)

__name__ = "__main__"  # expect: private
if __name__ == "__main__":
    import ctypes


def run(__name__="__main__"):  # expect: private
    if __name__ == "__main__":
        import os  # expect: import


class Raw:
    def __array__(self, dtype=None):  # expect: private
        return None

    def __cuda_array_interface__(self):  # expect: private
        return {}


for __name__ in ["__main__"]:  # expect: private
    pass

from . import gemm_1_naive as __main__  # expect: private
