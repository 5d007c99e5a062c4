"""The fused grouped MLP: Triton kernels, autograd glue and a backends registry."""
