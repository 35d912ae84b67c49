"""`python -m grader [SUBMISSION ...]`: the command line is grader/cli.py; nothing imports
this module, so that running it never loads a second copy of the grader."""

import os
import sys

# The grader's own numerical checks need few BLAS threads; OpenBLAS's idle threads spin on
# every core for a while after each product, beside the timed jobs (set before NumPy).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "4")

from grader.cli import main  # noqa: E402

sys.exit(main())
