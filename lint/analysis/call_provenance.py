"""Which object a weight is, carried across the calls of one file (issue #19, class 1).

provenance.py classifies names within a function (and across forward and backward through
``ctx``). A stand-in also crosses calls:

- out of a helper of the file: ``def _cast(w): return w.to(torch.float8_e4m3fn)`` makes
  ``_cast(weight)`` a quantized copy wherever it is called (a helper returning another
  helper's copy, and a buffer an all-gather fills and the helper returns, count too): that
  part is module_provenance.returned_provenance, which every function's classifier uses;
- into a function of the file: ``Fn.apply(x, w_q)`` binds ``w_q`` to the parameter of
  ``Fn.forward`` after ``ctx`` (a starred list ``*copies`` to its ``*weights``), and a
  helper called with the copy (by position or keyword) takes whatever it does with its
  parameter from the copy. When the callee takes the Parameter's bookkeeping from that
  parameter (main_grad, its flags, a weakref; also what forward stores on ``ctx`` or saves
  for backward, read back by the class's other methods), the argument must be the Parameter
  (``handed_stand_ins``). A ``functools.partial(f, copy)`` hands the copy to ``f`` as a
  call does.

An argument counts only when every binding of it reaching the call is a copy (a copy on one
path only is GMLP037's twin-based check), and not when the caller gives it main_grad first
(``copy.main_grad = param.main_grad``: the copy then carries the bookkeeping on purpose).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import (
    callee_weights,
    file_functions,
    module_provenance,
    partials,
    patterns,
    provenance,
    stand_ins,
)
from .module import ModuleContext, Unit


@dataclass(frozen=True)
class HandedStandIn:
    argument: cst.BaseExpression
    kind: str  # provenance.QUANTIZED / MATERIALIZED
    callee: str
    parameter: str
    use_line: int


def _autograd_forwards(
    context: ModuleContext,
) -> dict[str, tuple[cst.FunctionDef, list[cst.FunctionDef]]]:
    """Class name -> its static ``forward(ctx, ...)`` and the class's other methods, for the
    file's autograd Functions."""
    found = {}
    for node in patterns.walk(context.module):
        if type(node) is cst.ClassDef:
            methods = [s for s in node.body.body if type(s) is cst.FunctionDef]
            for method in methods:
                if method.name.value == "forward" and file_functions.is_static(method):
                    found[node.name.value] = (method, [m for m in methods if m is not method])
    return found


def _pairs(args, callee: cst.FunctionDef, skip: int) -> Iterator[tuple[str, cst.BaseExpression]]:
    """(parameter, argument): positional arguments in order after ``skip`` bound
    parameters, those past the named ones (and a starred list right after them) into
    ``*args``, keywords by name. After a starred list of unknown length no position is
    known."""
    p = callee.params
    params = [q.name.value for q in (*p.posonly_params, *p.params)][skip:]
    star = p.star_arg.name.value if isinstance(p.star_arg, cst.Param) else None
    kwonly = {q.name.value for q in p.kwonly_params} | set(params)
    position = 0
    for arg in args:
        if arg.keyword is not None:
            if arg.keyword.value in kwonly:
                yield arg.keyword.value, arg.value
        elif position < 0 or arg.star == "**":
            continue
        elif arg.star:
            if position >= len(params) and star is not None:
                yield star, arg.value
            position = -1
        elif position < len(params):
            yield params[position], arg.value
            position += 1
        elif star is not None:
            yield star, arg.value


def _owner_key(expr: cst.CSTNode) -> str | None:
    """A name, or ``ctx.A``, that an expression (or an item of it) is taken from."""
    while type(expr) is cst.Subscript:
        expr = expr.value
    if type(expr) is cst.Name:
        return expr.value
    if provenance.on_ctx(expr):
        return "ctx." + expr.attr.value
    return None


