"""Triton kernels of the fused grouped MLP: grouped GEMMs over ragged per-expert row blocks.

Each kernel is a :class:`fused.dual_jit.DualKernel`: compiled for CUDA tensors, interpreted for
CPU tensors. Host-side launchers live in :mod:`fused.grouped_ops`.
"""
