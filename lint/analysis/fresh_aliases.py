"""A weight handed on as a new object where the main-grad path will look for the Parameter
(issue #19, class 2).

Code that means to keep a second handle on a weight, not a copy of it, sometimes builds a
new Python object over the same storage instead: ``w.detach()``, ``w.data``,
``Parameter(w.data)``, ``Parameter(w)``. The storage is shared, but main_grad,
``grad_added_to_main_grad``, the other per-parameter flags and the gradient-accumulation
hook live on the Parameter object, and the new one has none of them. Two such handles:

- a ``ctx`` attribute in an autograd Function whose forward runs with the fused main-grad
  accumulation flag (``gradient_accumulation_fusion``, ``fuse_wgrad_accumulation``,
  ``accumulate_into_main_grad``): backward reads the weight's main_grad through it
  (MindSpeed's wrapper ``ctx.weight = weight`` hands it to Megatron's backward as the saved
  weight). Not when the function keeps the weight itself too (on ``ctx``, in a weakref, or in
  ``save_for_backward``): the new object is then the compute operand only;
- a parameter slot of another module (``op.register_parameter(name, Parameter(P.data))``,
  ``setattr(op, name, ...)``, ``op.weight = ...``) filled from an existing module's weight
  (``linear.weight``, ``linear.get_parameter("weight")``, ``getattr(linear, f"weight{i}")``)
  in a file on the main-grad path: a module shell meant to share the weights then trains a
  Parameter DDP never gave main_grad or a hook (Megatron's fused-ops shell registers the
  GroupedLinear's own Parameters).

A ``.clone()`` says a copy is meant and is not counted; nor is a binding under a name or test
that reads like lazy creation.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .module import ModuleContext, Unit

# Names of the op-level switch that makes backward write the weight's main_grad.
FUSE_WORDS = ("gradient_accumulation_fusion", "fuse_wgrad", "accumulate_into_main_grad")
# Which parameters a module-slot alias is about: read off another module by these words.
WEIGHT_WORDS = ("weight", "bias")
PARAMETER = "Parameter"
SLOT_SETTERS = frozenset({"register_parameter", "setattr"})


@dataclass(frozen=True)
class FreshAlias:
    value: cst.BaseExpression  # the new object's expression
    weight: str  # the weight it was made from, as written
    holder: str  # "ctx", "module", or "module-path" (a fresh Parameter on some path only)


def fresh_aliases(context: ModuleContext) -> list[FreshAlias]:
    """For ``context.shared``: every such new object put in a handle of either kind."""
    source = context.source
    if not any(w in source for w in (*FUSE_WORDS, patterns.MAIN_GRAD)):
        return []
    if ".detach(" not in source and ".data" not in source and PARAMETER not in source:
        return []
    found: list[FreshAlias] = []
    for unit in context.units:
        if isinstance(unit.owner, cst.FunctionDef):
            found.extend(_on_ctx(unit))
            found.extend(_in_module_slots(unit))
    return found


def made_from(value: cst.CSTNode) -> cst.BaseExpression | None:
    """P for a new object over P's storage: ``P.detach()``, ``P.data``, ``Parameter(P)``,
    ``Parameter(P.data)``, ``Parameter(P.detach())`` (``nn.`` / ``torch.nn.`` too)."""
    if type(value) is cst.Call and patterns.callee_name(value) == PARAMETER:
        args = patterns.positional_args(value)
        data = patterns.keyword_arg(value, "data")
        inner = args[0].value if args else (data.value if data is not None else None)
        return None if inner is None else (made_from(inner) or inner)
    if type(value) is cst.Call and patterns.is_attr(value.func, "detach") and not value.args:
        return value.func.value
    if type(value) is cst.Attribute and value.attr.value == "data":
        return value.value
    return None


# -- ctx handles ------------------------------------------------------------------------------
def _on_ctx(unit: Unit) -> Iterator[FreshAlias]:
    params = _params(unit.owner)
    if "ctx" not in params or not _fused(unit, params):
        return
    stores = []
    kept: set[str] = set()  # weights the function keeps as themselves
    for stmt, _ in unit.statements():
        for value in _ctx_stores(stmt):
            for element, item in _elements(value):
                source = made_from(element)
                if isinstance(source, cst.Name) and _weight_of(source.value, item, params):
                    stores.append((element, _weight_of(source.value, item, params)))
                elif isinstance(element, cst.Name) and element.value in params:
                    kept.add(_weight_of(element.value, item, params) or "")
        kept.update(_kept_otherwise(stmt, params))
    for element, weight in stores:
        if weight not in kept:
            yield FreshAlias(element, weight, "ctx")


def _fused(unit: Unit, params: list[str]) -> bool:
    """The function takes the fused main-grad switch (a parameter, or ``ctx``'s)."""
    if any(w in p for p in params for w in FUSE_WORDS):
        return True
    return any(any(w in a for w in FUSE_WORDS) for a in unit.survey.ctx_attrs)


def _ctx_stores(stmt) -> Iterator[cst.BaseExpression]:
    """The value of ``ctx.A = value``."""
    if isinstance(stmt, cst.Assign) and any(
        patterns.attribute_of(t.target, "ctx") is not None for t in stmt.targets
    ):
        yield stmt.value


def _elements(value) -> Iterator[tuple[cst.BaseExpression, str | None]]:
    """(element, comprehension variable's sequence name or None) for a value stored: itself,
    the items of a list/tuple display, or a comprehension's element."""
    if isinstance(value, (cst.List, cst.Tuple)):
        for element in value.elements:
            yield element.value, None
    elif isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        loop = value.for_in
        if isinstance(loop.target, cst.Name) and isinstance(loop.iter, cst.Name):
            yield value.elt, f"{loop.target.value}:{loop.iter.value}"
    else:
        yield value, None


def _weight_of(name: str, item: str | None, params: list[str]) -> str | None:
    """The forward parameter ``name`` is (itself, or the variable of a comprehension over it)."""
    if item is not None:
        variable, sequence = item.split(":")
        return sequence if name == variable and sequence in params else None
    return name if name in params and name != "ctx" else None


def _kept_otherwise(stmt, params: list[str]) -> set[str]:
    """Parameters the statement keeps as themselves: saved for backward or weakref'd."""
    kept = set()
    for sub in patterns.walk(stmt):
        name = patterns.callee_name(sub)
        if name in ("save_for_backward", "ref", "prepare_for_saving"):
            for arg in sub.args:
                value = arg.value
                if isinstance(value, cst.Name) and value.value in params:
                    kept.add(value.value)
    return kept


def _params(function: cst.FunctionDef) -> list[str]:
    p = function.params
    every = [*p.posonly_params, *p.params, *p.kwonly_params]
    if isinstance(p.star_arg, cst.Param):
        every.append(p.star_arg)
    return [param.name.value for param in every]


# -- module slots -----------------------------------------------------------------------------
def _in_module_slots(unit: Unit) -> Iterator[FreshAlias]:
    for stmt, _ in unit.statements():
        for value in _slot_values(stmt):
            source, holder = _new_parameter_over(unit, value, stmt), "module"
            if source is None:
                # reported where the fresh Parameter is made, the path's own line
                source, value = _fresh_on_some_path(unit, value, stmt) or (None, value)
                holder = "module-path"
            if source is not None and _module_weight(source, unit, stmt):
                yield FreshAlias(value, unit.context.code(source).strip(), holder)


def _new_parameter_over(unit: Unit, value, stmt) -> cst.BaseExpression | None:
    """P for a new Parameter over P put in a slot (a plain tensor attribute is no slot),
    directly or through a local every reaching binding of which makes one over P."""
    if isinstance(value, cst.Name):
        node = unit.node_for(stmt)
        defs = unit.reaching.reaching(value.value, node) if node is not None else []
        made = {
            unit.context.code(source).strip(): source
            for d in defs
            if d.kind == "assign" and (source := _new_parameter_over(unit, d.value, None))
        }
        return next(iter(made.values())) if defs and len(made) == 1 == len(defs) else None
    if patterns.callee_name(value) != PARAMETER or frozen(value):
        return None
    return made_from(value)


def frozen(call: cst.Call) -> bool:
    """``Parameter(..., requires_grad=False)`` (or ``False`` second): never trained, so it
    needs no main_grad."""
    given = patterns.keyword_arg(call, "requires_grad")
    args = patterns.positional_args(call)
    value = given.value if given is not None else (args[1].value if len(args) > 1 else None)
    return value is not None and patterns.is_false_literal(value)


# Conversions that hand back P's values in a new tensor: a Parameter made of them is as fresh.
CONVERSIONS = frozenset({"dequantize", "to", "float", "half", "bfloat16", "clone", "contiguous"})


def _fresh_on_some_path(unit: Unit, value, stmt) -> tuple[cst.BaseExpression, cst.Call] | None:
    """(P, the new Parameter) for a local put in a slot that some reaching binding makes a
    new Parameter of P's values (``Parameter(P.dequantize())``, through ``.data`` /
    ``.detach()`` and the ``CONVERSIONS``) while every other binding is P itself (``weight =
    module.weight``, then ``if fp8: weight = Parameter(weight.dequantize())``): the code
    means the slot to hold P, and on that path it holds a Parameter DDP never gave
    main_grad."""
    if not isinstance(value, cst.Name):
        return None
    node = unit.node_for(stmt)
    defs = unit.reaching.reaching(value.value, node) if node is not None else []
    if len(defs) < 2 or any(d.kind != "assign" or d.value is None for d in defs):
        return None
    code = unit.context.code
    itself = [d.value for d in defs if patterns.callee_name(d.value) != PARAMETER]
    made = [d.value for d in defs if patterns.callee_name(d.value) == PARAMETER]
    if any(frozen(call) for call in made):
        return None
    fresh = [_values_of(call) for call in made]
    if not itself or not fresh or any(f is None for f in fresh):
        return None
    sources = {code(e).strip() for e in itself} | {value.value}
    if len({code(e).strip() for e in itself}) != 1:
        return None
    # the fresh one is made from the name itself (rebound in place) or from the same source
    return (itself[0], made[0]) if all(code(f).strip() in sources for f in fresh) else None


def _values_of(call: cst.Call) -> cst.BaseExpression | None:
    """P for ``Parameter(<P's values>)``: its data argument with ``.data``, ``.detach()`` and
    the ``CONVERSIONS`` taken off."""
    args = patterns.positional_args(call)
    data = patterns.keyword_arg(call, "data")
    inner = args[0].value if args else (data.value if data is not None else None)
    while inner is not None:
        if type(inner) is cst.Attribute and inner.attr.value == "data":
            inner = inner.value
        elif (
            type(inner) is cst.Call
            and type(inner.func) is cst.Attribute
            and (inner.func.attr.value in CONVERSIONS or inner.func.attr.value == "detach")
        ):
            inner = inner.func.value
        else:
            return inner
    return None


def _slot_values(stmt) -> Iterator[cst.BaseExpression]:
    """Values put in a parameter slot of a module: ``M.register_parameter(name, V)``,
    ``setattr(M, name, V)``, ``M.A = V`` (``M`` not ``ctx``)."""
    if isinstance(stmt, cst.Expr) and type(stmt.value) is cst.Call:
        call = stmt.value
        if patterns.callee_name(call) in SLOT_SETTERS:
            args = patterns.positional_args(call)
            given = patterns.keyword_arg(call, "param")
            if given is not None:
                yield given.value
            elif args:
                yield args[-1].value
    elif isinstance(stmt, cst.Assign):
        for target in stmt.targets:
            t = target.target
            if type(t) is cst.Attribute and patterns.attribute_of(t, "ctx") is None:
                yield stmt.value


def _module_weight(source, unit: Unit | None = None, stmt=None) -> bool:
    """An existing module's weight: ``M.weight``, ``M.get_parameter("weight")``,
    ``getattr(M, f"weight{i}")``, or a local every binding of which reaching ``stmt`` is one
    (``linear_in_weight = self.adapter.linear_in.weight``)."""
    if type(source) is cst.Name and unit is not None:
        node = unit.node_for(stmt)
        defs = unit.reaching.reaching(source.value, node) if node is not None else []
        return bool(defs) and all(
            d.kind == "assign" and d.value is not None and _module_weight(d.value) for d in defs
        )
    if type(source) is cst.Attribute:
        return any(w in source.attr.value for w in WEIGHT_WORDS)
    if type(source) is cst.Call and patterns.callee_name(source) in ("get_parameter", "getattr"):
        args = patterns.positional_args(source)
        named = args[-1 if patterns.callee_name(source) == "get_parameter" else 1 :]
        if not named or len(args) > 3:
            return False
        text = cst.Module([]).code_for_node(named[0].value)
        return any(w in text for w in WEIGHT_WORDS)
    return False