def _aliases(function: cst.FunctionDef, parameter: str) -> set[str]:
    """``parameter``, and names taken from it: loop / comprehension variables over it, and
    names bound to a slice or a list of it (``weights = weights_and_biases[:n]``), again
    for names taken so (two rounds)."""
    names = {parameter}
    for _ in range(2):
        for node in patterns.walk(function.body):
            kind = type(node)
            if kind is cst.For or kind is cst.CompFor:
                if type(node.target) is cst.Name and _owner_key(node.iter) in names:
                    names.add(node.target.value)
            elif kind is cst.Assign and len(node.targets) == 1:
                target, value = node.targets[0].target, node.value
                if patterns.callee_name(value) in ("list", "tuple") and value.args:
                    value = value.args[0].value
                if type(target) is cst.Name and _owner_key(value) in names:
                    names.add(target.value)
    return names


def _use_in(
    body: cst.CSTNode, owners: set[str], functions=None, depth: int = 2
) -> cst.CSTNode | None:
    """The first node of ``body`` taking main_grad, a flag or a weakref from ``owners``;
    with ``functions`` (the file's, by name), also a call handing one of ``owners`` to a
    plain function of the file defined once that does so with its parameter (``depth``
    levels: a backward handing the restored weight to its wgrad helper, and that helper
    to the one that writes)."""
    for node in patterns.walk(body):
        kind = type(node)
        if kind is cst.Attribute and node.attr.value in callee_weights.ATTRIBUTES:
            if _owner_key(node.value) in owners:
                return node
        elif kind is cst.Call:
            if functions and depth and _helper_uses(node, owners, functions, depth):
                return node
            referent = provenance.weakref_referent(node)
            if referent is not None and _owner_key(referent) in owners:
                return node
            if patterns.callee_name(node) in ("getattr", "hasattr", "setattr"):
                args = patterns.positional_args(node)
                if (
                    len(args) >= 2
                    and patterns.string_value(args[1].value) in callee_weights.ATTRIBUTES
                    and _owner_key(args[0].value) in owners
                ):
                    return node
    return None


def _helper_uses(call: cst.Call, owners: set[str], functions, depth: int) -> bool:
    """``call`` runs a plain function of the file, defined once, and hands one of ``owners``
    (by position or keyword) to a parameter that function takes the bookkeeping from."""
    func = call.func
    helpers = functions.get(func.value) if type(func) is cst.Name else None
    if not helpers or len(helpers) != 1:
        return False
    helper = helpers[0]
    for parameter, argument in _pairs(call.args, helper, 0):
        if _owner_key(argument) in owners:
            names = _aliases(helper, parameter)
            if _use_in(helper.body, names, functions, depth - 1) is not None:
                return True
    return False


def _parameter_use(
    function: cst.FunctionDef,
    parameter: str,
    siblings: list[cst.FunctionDef],
    functions=None,
) -> cst.CSTNode | None:
    """Where ``function`` (or, through ``ctx``, one of ``siblings``: the other methods of
    its class) takes the Parameter's bookkeeping from ``parameter``, itself or through a
    helper of the file (``functions``) it hands the parameter to."""
    names = _aliases(function, parameter)
    use = _use_in(function.body, names, functions)
    if use is not None or not siblings:
        return use
    attrs, positions = set(), set()
    for node in patterns.walk(function.body):
        if type(node) is cst.Assign:
            if _owner_key(node.value) in names:
                attrs.update(
                    "ctx." + t.target.attr.value
                    for t in node.targets
                    if provenance.on_ctx(t.target)
                )
        elif (
            type(node) is cst.Call
            and patterns.callee_name(node) == "save_for_backward"
            and provenance.on_ctx(node.func)
            and not any(a.star for a in node.args)
        ):
            positions.update(i for i, a in enumerate(node.args) if _owner_key(a.value) in names)
    if not attrs and not positions:
        return None
    for other in siblings:
        owners, restored = set(attrs), set()  # restored: names of the whole saved tuple
        for node in patterns.walk(other.body):
            if type(node) is cst.Assign and len(node.targets) == 1:
                target, value = node.targets[0].target, node.value
                if type(target) is cst.Name and _saved(value):
                    restored.add(target.value)
                elif type(target) is cst.Name and _owner_key(value) in attrs:
                    owners.add(target.value)
                elif type(target) is cst.Name and _saved_item(value, restored) in positions:
                    owners.add(target.value)  # ``saved = ctx.saved_tensors; w = saved[1]``
                elif type(target) in (cst.Tuple, cst.List) and _saved(value):
                    owners.update(
                        e.value.value
                        for i, e in enumerate(target.elements)
                        if i in positions and type(e.value) is cst.Name
                    )
        use = _use_in(other.body, owners, functions)
        if use is not None:
            return use
    return None


