"""Undoing the run-time traps from inside the worker's process."""

# ruff: noqa (hostile code, written to be refused)

import gc  # expect: import

import numpy as np

from nnkit.backend import to_device

cells = to_device.__closure__  # expect: private
original = cells[0].cell_contents  # expect: private
for obj in gc.get_objects():
    if type(obj).__name__ == "Traps":  # a name is a string (gc, above, is what is refused)
        obj.disarm()
frame_globals = (lambda: 0).__globals__  # expect: private
subclasses = ().__class__.__base__.__subclasses__()  # expect: private
mapping = type(np.float32).__dict__  # expect: private
Made = type("Made", (), {})  # expect: builtin
parent = super()  # expect: builtin
ident = id(obj)  # expect: builtin
view = memoryview(b"")  # expect: builtin
text = open("/proc/self/maps").read()  # expect: builtin
ordered = np.float32.mro()  # expect: private


def sneak():
    try:
        raise ValueError
    except ValueError as err:
        return err.__traceback__.tb_frame.f_back.f_globals  # expect: private


def gemm_register(A, B, C, alpha, beta):
    generator = (x for x in range(3))
    return generator.gi_frame  # expect: private
