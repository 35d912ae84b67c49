"""`python -m grader [SUBMISSION ...]`: the command line is grader/cli.py; nothing imports
this module, so that running it never loads a second copy of the grader."""

import sys

from grader.cli import main

sys.exit(main())