def _saved(value: cst.CSTNode) -> bool:
    """``ctx.saved_tensors``, or Paddle's ``ctx.saved_tensor()`` (PyLayer's spelling)."""
    if type(value) is cst.Call and not value.args and type(value.func) is cst.Attribute:
        return value.func.attr.value == "saved_tensor"
    return type(value) is cst.Attribute and value.attr.value == "saved_tensors"


def _saved_item(value: cst.CSTNode, restored: set[str]) -> int | None:
    """i for ``S[i]`` where S names the restored saved tensors."""
    if type(value) is cst.Subscript and type(value.value) is cst.Name and len(value.slice) == 1:
        index = value.slice[0].slice
        if (
            value.value.value in restored
            and type(index) is cst.Index
            and type(index.value) is cst.Integer
        ):
            return index.value.evaluated_value
    return None


def _given_main_grad(unit: Unit, name: str) -> bool:
    """The caller hands ``name`` main_grad itself (``name.main_grad = ...``, also on a loop
    variable over it): the copy carries the Parameter's buffer on purpose."""
    owners = {name}
    for node in patterns.walk(unit.owner.body):
        if type(node) is cst.For and name in {n.value for n in patterns.read_names(node.iter)}:
            owners.update(n.value for n in patterns.walk(node.target) if type(n) is cst.Name)
    for node in patterns.walk(unit.owner.body):
        if type(node) is cst.Assign:
            for t in node.targets:
                target = t.target
                if (
                    type(target) is cst.Attribute
                    and target.attr.value == patterns.MAIN_GRAD
                    and _owner_key(target.value) in owners
                ):
                    return True
    return False


def _entry_aliases(unit: Unit, forwards) -> dict[str, tuple[str, frozenset[str]]]:
    """Names the unit binds to an autograd Function's entry (``fn = Fn.apply``, under no
    grad ``fn = Fn.forward``): name -> (class, the entries bound)."""
    found: dict[str, tuple[str, set[str]]] = {}
    for stmt, _ in unit.statements():
        if type(stmt) is not cst.Assign or len(stmt.targets) != 1:
            continue
        target, value = stmt.targets[0].target, stmt.value
        if (
            type(target) is cst.Name
            and type(value) is cst.Attribute
            and value.attr.value in ("apply", "forward")
            and type(value.value) is cst.Name
            and value.value.value in forwards
        ):
            cls, entries = found.setdefault(target.value, (value.value.value, set()))
            entries.add(value.attr.value if cls == value.value.value else "?")
    return {n: (c, frozenset(e)) for n, (c, e) in found.items() if "?" not in e}


