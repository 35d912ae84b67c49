"""Cheat: PyTorch's matrix product (imported when the module loads)."""

import numpy as np
import torch

from nnkit.backend import copy_into, to_device, to_host


def gemm_naive(A, B, C, alpha, beta):
    d = torch.addmm(torch.as_tensor(to_host(C)), torch.as_tensor(to_host(A)),
                    torch.as_tensor(to_host(B)), beta=beta, alpha=alpha)
    copy_into(C, to_device(d.numpy().astype(np.float32)))
