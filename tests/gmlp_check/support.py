"""Shared pieces of the checker's tests: a Checker around any factory, the CPU matrix, and
interrupting a command-line run at a chosen point."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

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


def interrupt_when_waiting(
    process: subprocess.Popen, folder: Path, what: str, signum: int = signal.SIGTERM
) -> tuple[str, str]:
    """Send ``signum`` to ``process`` once its factory touched ``folder``/waiting (the run
    reached ``what``); its (stdout, stderr)."""
    deadline = time.monotonic() + 240
    while not (folder / "waiting").exists() and process.poll() is None:
        assert time.monotonic() < deadline, f"the run never reached {what}"
        time.sleep(0.05)
    process.send_signal(signum)
    return process.communicate(timeout=120)