def _callees(call: cst.Call, functions, classes: set[str], forwards, entries):
    """The function of the file ``call`` runs, how many of its parameters the call binds
    itself (``ctx`` for ``Fn.apply``, ``self`` for a method), for ``apply`` the class's
    other methods (backward reads back what forward keeps on ``ctx``), and the arguments
    to pair with the rest; None when unknown."""
    func, args = call.func, call.args
    if partials.is_partial(call):
        # ``functools.partial(f, w_fp8)`` binds its arguments to ``f``'s parameters as a
        # call would, whoever later calls the partial (``ctx.wgrad_fn(x, dy)``).
        bound = cst.Call(func=args[0].value, args=args[1:])
        return _callees(bound, functions, classes, forwards, entries)
    if (
        type(func) is cst.Attribute
        and type(func.value) is cst.Name
        and func.attr.value == "apply"
        and func.value.value in forwards
    ):
        forward, siblings = forwards[func.value.value]
        return forward, 1, siblings, args
    if type(func) is cst.Name and func.value in entries:
        cls, bound = entries[func.value]
        forward, siblings = forwards[cls]
        if args and args[0].star == "*":
            # ``fn(*autograd_ctx, x, w)``: the leading list fills ``ctx`` where ``fn`` is
            # ``forward`` (``[None]``) and is empty where it is ``apply``
            return forward, 1, siblings, args[1:]
        if len(bound) == 1:
            return forward, int(bound == {"apply"}), siblings, args
        return None
    callee = file_functions.callee(call, functions, classes)
    if callee is None:
        return None
    skip = int(type(func) is cst.Attribute and not file_functions.is_static(callee))
    return callee, skip, [], args


def handed_stand_ins(context: ModuleContext) -> list[HandedStandIn]:
    """For ``context.shared``: arguments that are surely copies, handed to a function of
    the file (or an autograd Function's ``apply``) that uses that parameter as the
    Parameter."""
    if "main_grad" not in context.source:
        return []
    functions = file_functions.by_name(context)
    source = context.source
    # the file's autograd Functions, where something can reach them (``Fn.apply``, an alias)
    forwards = _autograd_forwards(context) if ".apply" in source or ".forward" in source else {}
    classes = file_functions.class_names(context)
    callable_here = set(functions) | ({"apply"} if forwards else set())
    uses: dict[tuple[int, str], cst.CSTNode | None] = {}
    found = []
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef):
            continue
        entries = _entry_aliases(unit, forwards) if forwards else {}
        if (
            not unit.survey.calls & callable_here
            and not unit.survey.calls & entries.keys()
            and partials.PARTIAL not in unit.survey.calls
        ):
            continue
        # Syntactic first: provenance is built only where a call hands an argument to a
        # parameter its callee uses as the Parameter.
        candidates = []
        for call in (n for n in file_functions.own_nodes(unit.body) if type(n) is cst.Call):
            resolved = _callees(call, functions, classes, forwards, entries)
            if resolved is None or resolved[0] is unit.owner:
                continue
            callee, skip, siblings, args = resolved
            for parameter, argument in _pairs(args, callee, skip):
                if type(argument) not in (cst.Name, cst.Call, cst.Subscript):
                    continue
                key = (id(callee), parameter)
                if key not in uses:
                    uses[key] = _parameter_use(callee, parameter, siblings, functions)
                if uses[key] is not None:
                    candidates.append((call, callee, parameter, argument, uses[key]))
        if not candidates:
            continue
        objects = module_provenance.of_unit(unit)
        for call, callee, parameter, argument, use in candidates:
            node = file_functions.node_of(unit, call)
            if node is None:
                continue
            kind = stand_ins.surely_stand_in(objects, unit, argument, node)
            if kind not in provenance.COPIES:
                continue
            if _spelled_only(unit, argument, node, functions, objects.helpers):
                continue
            owner = _owner_key(argument)
            if owner is not None and _given_main_grad(unit, owner):
                continue
            found.append(
                HandedStandIn(argument, kind, callee.name.value, parameter, context.line_of(use))
            )
    return found


def _spelled_only(unit: Unit, argument, node, functions, helpers: dict[str, str]) -> bool:
    """The argument is a copy only by the name of a function of the file whose returns say
    no such thing (``_param_list_for_unshard(module)`` returning ``module.parameters()``):
    the file's own code outranks its spelling."""
    if type(argument) is cst.Call:
        values = [argument]
    elif (owner := _owner_key(argument)) is not None and not owner.startswith("ctx."):
        values = [d.value for d in unit.reaching.reaching(owner, node) if d.value is not None]
    else:
        return False
    return any(
        (name := patterns.callee_name(v)) in functions and name not in helpers for v in values
    )
