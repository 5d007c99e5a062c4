"""main_grad buffers the way Megatron lays them out, with guard bands to catch stray writes.

Megatron DDP and FSDP give each parameter a ``main_grad`` that is a view into one large fp32
gradient buffer shared by many parameters, shaped like the parameter (megatron-core 0.19.2
``_ParamAndGradBuffer._get`` views its slice as ``param.data.shape``; Megatron-FSDP 0.6.1's
``get_main_grad()`` ends in ``.view(param.shape)``). An ``Arena`` does the same: one allocation
per side (reference or fused) holding every parameter's region, viewed as the parameter's shape,
each region preceded and followed by a guard band filled with a canary bit pattern. A kernel
that writes past its region (wrong group offsets, a wrong stride) changes a canary, which
``guard_violations`` reports exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

# Two alternating fp32 bit patterns: finite, far from any gradient value, so a computed value
# never reproduces them by accident, and a NaN or zero written over them is caught as well.
CANARY_BITS = (0x5EEDC0DE, -0x21524111)  # 0x5EEDC0DE and 0xDEADBEEF as int32
GUARD_ELEMENTS = 128
# Regions start on 256-byte boundaries, as slices of Megatron's bucketed buffers do, so that
# kernels needing aligned base pointers (TMA descriptors) see realistic addresses.
ALIGN_ELEMENTS = 64

FILL_KINDS = ("nan", "random")


@dataclass(frozen=True)
class Region:
    name: str
    offset: int
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def _canaries(n: int) -> torch.Tensor:
    return torch.tensor(CANARY_BITS, dtype=torch.int32, device="cpu").repeat((n + 1) // 2)[:n]


def _align(n: int) -> int:
    return -(-n // ALIGN_ELEMENTS) * ALIGN_ELEMENTS


def memory_span(t: torch.Tensor) -> tuple[int, int]:
    """[start, end) byte addresses a tensor can touch (empty span for an empty tensor)."""
    if t.numel() == 0:
        return (t.data_ptr(), t.data_ptr())
    extent = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) + 1
    return (t.data_ptr(), t.data_ptr() + extent * t.element_size())


def spans_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    a0, a1 = memory_span(a)
    b0, b1 = memory_span(b)
    return a0 < b1 and b0 < a1


class Arena:
    """One fp32 allocation holding named main_grad regions separated by guard bands."""

    def __init__(
        self,
        layout: Mapping[str, tuple[int, ...]],
        device: torch.device | str,
        guard: int = GUARD_ELEMENTS,
    ) -> None:
        if guard < 1:
            raise ValueError(f"guard: expected at least 1 element, got {guard}")
        self.guard = guard
        self.regions: dict[str, Region] = {}
        offset = _align(guard)
        self._gaps: list[tuple[int, int, str]] = [(0, offset, "before the first region")]
        previous = None
        for name, shape in layout.items():
            self.regions[name] = Region(name, offset, tuple(shape))
            if previous is not None:
                gap_start = self.regions[previous].offset + self.regions[previous].numel
                self._gaps.append((gap_start, offset, f"between {previous} and {name}"))
            previous = name
            offset = _align(offset + self.regions[name].numel + guard)
        if previous is not None:
            end = self.regions[previous].offset + self.regions[previous].numel
            self._gaps.append((end, offset, f"after {previous}"))
        self.numel = offset
        self.storage = torch.empty(self.numel, dtype=torch.float32, device=device)
        self._fill_guards()

    def _fill_guards(self) -> None:
        bits = self.storage.view(torch.int32)
        for start, end, _ in self._gaps:
            n = end - start
            bits[start:end] = _canaries(n).to(bits.device)

    def region(self, name: str) -> torch.Tensor:
        """The region of parameter ``name``, viewed as the parameter's shape."""
        r = self.regions[name]
        return self.storage[r.offset : r.offset + r.numel].view(r.shape)

    def fill(self, name: str, kind: str, generator: torch.Generator) -> None:
        """Fill a region with the NaN sentinel or with random 'before' values (normal, std 1)."""
        if kind == "nan":
            self.region(name).fill_(float("nan"))
        elif kind == "random":
            values = torch.randn(self.regions[name].shape, generator=generator, device="cpu")
            self.region(name).copy_(values)
        else:
            raise ValueError(f"kind: expected one of {', '.join(FILL_KINDS)}, got {kind!r}")

    def clone(self) -> Arena:
        """A separate allocation with the same layout and identical contents."""
        twin = Arena.__new__(Arena)
        twin.guard = self.guard
        twin.regions = dict(self.regions)
        twin._gaps = list(self._gaps)
        twin.numel = self.numel
        twin.storage = self.storage.clone()
        return twin

    def guard_violations(self) -> list[str]:
        """One line per guard band whose canary changed (exact, bitwise)."""
        bits = self.storage.view(torch.int32)
        problems = []
        for start, end, where in self._gaps:
            n = end - start
            changed = (bits[start:end].cpu() != _canaries(n)).nonzero().flatten()
            if changed.numel():
                first = int(changed[0])
                problems.append(
                    f"{changed.numel()} of {n} guard elements {where} overwritten "
                    f"(first at +{first}: {self.storage[start + first].item()!r})"
                )
        return problems

    def holds(self, t: torch.Tensor) -> bool:
        """Whether a tensor's memory overlaps this arena's allocation."""
        return spans_overlap(t, self.storage)
