"""The static scan for library matrix products (grader/checks/anticheat.py): what it
names, and the submission's own names it leaves alone."""

import textwrap

from grader.checks import anticheat


def _found(folder, files: dict[str, str], module: str = "gemm_1_naive") -> set[str]:
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))
    return {f.what for f in anticheat.scan(folder, module)}


def test_library_products_are_named_however_they_are_reached(tmp_path):
    found = _found(tmp_path, {"gemm_1_naive.py": """
        import numpy as np
        import cupy as cp
        from numpy import linalg, matmul
        from operator import attrgetter
        def gemm_naive(A, B, C, alpha, beta):
            a = np.asarray(A)
            x = a.dot(B) + cp.matmul(A, B) + linalg.multi_dot([A, B]) + np.inner(A, B)
            y = attrgetter("einsum")(np)
            z = np.__dict__["tensordot"]
            w = vars(np)["vdot"]
            return a @ B, x, y, z, w, matmul
    """})
    assert found == {"a.dot", "cp.matmul", "linalg.multi_dot", "np.inner", "the @ operator",
                     "the string 'einsum'", "the string 'tensordot'", "the string 'vdot'",
                     "from numpy import matmul"}


def test_the_submissions_own_names_are_not_products(tmp_path):
    """Found by a round of correct submissions that lost every point: a logger named
    "gemm", a field `shape.inner`, a device function `dot` in a module of their own."""
    found = _found(tmp_path, {
        "gemm_1_naive.py": """
            import logging
            from dataclasses import dataclass
            from device_helpers import dot
            import device_helpers
            log = logging.getLogger("gemm")
            TIMINGS = {"gemm": 0.0, "dot": 1}
            @dataclass(frozen=True)
            class Shape:
                inner: int
            def gemm_naive(A, B, C, alpha, beta, shape=Shape(3)):
                k = shape.inner
                return dot(A, B, k), device_helpers.dot(A, B, k), TIMINGS["gemm"]
        """,
        "device_helpers.py": """
            def dot(a, b, k):
                return 0.0
        """})
    assert found == set()


def test_a_helper_module_of_the_submission_is_scanned_too(tmp_path):
    found = _found(tmp_path, {
        "gemm_1_naive.py": "from device_helpers import dot\n",
        "device_helpers.py": "import numpy\ndot = numpy.dot\n"})
    assert found == {"numpy.dot"}


def test_a_file_named_like_a_library_is_not_the_submissions_own(tmp_path):
    """A red team's numpy.py beside the kernel: `import numpy` still gets NumPy in the
    worker (the submission is last on the path), so its products are NumPy's."""
    found = _found(tmp_path, {
        "gemm_1_naive.py": "import numpy as np\nimport math\nx = np.matmul\ny = math.prod\n",
        "numpy.py": "def matmul(a, b):\n    return 0\n",
        "math.py": "prod = 1\n"})
    assert found == {"np.matmul"}
