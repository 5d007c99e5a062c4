"""Compile the real kernel launches for a GPU target on a machine without a GPU.

Launches are captured instead of run (their arguments are the real ones, built by
fused.grouped_ops with GPU tile sizes), then compiled to a cubin the way a CUDA launch would
compile them: Triton's own argument specialisation (alignment, unit strides) and launch
options. This catches what the interpreter cannot: code the GPU compiler rejects, and loads
that fail to vectorise and pipeline. It uses a Triton internal, ``JITFunction._pack_args``
(Triton 3.5 and newer); on 3.4, which lacks it, the tests that use it skip.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile, make_backend
from triton.runtime.jit import create_function_from_signature

import gmlp_check.fused.grouped_ops as grouped_ops
from gmlp_check.fused import tiles
from gmlp_check.fused.dual_jit import DualKernel
from gmlp_check.fused.tiles import tiles_for

H100_H200 = GPUTarget("cuda", 90, 32)


@dataclass
class Launch:
    kernel: DualKernel
    grid: tuple
    args: tuple
    kwargs: dict[str, Any]


@contextlib.contextmanager
def captured_launches(monkeypatch) -> Iterator[list[Launch]]:
    """Record kernel launches instead of running them, with the GPU's tile sizes."""
    launches: list[Launch] = []

    def capture(kernel: DualKernel, grid: tuple):
        def launch(*args, **kwargs):
            launches.append(Launch(kernel, grid, args, kwargs))

        return launch

    monkeypatch.setattr(DualKernel, "__getitem__", capture)
    # The launchers ask tiles_for directly, the weight gradient through tiles.wgrad_tiles.
    for module in (grouped_ops, tiles):
        monkeypatch.setattr(
            module,
            "tiles_for",
            lambda kernel, device, dtype: tiles_for(kernel, torch.device("cuda"), dtype),
        )
    yield launches


def compile_for_gpu(launch: Launch, target: GPUTarget = H100_H200):
    fn = launch.kernel.compiled
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound_args, specialization, options = binder(*launch.args, **launch.kwargs)
    options, signature, constexprs, attrs = fn._pack_args(
        backend, launch.kwargs, bound_args, specialization, options
    )
    return compile(
        ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__
    )
