"""All parameters of a network in one flat vector, for the loop implementations.

numba compiles loops over plain arrays best, and a list of differently shaped matrices is
awkward to pass to it. So the loop implementations keep W_1 (out x in, row-major), b_1,
W_2, b_2, ... back to back in one float32 vector. A gradient has the same layout, which
makes the partial gradients of several threads rows of one (threads, size) array and their
reduction a sum of rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnkit import network


@dataclass(frozen=True)
class Layout:
    """Where each layer lives: layers[l] = (W offset, b offset, fan in, fan out), and
    acts[l] = where layer l's outputs start in a per-example activation buffer."""

    layers: np.ndarray  # (L, 4) int64
    acts: np.ndarray  # (L,) int64
    size: int  # parameters in all
    act_size: int  # activations of one example, input excluded

    @classmethod
    def of(cls, sizes: list[int]) -> Layout:
        network.check_sizes(sizes)
        rows, offsets, pos, act = [], [], 0, 0
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
            rows.append((pos, pos + fan_in * fan_out, fan_in, fan_out))
            pos += fan_in * fan_out + fan_out
            offsets.append(act)
            act += fan_out
        return cls(np.array(rows, dtype=np.int64), np.array(offsets, dtype=np.int64), pos, act)

    @property
    def sizes(self) -> list[int]:
        return [int(self.layers[0, 2])] + [int(r[3]) for r in self.layers]

    def weight_mask(self) -> np.ndarray:
        """True where the flat vector holds a weight (the L2 term applies), False at biases."""
        mask = np.zeros(self.size, dtype=bool)
        for w, b, _, _ in self.layers:
            mask[w:b] = True
        return mask


def pack(params: network.Params) -> tuple[np.ndarray, Layout]:
    """The flat float32 vector of the parameters, and its layout."""
    layout = Layout.of(params.sizes)
    theta = np.empty(layout.size, dtype=np.float32)
    for (w, b, _, fan_out), W, bias in zip(layout.layers, params.weights, params.biases,
                                                strict=True):
        theta[w:b] = W.reshape(-1)
        theta[b:b + fan_out] = bias
    return theta, layout


def unpack(theta: np.ndarray, layout: Layout) -> network.Params:
    """Copies of the matrices and vectors held in a flat vector (parameters or gradients)."""
    weights, biases = [], []
    for w, b, fan_in, fan_out in layout.layers:
        weights.append(theta[w:b].reshape(fan_out, fan_in).copy())
        biases.append(theta[b:b + fan_out].copy())
    return network.Params(weights, biases)
