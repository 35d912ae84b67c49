"""Verdicts from a job's raw files (gemm, net) and rules on the source (policy, anticheat)."""
