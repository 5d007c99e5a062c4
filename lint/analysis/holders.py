"""Holders of a weight: classes that keep the Parameter in one field and a tensor standing in
for it in another (issue #19, class 1: which object).

A per-expert record (a dataclass slot, a ``NamedTuple``, a plain class filled by its
``__init__``) that declares one field a ``Parameter`` and another a plain ``Tensor`` names
the Parameter separately because the other is not it: the all-gathered ``[G, out, in]``
weight the forward multiplies, a quantized copy, a shard. main_grad and its flags live on
the Parameter field only, and the tensor field is the weight operand the backward's dgrad
multiplies, as ``origin_w`` beside ``w`` says for locals (analysis/provenance.py).

Seen: fields declared by class-level annotations and by ``self.X = <parameter>`` in
``__init__`` from a parameter annotated so; reached as ``self.X`` in the class's methods, as
``v.X`` where ``v`` is annotated with the class (a parameter or an annotated local), or
bound by every reaching path from such a name or from a ``ctx`` attribute the file stores
only such names in (``ctx.slot = slot`` in forward, ``slot = ctx.slot`` in backward).
A tensor field named for a bias, or whose ``.grad`` / ``.grad_added_to_main_grad`` the file
sets, is a parameter in its own right and stands in for nothing.
Not seen: holders of other files, fields annotated with aliases of the types, and values
whose class is known only from the call that built them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from . import patterns, provenance
from .module import ModuleContext, Unit, suite_body

# The provenance of a holder's tensor field (not one of provenance.COPIES: whether it is
# gathered or quantized is not known, only that it is not the Parameter).
HELD = "held"
PARAMETER_TYPES = frozenset({"Parameter"})
TENSOR_TYPES = frozenset({"Tensor"})


@dataclass
class Holders:
    stand_ins: dict[str, frozenset[str]] = field(default_factory=dict)  # class -> fields
    ctx_types: dict[str, str] = field(default_factory=dict)  # ctx attribute -> class
    methods: dict[int, str] = field(default_factory=dict)  # id of a holder's method -> class


def holders(context: ModuleContext) -> Holders:
    """For ``context.shared``: the file's holder classes and the ctx attributes typed so."""
    found = Holders()
    if "Parameter" not in context.source or "Tensor" not in context.source:
        return found
    for unit in context.units:
        if type(unit.owner) is cst.ClassDef:
            params, tensors = _fields(unit.owner)
            # A tensor field that is a parameter in its own right (a bias, often annotated
            # ``Tensor``; a field whose ``.grad`` or flags the file sets) stands in for none.
            tensors = {
                f for f in tensors if "bias" not in f.lower() and f".{f}.grad" not in context.source
            }
            if params and tensors:
                name = unit.owner.name.value
                found.stand_ins[name] = frozenset(tensors)
                for stmt in suite_body(unit.owner.body):
                    if type(stmt) is cst.FunctionDef:
                        found.methods[id(stmt)] = name
    if found.stand_ins:
        found.ctx_types = _ctx_types(context, found)
    return found


def _type_word(annotation: cst.Annotation | None) -> str | None:
    """The last word of an annotation (``torch.nn.Parameter`` -> ``Parameter``; a string
    annotation read the same way)."""
    if annotation is None:
        return None
    expr = annotation.annotation
    literal = patterns.string_value(expr)
    if literal is not None:
        return literal.rsplit(".", 1)[-1].strip()
    if type(expr) is cst.Attribute:
        return expr.attr.value
    return expr.value if type(expr) is cst.Name else None


def _fields(cls: cst.ClassDef) -> tuple[set[str], set[str]]:
    params: set[str] = set()
    tensors: set[str] = set()

    def note(name: str, annotation) -> None:
        word = _type_word(annotation)
        if word in PARAMETER_TYPES:
            params.add(name)
        elif word in TENSOR_TYPES:
            tensors.add(name)

    for stmt in suite_body(cls.body):
        if type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                if type(small) is cst.AnnAssign and type(small.target) is cst.Name:
                    note(small.target.value, small.annotation)
        elif type(stmt) is cst.FunctionDef and stmt.name.value == "__init__":
            annotated = {p.name.value: p.annotation for p in stmt.params.params}
            for node in patterns.walk(stmt.body):
                if type(node) is not cst.Assign or type(node.value) is not cst.Name:
                    continue
                for t in node.targets:
                    if _on_self(t.target) and node.value.value in annotated:
                        note(t.target.attr.value, annotated[node.value.value])
    return params, tensors


def _on_self(expr) -> bool:
    return (
        type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self"
    )


def _annotated(unit: Unit, classes) -> dict[str, str]:
    """Names of the unit annotated with a holder class: parameters and annotated locals."""
    found = {}
    params = unit.params.params if unit.params is not None else ()
    for p in params:
        if (word := _type_word(p.annotation)) in classes:
            found[p.name.value] = word
    for stmt in unit.body:
        for node in patterns.walk(stmt):
            if type(node) is not cst.AnnAssign or type(node.target) is not cst.Name:
                continue
            if (word := _type_word(node.annotation)) in classes:
                found[node.target.value] = word
    return found


def _ctx_types(context: ModuleContext, found: Holders) -> dict[str, str]:
    """``ctx.A`` holds a holder of class C where every store into it in the file is a name
    annotated C (a store of anything else leaves the attribute unknown)."""
    stores: dict[str, set[str | None]] = {}
    for unit in context.units:
        if type(unit.owner) is not cst.FunctionDef:
            continue
        typed = _annotated(unit, found.stand_ins)
        for node in patterns.walk(unit.owner.body):
            if type(node) is not cst.Assign:
                continue
            for t in node.targets:
                target = t.target
                if provenance.on_ctx(target):
                    value = node.value
                    kind = typed.get(value.value) if type(value) is cst.Name else None
                    stores.setdefault(target.attr.value, set()).add(kind)
    return {a: k.pop() for a, k in stores.items() if len(k) == 1 and None not in k}


def held_stand_in(unit: Unit, expr, node) -> str | None:
    """The field name where ``expr`` is a holder's tensor field standing in for its
    Parameter (``self.full``, ``slot.full``), else None."""
    if type(expr) is not cst.Attribute:
        return None
    found = unit.context.shared(holders)
    if not found.stand_ins:
        return None
    cls = _holder_class(unit, expr.value, node, found)
    fields = found.stand_ins.get(cls) if cls else None
    return expr.attr.value if fields and expr.attr.value in fields else None


def _holder_class(unit: Unit, base, node, found: Holders) -> str | None:
    if type(base) is not cst.Name:
        return None
    if base.value == "self":
        return found.methods.get(id(unit.owner))
    typed = _annotated(unit, found.stand_ins)
    if base.value in typed:
        return typed[base.value]
    defs = unit.reaching.reaching(base.value, node)
    kinds = {_bound_class(d, found) for d in defs}
    return kinds.pop() if defs and len(kinds) == 1 else None


def _bound_class(d, found: Holders) -> str | None:
    value = d.value if d.kind == "assign" else None
    if provenance.on_ctx(value):
        return found.ctx_types.get(value.attr.value)
    return None
