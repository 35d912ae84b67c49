"""Reaching the dangerous parts of allowed modules: star imports, helpers' modules,
numba's internals, getattr in disguise, attribute reads in patterns and f-strings."""

# ruff: noqa (hostile code, written to be refused)

import dataclasses
import enum
import operator
import typing

import numba
from numba import njit  # expect: numba
from numpy import *  # expect: star-import  # noqa: F403

import cupy  # expect: import
import scipy.linalg  # expect: import
import torch  # expect: import
from nnkit.backend import cuda

getter = operator.attrgetter("__closure__")  # expect: builtin
hints = typing.get_type_hints(getter)  # expect: builtin
evaluate = enum.bltns.eval  # expect: import
builtins = dataclasses.builtins  # expect: import
modules = cuda.sys.modules  # expect: import
driver = cuda.cudadrv.driver  # expect: numba
simulator = numba.cuda.simulator  # expect: numba
config = numba.config  # expect: numba
device = cuda.get_current_device()  # expect: numba
cuda.close()  # expect: numba
reduction = cuda.reduce(lambda a, b: a + b)  # expect: numba
label = f"{getter.__class__}"  # expect: private
typing_sys = typing.sys  # expect: import


def sniff(thing):
    match thing:
        case object(__class__=klass):  # expect: builtin, private
            return klass
    return (njit, cupy, scipy, torch)


def streams(A):
    side = cuda.stream()  # expect: numba
    cuda.to_device(A).stream.context.reset()  # expect: numba
    A.flags.writeable = True  # expect: module-assign
    A[0, 0] = 1.0
