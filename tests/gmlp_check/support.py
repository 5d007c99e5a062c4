"""Shared pieces of the checker's tests: a Checker around any factory, and the CPU matrix."""

from __future__ import annotations

import torch

from gmlp_check.backends import Backend
from gmlp_check.inputs import DEVICE_SIZES
from gmlp_check.matrix import DEVICE_DTYPES, MatrixSelection, default_matrix
from gmlp_check.session import Checker

CPU = torch.device("cpu")
SIZES = DEVICE_SIZES["cpu"]
MATRIX = default_matrix(MatrixSelection(DEVICE_DTYPES["cpu"]))


def checker_for(factory, name: str = "test-factory") -> Checker:
    """A CPU checker whose fused side is ``factory`` (a plain callable, as a spec would load)."""
    return Checker(Backend(name, factory), CPU, SIZES)


def overwrite_case_id(**changes: str) -> str:
    fields = {
        "mode": "overwrite-fsdp", "delay": "0", "zero": "0", "single": "0", "bias": "0",
        "act": "swiglu", "dtype": "fp32", "splits": "ragged-empty", "mb": "2",
    }  # fmt: skip
    fields.update(changes)
    return ",".join(f"{k}={v}" for k, v in fields.items())
