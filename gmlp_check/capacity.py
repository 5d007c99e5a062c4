"""Sizes that cannot fit in the device's memory, refused before anything is allocated.

A run with ``--hidden 10000000`` or ``--tokens 1000000000000`` would otherwise allocate until
the machine swaps or the process is killed. The estimate is a lower bound of what a run
holds at once, so only sizes that can never fit are refused:

* per side (``gmlp-check diff`` runs the reference and the fused one side by side, ``bench``
  one implementation at a time), every weight element is held in the module's dtype and in
  its fp32 ``main_grad``, and ``diff`` keeps at least one fp32 snapshot of that main_grad for
  the comparison;
* per side, each token row holds its input and output (``hidden`` wide) and the activation's
  input and output (``2 * ffn`` for the gated activations, ``ffn``), in the module's dtype.
"""

from __future__ import annotations

import os

import torch

# Each expert has fc1 [2 * ffn, hidden] (gated activations) and fc2 [hidden, ffn].
_WEIGHTS_PER_EXPERT = 3  # times hidden * ffn
_FP32 = 4


def needed_bytes(
    experts: int,
    hidden: int,
    ffn: int,
    tokens: int,
    element_size: int,
    sides: int = 2,
    snapshots: int = 1,
) -> int:
    """A lower bound of the memory a run of these sizes holds (module docstring): ``sides``
    modules at once, each weight with its main_grad and ``snapshots`` fp32 copies of it."""
    weights = experts * _WEIGHTS_PER_EXPERT * hidden * ffn
    per_weight = element_size + (1 + snapshots) * _FP32
    per_token = (2 * hidden + 3 * ffn) * element_size
    return sides * (weights * per_weight + tokens * per_token)


def device_bytes(device: torch.device) -> int:
    """All the memory ``device`` has (not what is free now: the bound must hold for sure)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"


def refusal(sizes: dict[str, int], element_size: int, device: torch.device) -> str | None:
    """Why ``sizes`` (experts, hidden, ffn, tokens) cannot fit on ``device``, naming the
    options; None when they may."""
    need = needed_bytes(element_size=element_size, **sizes)
    have = device_bytes(device)
    if need <= have:
        return None
    options = " ".join(f"--{name} {value}" for name, value in sizes.items())
    return (
        f"{options}: a case of these sizes needs at least {gib(need)} and the {device.type} "
        f"device has {gib(have)}; give smaller sizes"
    )
