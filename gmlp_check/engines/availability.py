"""Whether the real engines can run here, and what ``--megatron auto|emulated|real`` means.

``auto`` is real where megatron-core imports and the run is on CUDA, emulated otherwise;
``real`` where that is not possible is a usage error (exit 2) saying what is missing.
"""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

MEGATRON_CHOICES = ("auto", "emulated", "real")
INSTALL_HINT = "pip install 'megatron-core==0.19.2' einops  (or: pip install -e '.[megatron]')"


def megatron_core_version() -> str | None:
    """The installed megatron-core version, or None when it does not import."""
    try:
        import megatron.core  # noqa: F401
    except Exception:
        return None
    try:
        return importlib.metadata.version("megatron-core")
    except importlib.metadata.PackageNotFoundError:
        from megatron.core import package_info

        return str(package_info.__version__)


def unavailable_reason(device: torch.device) -> str | None:
    """None when the real engines can run on ``device``, else what is missing (one phrase)."""
    import torch  # here: the options read MEGATRON_CHOICES before torch is needed

    why = "megatron-core allocates its gradient buffers on the current GPU"
    if device.type != "cuda":
        return f"CUDA is needed ({why}); this run is on {device.type} (--device)"
    if not torch.cuda.is_available():
        return f"CUDA is needed ({why}); torch.cuda.is_available() is False here"
    if megatron_core_version() is None:
        return f"megatron-core is not importable here: {INSTALL_HINT}"
    return None


def resolve(choice: str, device: torch.device) -> str:
    """'real' or 'emulated' for a --megatron value; ValueError (one line naming the option)
    when the choice is unknown or 'real' cannot run here."""
    if choice not in MEGATRON_CHOICES:
        raise ValueError(
            f"--megatron: expected one of {', '.join(MEGATRON_CHOICES)}, got {choice!r}"
        )
    if choice == "emulated":
        return choice  # asks nothing of megatron-core: importing it (and TE) takes seconds
    why = unavailable_reason(device)
    if choice == "real" and why is not None:
        raise ValueError(f"--megatron real: {why}")
    if choice == "auto":
        return "emulated" if why is not None else "real"
    return choice
