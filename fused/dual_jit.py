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

With ``TRITON_INTERPRET=1`` in the environment when triton and the kernels are imported,
``triton.jit`` returns interpreted functions and compiles nothing (helpers and
``triton.language``'s own functions included). CPU tensors then run interpreted as always.
Tensors on any other device are refused with an error that says why: Triton's interpreter
copies the storage of each tensor argument to the host and back, but the fused kernels also
read expert weights, biases and gradient regions through tables of device addresses (int64
tensors holding data_ptr() values), which it would dereference on the host. Triton's own
interpreted functions are not launched either: they write the interpreter's names into the
globals of the module that defines them (``triton.language.standard`` for ``tl.cdiv``), which
the clean-up after an interpreted launch would remove again; they are interpreted through
private clones, as compiled helpers are.

Supported Triton: 3.4 and newer. Where the interpreter differs between versions (the patch
hook's signature, numpy >= 2.4 scalars, the alignment check of tensor descriptors), the
difference is detected, not pinned: see _INTERPRETER_FIXES.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
import triton
import triton.experimental.gluon  # imported before any swap: see _interpreted_language
import triton.language as tl
from triton.runtime import interpreter
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

# What ``triton.jit`` returns: compiled, or interpreted under TRITON_INTERPRET=1. Both hold the
# Python function in ``.fn``.
_TRITON_FUNCTIONS = (JITFunction, InterpretedFunction)

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
        if isinstance(value, _TRITON_FUNCTIONS):
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
    # (triton-lang/triton#9171), which breaks every loop with a runtime bound before Triton 3.7.
    return int(self.handle.data.item())


def _patch_lang_tensor_for_numpy_2_4(original: Callable) -> Callable:
    # Triton 3.4 and 3.5 call the hook as (tensor) and set attributes for good; 3.6 and newer
    # pass a patch scope as well, which undoes its changes after the launch. Either way every
    # attribute is put back by _interpreted_language.
    def patch(tensor: type, *scope: Any) -> None:
        original(tensor, *scope)
        if scope:
            scope[0].set_attr(tensor, "__index__", _index_of_scalar)
        else:
            tensor.__index__ = _index_of_scalar

    return patch


def _validate_descriptor_in_bytes(self: Any) -> None:
    # What Triton 3.6 and newer check, with their messages: TMA's rules, strides in bytes.
    itemsize = self.base.dtype.element_ty.primitive_bitwidth // 8
    if self.base.data.item() % 16:
        raise AssertionError("base must be 16-byte aligned")
    for stride in self.strides[:-1]:
        if stride.data.item() * itemsize % 16:
            raise AssertionError("stride must be 16-byte aligned")
    if self.strides[-1].data.item() != 1:
        raise AssertionError("last dim must be contiguous")


def _descriptor_strides_checked_in_elements() -> bool:
    """Whether the interpreter wants a tensor descriptor's strides to be multiples of 16
    elements, not 16 bytes (Triton 3.4 and 3.5). It then refuses every fp16 matrix whose rows
    are not a multiple of 16 elements, e.g. 24 (48 bytes), which TMA and the host-side
    TensorDescriptor accept; the 16-bit interpreter launches take descriptors (fused/tiles.py).

    Asked of the interpreter's own check with such a descriptor. Built field by field because
    the constructor's signature differs between versions; should the fields change too, the
    question cannot be asked and the check is left alone."""

    def int64(value: int) -> Any:
        return interpreter.TensorHandle(np.array([value], dtype=np.int64), tl.int64)

    try:
        desc = object.__new__(interpreter.TensorDescHandle)
        desc.base = interpreter.TensorHandle(
            np.array([0], dtype=np.uint64), tl.pointer_type(tl.float16)
        )
        desc.shape = [int64(2), int64(24)]
        desc.strides = [int64(24), int64(1)]
        desc.block_shape = [2, 8]
        desc.ndim = 2
        desc.validate()
    except AssertionError:
        return True
    except Exception:  # internals of a newer Triton: nothing known to fix
        return False
    return False


# (owner, attribute, replacement) set while an interpreted kernel runs, decided once by asking
# this Triton, not by its version number.
_INTERPRETER_FIXES: list[tuple[Any, str, Callable]] = [
    (
        interpreter,
        "_patch_lang_tensor",
        _patch_lang_tensor_for_numpy_2_4(interpreter._patch_lang_tensor),
    ),
]
if _descriptor_strides_checked_in_elements():
    _INTERPRETER_FIXES.append(
        (interpreter.TensorDescHandle, "validate", _validate_descriptor_in_bytes)
    )


@contextlib.contextmanager
def _interpreted_language() -> Iterator[None]:
    """Run the interpreter with triton.language's @jit functions swapped for interpreted
    clones (tl.sum, tl.zeros, tl.cdiv, ...) and _INTERPRETER_FIXES applied, then put every
    attribute it touched back.

    Whatever triton imports lazily must be imported before the swap, or it captures the
    clones: the interpreter's argument handling imports triton.experimental.gluon, which checks
    that tl.cdiv is a JITFunction; hence its import at the top of this module."""
    snapshots = [(obj, dict(vars(obj))) for obj in _PATCHED_BY_INTERPRETER]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in _INTERPRETER_FIXES]
    try:
        for owner, name, replacement in _INTERPRETER_FIXES:
            setattr(owner, name, replacement)
        for module in _LANGUAGE_MODULES:
            for name, value in list(vars(module).items()):
                if isinstance(value, _TRITON_FUNCTIONS):
                    setattr(module, name, _interpreted(value.fn))
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
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


def compiles() -> bool:
    """Whether ``triton.jit`` compiles here (False under TRITON_INTERPRET=1): only then can the
    fused kernels take tensors on a GPU."""
    return isinstance(triton.jit(_nothing), JITFunction)


def _nothing() -> None:
    pass


class DualKernel:
    """A kernel launched as ``kernel[grid](*args)`` on CUDA (compiled) or CPU (interpreted).

    ``compiled`` is None when TRITON_INTERPRET=1 made triton.jit interpret: CPU launches only
    then (see the module's docstring)."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        jitted = triton.jit(fn)
        self.compiled: JITFunction | None = jitted if isinstance(jitted, JITFunction) else None
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
            elif self.compiled is None:
                raise RuntimeError(
                    "TRITON_INTERPRET=1 makes Triton interpret every kernel, and the fused "
                    f"kernels cannot run interpreted on {device.type} tensors: they read through "
                    "tables of device addresses, which the interpreter would dereference on the "
                    "host. Use CPU tensors, or unset TRITON_INTERPRET."
                )
            else:
                # Triton launches on the current device; make it the tensors' device.
                with torch.cuda.device(device):
                    self.compiled[grid](*args, **kwargs)

        return launch


def dual_jit(fn: Callable) -> DualKernel:
    return DualKernel(fn)
