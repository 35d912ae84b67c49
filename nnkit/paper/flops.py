"""The operation count behind every GFLOP/s figure of the benchmark.

Per example and layer l (fan in a, fan out b), counting a multiply-add as two operations:

    forward       z = W a + b                  2ab
    weights       dW += delta a^T              2ab
    delta below   W^T delta (not at layer 1)   2ab

and per minibatch step, for every weight 4 operations (the L2 term lam*W added to the
gradient, then W -= lr*g) and for every bias 2 (its update). The 1/n scaling, sigmoids,
softmax and bias additions are O(units) per example, under 1% of the total for the
paper's nets, and are not counted. For Net-1h (784-1024-10) that is 3.27 MFLOP per
example plus 3.25 MFLOP per step: at batch 1 the update is half of the work, at batch 800
0.12%. (The first layer's delta is not needed, and Net-1h's second layer is small, so an
example costs about 4 operations per parameter here, not the 6 of a deep net.)
"""

from __future__ import annotations


def per_example(sizes: list[int]) -> int:
    pairs = list(zip(sizes[:-1], sizes[1:], strict=True))
    return sum(2 * a * b for a, b in pairs) * 2 + sum(2 * a * b for a, b in pairs[1:])


def per_step(sizes: list[int]) -> int:
    return sum(4 * a * b + 2 * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))


def per_epoch(sizes: list[int], images: int, batch: int) -> int:
    """Operations of one epoch over `images` examples in batches of `batch`."""
    steps = -(-images // batch)
    return images * per_example(sizes) + steps * per_step(sizes)
