"""Class patterns that read attributes of any object: `case C(x=p)` binds subject.x once
isinstance(subject, C) holds, and a library class, an ABC or a runtime Protocol says yes
to what it likes (red team: `case object(modules=m)` on sys, then getattr off builtins)."""

# ruff: noqa (hostile code, written to be refused)

import abc
import sys  # expect: import
from enum import Enum
from typing import Protocol, runtime_checkable

from nnkit.backend import cuda


@runtime_checkable  # expect: decorator
class HasModules(Protocol):
    modules: dict


class Anything(abc.ABC):
    pass


def becomes_object(cls):
    return object


@becomes_object
class Replaced:
    pass


class Meta(type):
    pass


class WithMeta(metaclass=Meta):
    pass


def reach(x):
    match x:
        case object(modules=mods):  # expect: builtin
            return mods
        case HasModules(modules=mods):  # expect: builtin
            return mods
        case Anything(getattr=fetch):  # expect: builtin
            return fetch
        case Replaced(modules=mods):  # expect: builtin
            return mods
        case WithMeta(modules=mods):  # expect: builtin
            return mods
        case type(mro=m):  # expect: builtin, private
            return m
        case int(real=r):  # expect: builtin
            return r


class Plan:
    pass


class Other:
    pass


class Box(Enum):
    pass


# A capture or a walrus rebinds a plain class's name to anything (review).
match object:
    case Plan:  # expect: rebind
        pass

if (Other := object):  # expect: rebind
    pass

match len:
    case hasattr:
        pass


def rebound(x):
    match x:
        case Plan(modules=mods):  # expect: builtin
            return mods
        case Other(modules=mods):  # expect: builtin
            return mods
    # Enum's _convert_ reads and writes any loaded module's globals: only what a class's
    # own body defines is its own.
    leak = Box._convert_("Leak", "sys", lambda n: n == "modules")  # expect: private
    return leak, hasattr(None, "__array_interface__")  # expect: private


@cuda.jit
def gemm_naive_kernel(A, B, C, alpha, beta):
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        C[i, j] = alpha * acc + beta * C[i, j]


def gemm_naive(A, B, C, alpha, beta):
    gemm_naive_kernel[(C.shape[0] + 15) // 16, (C.shape[1] + 15) // 16](A, B, C, alpha, beta)
