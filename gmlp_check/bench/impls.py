"""The implementations the benchmark compares, and how each one is built.

``refimpl`` is the oracle itself (a per-expert loop), built directly. Every other name goes
through ``fused.backends.create``: the built-in ``torch-grouped-mm`` and ``triton`` backends,
or any ``package.module:factory`` spec, so users can time their own fused grouped MLP. A
backend that cannot run on this device raises when it is created; that is recorded as
"unavailable" with the backend's own message and the run goes on.
"""

from __future__ import annotations

from typing import Any

from torch import nn

REFIMPL_SPEC = "refimpl:GroupedMLP"
SPECS = {
    "refimpl": REFIMPL_SPEC,
    "torch-grouped-mm": "torch-grouped-mm",
    "triton": "triton",
}
DEFAULT_IMPLS = tuple(SPECS)


class Unavailable(Exception):
    """The implementation cannot be built on this device (the message says why)."""


def check_name(name: str) -> str:
    """Return the backend spec for an implementation name, or raise ValueError."""
    if name in SPECS:
        return SPECS[name]
    if ":" in name:
        return name
    raise ValueError(
        f"--impl: expected one of {', '.join(SPECS)} or a 'package.module:factory' spec, "
        f"got {name!r}"
    )


def build(name: str, **mlp_kwargs: Any) -> nn.Module:
    spec = check_name(name)
    if spec == REFIMPL_SPEC:
        from refimpl import GroupedMLP

        return GroupedMLP(**mlp_kwargs)
    try:
        from fused.backends import create
    except ImportError as error:
        raise Unavailable(f"fused.backends cannot be imported: {error}") from None
    try:
        return create(spec, **mlp_kwargs)
    except Exception as error:  # the backend's own words on why it cannot run here
        raise Unavailable(f"{type(error).__name__}: {error}") from None
