"""Which device a run uses, shared by ``gmlp-check diff`` and ``gmlp-check bench``."""

from __future__ import annotations

import torch

from .errors import UsageError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(
                "--device cuda: no CUDA GPU is available here (torch.cuda.is_available() is "
                "False); use --device cpu (Triton's interpreter, small shapes) or --device auto"
            )
        return torch.device("cuda")
    if name == "cpu":
        return torch.device("cpu")
    raise UsageError(f"--device: expected auto, cuda or cpu, got {name!r}")
