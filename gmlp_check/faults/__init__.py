"""Known bugs of fused grouped MLPs, injectable to prove the checker: one registry of two kinds.

* surface faults (``surface.py``) wrap any module a factory builds and rewrite its effects
  where CONTRACT.md speaks; each applies to the cases where its bug changes something;
* policy faults (``policy.py``) corrupt one decision of our own fused backends' main_grad
  policy, and apply only to backends that take one.

``gmlp-check faults`` lists them, ``diff --inject NAME`` runs one, ``mutants`` runs them all;
docs/faults.md is generated from these declarations.
"""

from __future__ import annotations

from torch import nn

from ..matrix import Case
from . import policy
from .classes import BUG_CLASSES, BugClass
from .policy import POLICY_FAULTS, PolicyFault
from .surface import SURFACE_FAULTS, SurfaceFault

Fault = PolicyFault | SurfaceFault

FAULTS: dict[str, Fault] = {f.name: f for f in (*SURFACE_FAULTS, *POLICY_FAULTS)}


class FaultError(ValueError):
    """An unknown fault, or a module that cannot take it."""


def get(name: str) -> Fault:
    try:
        return FAULTS[name]
    except KeyError:
        raise FaultError(f"--inject: expected one of {', '.join(FAULTS)}, got {name!r}") from None


def refusal(fault: Fault, module: nn.Module) -> str | None:
    """Why ``fault`` cannot be injected into ``module``, or None if it can: a surface fault
    goes into any module."""
    return policy.refusal(module) if isinstance(fault, PolicyFault) else None


def inject(module: nn.Module, fault: Fault, case: Case | None = None) -> nn.Module:
    """``module`` with ``fault`` acting in it, for ``case`` (which a surface fault needs)."""
    why = refusal(fault, module)
    if why is not None:
        raise FaultError(f"--inject {fault.name}: {why}")
    if isinstance(fault, SurfaceFault):
        if case is None:
            raise FaultError(f"--inject {fault.name}: a surface fault acts on a case's run")
        return fault.wrap(module, case)
    module.main_grad_policy = fault.policy()
    return module


__all__ = [
    "BUG_CLASSES",
    "FAULTS",
    "BugClass",
    "Fault",
    "FaultError",
    "PolicyFault",
    "SurfaceFault",
    "get",
    "inject",
    "refusal",
]
