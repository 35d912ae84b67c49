"""The mark scatter_batch leaves for allreduce_gradients."""

seen = []
