"""main_grad rebound to a copy of its own buffer (GMLP053, beside the out-of-place sum).

``param.main_grad`` is a view into the gradient buffer that Megatron's DDP (or
Megatron-FSDP) reduces and the optimizer reads. Code that works on a copy of it and binds the
copy back (``grad = main_grad.contiguous().clone()``, an all-reduce of ``grad``, then
``setattr(weight, grad_attr, grad)``: blind corpus 15's MTP embedding reduction) leaves the
buffer behind: the reduction never reaches the optimizer, and later writes land in a tensor
nobody reads.

Per function, over reaching definitions: what a value is, followed back through locals,
methods that hand back the same storage (``contiguous``, ``view``, ``float`` on an fp32
buffer) and calls of anything else whose first argument it is (a helper that unshards or
reshards a tensor hands back what it was given, as far as can be seen): the parameter's own
buffer, a copy of it (``clone``, ``torch.clone``, ``copy.deepcopy``), or neither. The
attribute may be named through a local bound only to string constants, one of them
``"main_grad"`` (``grad_attr = "main_grad" if hasattr(w, "main_grad") else "grad"``).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from . import file_functions, patterns, provenance
from .carried import ctx_attr
from .module import Unit

BUFFER, COPY = "buffer", "copy"
# Calls that make a new tensor holding the values: a copy of the buffer, not the buffer.
COPYING = frozenset({"clone", "deepcopy"})
# Methods that hand back the same storage on a contiguous fp32 buffer (or a view of it).
SAME_STORAGE = frozenset({"contiguous", "view", "view_as", "reshape", "float", "data", "detach"})
# How far back a value is followed through locals and calls.
DEPTH = 8


@dataclass(frozen=True)
class CopyBound:
    stmt: cst.CSTNode  # the binding of main_grad
    owner: str  # X of ``X.main_grad``, as written
    copy: cst.CSTNode  # the call that made the copy


def copies_bound(unit: Unit) -> list[CopyBound]:
    """Bindings of a parameter's main_grad to a copy of that same parameter's buffer, in a
    function that binds that main_grad to nothing else: one that also puts the buffer back
    (a scratch copy swapped in, then restored in ``finally``) or gives main_grad a tensor of
    its own (a test's) is not judged."""
    found: list[CopyBound] = []
    other: set[str] = set()  # owners whose main_grad is bound to something not a copy
    for stmt, _ in unit.statements():
        node = unit.node_for(stmt)
        if node is None:
            continue
        for owner, value in bindings(unit, stmt, node):
            text = unit.context.code(owner).strip()
            kind, copy = _what(unit, value, node, text, DEPTH, unit.context.shared(ctx_copies))
            if kind == COPY:
                found.append(CopyBound(stmt, text, copy))
            else:
                other.add(text)
    return [f for f in found if f.owner not in other]


def bindings(unit: Unit, stmt, node):
    """(X, value) for ``X.main_grad = value`` and ``setattr(X, A, value)`` with A naming
    main_grad (``node``: the statement's graph node, where A's bindings are read; None
    takes only the literal ``"main_grad"``)."""
    if type(stmt) is cst.Assign:
        for target in stmt.targets:
            if patterns.is_attr(target.target, patterns.MAIN_GRAD):
                yield target.target.value, stmt.value
    elif type(stmt) is cst.Expr and type(stmt.value) is cst.Call:
        call = stmt.value
        args = call.args
        named = patterns.callee_name(call) == "setattr" and len(args) == 3
        if named and _names_main_grad(unit, args[1].value, node):
            yield args[0].value, args[2].value


def _names_main_grad(unit: Unit, attr, node) -> bool:
    """``"main_grad"``, or a local every binding of which reaching ``node`` is made of string
    constants only, one of them ``"main_grad"``."""
    if patterns.string_value(attr) == patterns.MAIN_GRAD:
        return True
    if type(attr) is not cst.Name or node is None:
        return False
    defs = unit.reaching.reaching(attr.value, node)
    if not defs or any(d.kind != "assign" or d.value is None for d in defs):
        return False
    strings = [s for d in defs for s in _strings(d.value)]
    return patterns.MAIN_GRAD in strings and None not in strings


def _strings(value) -> list[str | None]:
    """The string constants a value may be (None for anything else)."""
    if type(value) is cst.IfExp:
        return _strings(value.body) + _strings(value.orelse)
    return [patterns.string_value(value)]


def _what(unit: Unit, value, node, owner: str, depth: int, stashed: dict):
    """(BUFFER or COPY or None, the copying call) for ``value`` read where ``node`` runs;
    ``stashed``: the ``ctx`` attributes known to hold copies (``ctx_copies``; none while
    those are being found)."""
    if depth == 0 or value is None:
        return None, None
    attr = ctx_attr(value)
    if attr is not None:
        copied = stashed.get(attr)
        if copied is not None and copied[0] == owner:
            return COPY, copied[1]
    found = patterns.main_grad_owner(value)
    if found is not None:
        return (BUFFER if unit.context.code(found).strip() == owner else None), None
    if type(value) is cst.Call and patterns.callee_name(value) == "getattr":
        args = value.args
        same = len(args) >= 2 and unit.context.code(args[0].value).strip() == owner
        named = same and _names_main_grad(unit, args[1].value, node)
        return (BUFFER, None) if named else (None, None)
    if type(value) is cst.Name:
        return _what_name(unit, value.value, node, owner, depth, stashed)
    if type(value) is cst.Attribute and value.attr.value in SAME_STORAGE:
        return _what(unit, value.value, node, owner, depth - 1, stashed)
    if type(value) is not cst.Call:
        return None, None
    func = value.func
    name = patterns.callee_name(value)
    if type(func) is cst.Attribute and not _is_module(func.value):
        # a method of the value: a copy, the same storage, or something else
        if name in COPYING:
            kind, _ = _what(unit, func.value, node, owner, depth - 1, stashed)
            return (COPY, value) if kind is not None else (None, None)
        if name in SAME_STORAGE:
            return _what(unit, func.value, node, owner, depth - 1, stashed)
        return None, None
    context = unit.context
    function = file_functions.callee(
        value, context.shared(file_functions.by_name), context.shared(file_functions.class_names)
    )
    if function is not None:
        return _returned(unit, value, function, node, owner, depth, stashed)
    positional = patterns.positional_args(value)
    if not positional:
        return None, None
    kind, copy = _what(unit, positional[0].value, node, owner, depth - 1, stashed)
    if kind is not None and name in COPYING:
        return COPY, value  # ``torch.clone(g)``, ``copy.deepcopy(g)``
    return kind, copy


def _returned(
    unit: Unit, call: cst.Call, function: cst.FunctionDef, node, owner, depth, stashed: dict
):
    """What a call of a function of the file hands back, from its ``return``s that return a
    parameter as it was given: the argument bound to it (``_reshard_if_dtensor(grad, ref)``
    returning ``ref`` on one path and ``grad`` on the other is a copy when ``grad`` is one).
    Other returns are not followed; none of the kind: unknown."""
    arguments = dict(file_functions.bound_arguments(call, function))
    rebound = {
        name
        for sub in file_functions.own_nodes(function.body.body)
        for name in provenance.bound_names(sub)
    }
    kinds = []
    for sub in file_functions.own_nodes(function.body.body):
        if type(sub) is cst.Return and type(sub.value) is cst.Name:
            name = sub.value.value
            if name in arguments and name not in rebound:
                kinds.append(_what(unit, arguments[name], node, owner, depth - 1, stashed))
    return _either(kinds)


def _what_name(unit: Unit, name: str, node, owner: str, depth: int, stashed: dict):
    defs = unit.reaching.reaching(name, node)
    if not defs or any(d.kind != "assign" for d in defs):
        return None, None
    return _either([_what(unit, d.value, d.node, owner, depth - 1, stashed) for d in defs])


def _either(results: list[tuple]):
    """What a value that may be any of ``results`` is: unknown if any is (or none is
    given), a copy if any is one (its copying call), else the buffer."""
    if not results or any(kind is None for kind, _ in results):
        return None, None
    copies = [copy for kind, copy in results if kind == COPY]
    return (COPY, copies[0]) if copies else (BUFFER, None)


def ctx_copies(context) -> dict[str, tuple[str, cst.Call]]:
    """For ``context.shared``: ``ctx`` attributes that every assignment of the file sets to a
    copy of a parameter's main_grad (blind corpus 17, a zero-bubble fork's forward stashing
    ``ctx.weight_main_grad = weight.main_grad.detach().clone()`` for its backward to put
    back): attribute -> (the parameter as written, the copying call)."""
    found: dict[str, tuple[str, cst.Call] | None] = {}
    if "ctx." not in context.source or "clone" not in context.source:
        return {}
    for unit in context.units:
        if not unit.survey.ctx_attrs:
            continue
        for stmt, _ in unit.statements():
            if type(stmt) is not cst.Assign:
                continue
            for target in stmt.targets:
                attr = ctx_attr(target.target)
                if attr is None:
                    continue
                copied = _copied_main_grad(unit, stmt.value, unit.node_for(stmt))
                if copied is None or found.get(attr, copied) != copied:
                    found[attr] = None  # set otherwise somewhere: not known to be a copy
                else:
                    found[attr] = copied
    return {attr: copied for attr, copied in found.items() if copied is not None}


def _copied_main_grad(unit: Unit, value, node) -> tuple[str, cst.Call] | None:
    """(X as written, the copying call) for a value that ``_what`` finds a copy of
    ``X.main_grad``, X any parameter whose main_grad the value (or the one binding of a local
    it reads, reaching ``node``) spells."""
    if type(value) is not cst.Call or patterns.callee_name(value) not in COPYING:
        return None
    spelled = [value]
    for name in patterns.read_names(value):
        defs = unit.reaching.reaching(name.value, node) if node is not None else []
        spelled += [d.value for d in defs if d.kind == "assign" and d.value is not None]
    owners = {
        unit.context.code(owner).strip()
        for expr in spelled
        for sub in patterns.walk(expr)
        for owner in (patterns.main_grad_owner(sub),)
        if owner is not None
    }
    for owner in sorted(owners):
        kind, copy = _what(unit, value, node, owner, DEPTH, {})
        if kind == COPY:
            return owner, copy
    return None


def _is_module(expr) -> bool:
    """``torch.clone(x)`` / ``copy.deepcopy(x)``: a function of a module, not a method."""
    return type(expr) is cst.Name and expr.value in ("torch", "copy")
