"""One Triton kernel, compiled for CUDA tensors and interpreted for CPU tensors, in one process.

``triton.jit`` decides at decoration time, from ``TRITON_INTERPRET``, whether a kernel is
compiled or interpreted, and a process that imported triton cannot switch afterwards. The
checker and the tests need both at once: CI and laptops run the real kernels on CPU tensors
through the interpreter, the GPU runs them compiled, and the same test session may hold both
kinds of tensors. Setting ``TRITON_INTERPRET`` before importing triton would depend on import
order and would make CUDA tensors interpreted too. So each kernel is kept as a plain function
and wrapped twice; a launch picks the wrapper by the device of its first tensor argument.

Helper functions stay ordinary ``@triton.jit`` functions. An interpreted kernel cannot call a
compiled function, so the interpreted copy of a kernel runs with a private copy of its module's
globals in which every ``@triton.jit`` helper is an interpreted clone; and while an interpreted
kernel runs, the ``@jit`` functions of ``triton.language`` itself (``tl.sum``, ``tl.zeros``,
``tl.cdiv``, ...) are swapped for their interpreted clones, the way the interpreter swaps the
builtins, and put back afterwards. Not thread-safe: do not interpret and compile kernels
concurrently in two threads of one process.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
import triton
import triton.experimental.gluon  # imported before any swap: see _interpreted_language
import triton.language as tl
from triton.runtime import interpreter
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

# id(module globals) -> the copy that interpreted kernels and helpers of that module run with
_interpreted_globals: dict[int, dict[str, Any]] = {}
# id(python function) -> its one interpreted clone; one object per function, because the
# interpreter recognises tl.sum's and tl.cumsum's combine functions by identity (fast paths).
_interpreted_clones: dict[int, InterpretedFunction] = {}
# Modules whose @jit functions kernels reach as attributes (tl.sum, tl.standard.cdiv, ...).
_LANGUAGE_MODULES = (tl, tl.core, tl.standard, tl.math)


def _globals_for_interpreter(module_globals: dict[str, Any]) -> dict[str, Any]:
    key = id(module_globals)
    if key in _interpreted_globals:
        return _interpreted_globals[key]
    copy = dict(module_globals)
    # Registered before the helpers are converted, so helpers that call each other terminate.
    _interpreted_globals[key] = copy
    for name, value in module_globals.items():
        if isinstance(value, JITFunction):
            copy[name] = _interpreted(value.fn)
    return copy


def _interpreted(fn: Callable) -> InterpretedFunction:
    key = id(fn)
    if key in _interpreted_clones:
        return _interpreted_clones[key]
    clone = types.FunctionType(
        fn.__code__,
        _globals_for_interpreter(fn.__globals__),
        fn.__name__,
        fn.__defaults__,
        fn.__closure__,
    )
    clone.__annotations__ = dict(fn.__annotations__)
    clone.__module__ = fn.__module__
    clone.__qualname__ = fn.__qualname__
    interpreted = _interpreted_clones[key] = InterpretedFunction(clone)
    return interpreted


# Everything the interpreter patches while it runs (builtins of tl and tl.core, tl.tensor's
# operators, ...). It restores its own patches for the kernel but not those made when an
# interpreted helper of tl.core (tl.sum, tl.cumsum) is called, which would leave later compiled
# kernels in this process calling interpreter code; so all of it is put back here.
_PATCHED_BY_INTERPRETER = (
    *_LANGUAGE_MODULES,
    tl.core.tensor,
    tl.core.dtype,
    tl.core.tensor_descriptor_base,
)
_MISSING = object()


def _index_of_scalar(self: tl.core.tensor) -> int:
    # The interpreter holds scalars as 1-element arrays; numpy >= 2.4 refuses int() of those
    # (triton-lang/triton#9171), which breaks every loop with a runtime bound.
    return int(self.handle.data.item())


def _patch_lang_tensor_for_numpy_2_4(original: Callable) -> Callable:
    def patch(tensor: type, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", _index_of_scalar)

    return patch


@contextlib.contextmanager
def _interpreted_language() -> Iterator[None]:
    """Run the interpreter with triton.language's @jit functions swapped for interpreted
    clones (tl.sum, tl.zeros, tl.cdiv, ...), then put every attribute it touched back.

    Whatever triton imports lazily must be imported before the swap, or it captures the
    clones: the interpreter's argument handling imports triton.experimental.gluon, which checks
    that tl.cdiv is a JITFunction; hence its import at the top of this module."""
    snapshots = [(obj, dict(vars(obj))) for obj in _PATCHED_BY_INTERPRETER]
    original_patch_lang_tensor = interpreter._patch_lang_tensor
    try:
        interpreter._patch_lang_tensor = _patch_lang_tensor_for_numpy_2_4(
            original_patch_lang_tensor
        )
        for module in _LANGUAGE_MODULES:
            for name, value in list(vars(module).items()):
                if isinstance(value, JITFunction):
                    setattr(module, name, _interpreted(value.fn))
        yield
    finally:
        interpreter._patch_lang_tensor = original_patch_lang_tensor
        for obj, before in snapshots:
            now = vars(obj)
            for name in [n for n in now if n not in before]:
                delattr(obj, name)
            for name, value in before.items():
                if now.get(name, _MISSING) is not value:
                    setattr(obj, name, value)


def _first_tensor(args: tuple, kwargs: dict) -> torch.Tensor:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value
    raise TypeError("a Triton kernel launch needs at least one tensor argument")


class DualKernel:
    """A kernel launched as ``kernel[grid](*args)`` on CUDA (compiled) or CPU (interpreted)."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self.compiled = triton.jit(fn)
        self._interpreted: InterpretedFunction | None = None

    @property
    def interpreted(self) -> InterpretedFunction:
        # Built on first use: every module the kernel's helpers live in is fully imported by then.
        if self._interpreted is None:
            self._interpreted = _interpreted(self.fn)
        return self._interpreted

    def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., None]:
        def launch(*args: Any, **kwargs: Any) -> None:
            device = _first_tensor(args, kwargs).device
            if device.type == "cpu":
                with _interpreted_language():
                    self.interpreted[grid](*args, **kwargs)
            else:
                # Triton launches on the current device; make it the tensors' device.
                with torch.cuda.device(device):
                    self.compiled[grid](*args, **kwargs)

        return launch


def dual_jit(fn: Callable) -> DualKernel:
    return DualKernel(fn)
