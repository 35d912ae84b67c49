"""`python -m nnkit mpirun -n N [--mpiexec PATH] -- COMMAND ...`: COMMAND on N local ranks.

The Makefiles' `train-mpi` starts its job through this, not through a bare `mpiexec`, so
that it gets the launcher the kit's own jobs get (nnkit.collectives.mpiexec_command): the
mpiexec beside the interpreter, else the PATH's, and with Open MPI the flags it wants on a
small machine or as root (--oversubscribe, --allow-run-as-root). `--print` shows the
command line instead of running it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from nnkit.collectives import mpiexec_command


def parse_ranks(text: str) -> int:
    """NP as the Makefiles pass it: a whole number of ranks, 1 or more."""
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"NP must be a number of ranks, 1 or more (got {text!r})")
    return int(text)


def launch_command(ranks: int, command: list[str], mpiexec: str | None = None) -> list[str]:
    """The full command line: the kit's mpiexec with its flags, then `command`."""
    if not command:
        raise ValueError("no command to run after --")
    return [*mpiexec_command(ranks, mpiexec), *command]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnkit mpirun",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--np", dest="ranks", required=True, help="number of ranks")
    parser.add_argument("--mpiexec", default=None,
                        help="the launcher (default: beside this interpreter, else the PATH's)")
    parser.add_argument("--print", action="store_true", help="print the command, run nothing")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="what every rank runs, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        argv_out = launch_command(parse_ranks(args.ranks), command, args.mpiexec or None)
    except (ValueError, FileNotFoundError) as err:
        print(f"nnkit mpirun: {err}", file=sys.stderr)
        return 2
    if args.print:
        print(shlex.join(argv_out))
        return 0
    sys.stdout.flush()
    # Replace this process, so that signals (Ctrl-C) go straight to mpiexec.
    os.execvp(argv_out[0], argv_out)
    return 1  # not reached
