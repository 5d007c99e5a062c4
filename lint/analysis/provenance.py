"""Which object a weight expression holds: the Parameter itself or a tensor standing in for it.

Fused paths handle several objects for one weight: the Parameter (which carries main_grad
and its flags), the copy restored from ``ctx`` / saved tensors, the FP8-quantized weight,
and the weight materialized (all-gathered) for a parallel scheme. Per-parameter attributes
live only on the Parameter, so reading them from a stand-in, or writing the Parameter's
main_grad through one, is a bug (issue #19, class 1).

A name's provenance comes from what is assigned to it in the function and its enclosing
functions (the last assignment seen wins; a name assigned from another name inherits its
provenance, so it follows chains of plain assignments), from ``ctx`` attributes (a weakref
dereference ``ctx.X_ref()`` names the object ``X`` names; a call of a helper of the module
whose returns all have one provenance gives that provenance), and, when nothing is assigned,
from how the name is spelled. A plain name whose ``origin_`` twin is in scope is a stand-in:
the code names the Parameter separately because this one is not it.
"""

from __future__ import annotations

import libcst as cst

from . import patterns
from .module import ModuleContext, Unit

PARAMETER = "parameter"
SAVED = "saved"
QUANTIZED = "quantized"
MATERIALIZED = "materialized"
STAND_INS = frozenset({SAVED, QUANTIZED, MATERIALIZED})
COPIES = frozenset({QUANTIZED, MATERIALIZED})

ORIGIN_PREFIXES = ("origin_", "orig_", "original_")
# Spellings, as data: (provenance, substrings of a name) and (provenance, substrings of a
# callee) that produce it.
NAME_WORDS = (
    (QUANTIZED, ("_fp8", "fp8_", "_quantized", "quantized_", "weightmat", "_fp4", "_mxfp8")),
    (MATERIALIZED, ("full_weight", "total_weight", "gathered", "_unsharded")),
)
CALL_WORDS = (
    (QUANTIZED, ("quantize", "cast_to_fp8", "to_fp8", "Float8Tensor", "cast_transpose")),
    (MATERIALIZED, ("all_gather", "gather_along", "unshard", "full_weight", "materialize")),
    (SAVED, ("restore_from_saved", "saved_tensors")),
)


def is_origin_name(word: str) -> bool:
    return any(word.startswith(p) and len(word) > len(p) for p in ORIGIN_PREFIXES)


def by_name(word: str) -> str | None:
    if is_origin_name(word) or word.endswith("_param"):
        return PARAMETER
    for provenance, words in NAME_WORDS:
        if any(w in word for w in words):
            return provenance
    return None


def of_value(
    value: cst.CSTNode, known: dict[str, str], helpers: dict[str, str] | None = None
) -> str | None:
    """The provenance of an assigned value, given the names classified so far and what the
    module's own helpers return (``helpers``: function name -> provenance)."""
    if isinstance(value, cst.Name):
        return known.get(value.value) or by_name(value.value)
    if isinstance(value, cst.Attribute):
        if isinstance(value.value, cst.Name) and value.value.value == "ctx":
            if value.attr.value == "saved_tensors":
                return SAVED
            return by_name(value.attr.value) or SAVED
        return by_name(value.attr.value)
    if isinstance(value, cst.Call):
        name = patterns.callee_name(value) or ""
        if name == "Parameter":
            return PARAMETER
        if helpers and name in helpers:
            return helpers[name]
        for provenance, words in CALL_WORDS:
            if any(w in name for w in words):
                return provenance
        if isinstance(value.func, cst.Attribute) and name.endswith("_ref"):
            return of_value(value.func, known)  # ctx.origin_weight_ref(): a weakref's object
    if isinstance(value, cst.Subscript):
        return of_value(value.value, known, helpers)
    return None


def returned_provenance(context: ModuleContext) -> dict[str, str]:
    """For ``context.shared``: the module's functions whose every ``return`` value has one
    known provenance (a helper that quantizes or gathers the weight it is given)."""
    found: dict[str, str] = {}
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef):
            continue
        names = Provenance(unit, {})
        kinds = {
            names.of(stmt.value)
            for stmt, _ in unit.statements()
            if isinstance(stmt, cst.Return) and stmt.value is not None
        }
        if len(kinds) == 1 and None not in kinds:
            found[unit.name] = kinds.pop()
    return found


class Provenance:
    """The provenance of the names of one unit (and the units it is nested in)."""

    def __init__(self, unit: Unit, helpers: dict[str, str] | None = None) -> None:
        if helpers is None:
            helpers = unit.context.shared(returned_provenance)
        self.helpers = helpers
        chain = []
        current: Unit | None = unit
        while current is not None:
            chain.append(current)
            current = current.parent
        self.known: dict[str, str] = {}
        self.names: set[str] = set()
        for scope in reversed(chain):  # enclosing functions first, the unit's own code last
            if scope.params is not None:
                params = scope.params
                every = [*params.posonly_params, *params.params, *params.kwonly_params]
                self.names.update(param.name.value for param in every)
            for stmt, _ in scope.statements():
                self._note(stmt)

    def _note(self, stmt: cst.CSTNode) -> None:
        if not isinstance(stmt, cst.Assign):
            return
        for target in stmt.targets:
            names = _target_names(target.target)
            self.names.update(names)
            if len(names) > 1:  # tuple unpacking: of ctx.saved_tensors, or of a helper
                provenance = of_value(stmt.value, self.known, self.helpers)
                for name in names:
                    found = by_name(name) or (SAVED if provenance == SAVED else None)
                    if found is not None:
                        self.known[name] = found
            elif names:
                found = of_value(stmt.value, self.known, self.helpers) or by_name(names[0])
                if found is not None:
                    self.known[names[0]] = found

    def of(self, expr: cst.CSTNode) -> str | None:
        """PARAMETER, one of STAND_INS, or None when unknown."""
        if isinstance(expr, cst.Name):
            word = expr.value
            found = self.known.get(word) or by_name(word)
            if found is None and any(p + word in self.names for p in ORIGIN_PREFIXES):
                return SAVED  # the Parameter has its own ``origin_`` name here
            return found
        return of_value(expr, self.known, self.helpers)

    def differ(self, one: cst.CSTNode, other: cst.CSTNode) -> bool:
        """``one`` and ``other`` name the same weight (by stem) but are known to be
        different objects: one the Parameter and the other a stand-in, or one a quantized or
        materialized copy and the other not (a copy is never its source). A saved tensor
        and a name of unknown provenance may be one object: TE saves the Parameter itself."""
        kinds = {self.of(one), self.of(other)}
        if len(kinds) == 1:
            return False
        return (PARAMETER in kinds and bool(kinds & STAND_INS)) or bool(kinds & COPIES)


def _target_names(target: cst.CSTNode) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
    return []
