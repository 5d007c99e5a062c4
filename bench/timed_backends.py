"""The backends the benchmark compares (``--impl``, the public spelling), and how each is built.

``refimpl`` is the oracle itself (a per-expert loop), built directly. Every other name is a
gmlp-check backend (``gmlp_check.backends``): a built-in name or any ``package.module:factory``
spec, so users can time their own fused grouped MLP. A spec that cannot be loaded is a usage
error; a backend whose factory raises NotImplementedError for this device or dtype is recorded
as "unavailable" with its own words and the run goes on; any other exception from the factory
is an error of that backend.
"""

from __future__ import annotations

import importlib.util

from torch import nn

from gmlp_check.backends import BUILTIN, Backend, BackendError, load
from gmlp_check.refimpl.config import MLPConfig

REFIMPL = "refimpl"
DEFAULT_BACKENDS = (REFIMPL, "torch-grouped-mm", "triton")
# Transformer Engine's op fuser, the peer the fused path is held against where TE is installed.
TE_PEER = "te-ops"


def default_backends() -> tuple[str, ...]:
    """The backends a run without --impl times: te-ops too whenever Transformer Engine is
    installed (found, not imported: importing TE takes seconds)."""
    if importlib.util.find_spec("transformer_engine") is None:
        return DEFAULT_BACKENDS
    return (*DEFAULT_BACKENDS, TE_PEER)


class Unavailable(Exception):
    """The backend cannot be built on this device (the message says why)."""


def check_name(name: str) -> Backend | None:
    """The gmlp-check backend a name selects (None for refimpl); ValueError saying why when it
    cannot be loaded (the caller names the option that gave it)."""
    if name == REFIMPL:
        return None
    if name not in BUILTIN and ":" not in name:
        known = ", ".join([REFIMPL, *BUILTIN])
        raise ValueError(
            f"expected one of {known} or a 'package.module:factory' spec, got {name!r}"
        )
    try:
        return load(name)
    except BackendError as error:
        # The reason only: BackendError names --fused, the checker's option, not this one.
        raise ValueError(str(error).split(": ", 1)[-1]) from None


def build(name: str, config: MLPConfig) -> nn.Module:
    backend = check_name(name)
    if backend is None:
        from gmlp_check.refimpl import GroupedMLP

        return GroupedMLP(config)
    try:
        return backend.build(config)
    except NotImplementedError as error:  # the backend's own words on why not here
        raise Unavailable(str(error) or "not implemented") from None
    except BackendError as error:  # the reason only, as in check_name: --fused is not ours
        raise BackendError(str(error).split(": ", 1)[-1]) from None
