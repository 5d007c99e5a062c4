"""Which local gradients a function puts into main_grad (GMLP033), with the statement that
does it: ``main_grad.add_(g)`` / ``copy_(g)`` / ``main_grad += g`` (into main_grad or a
local every reaching binding of which holds it, ``g`` possibly converted), a kernel handed
main_grad first (``fused_accumulate(p.main_grad, g)``), a helper of the file that puts one
parameter into another's main_grad, and ``torch._foreach_add_`` / ``_foreach_copy_`` into a
list of main_grads; an element of a list of gradients (``for w, g in zip(ws, grads)``,
``grads[i]``) stands for the list, whose hand-off hands on every element. Found here; the
rule's module (lint/rules/main_grad_written_grad_handed_on.py) judges their hand-offs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import deliveries, handoff_values, iteration, patterns, tensor_writes

if TYPE_CHECKING:
    from .deliveries import Deliveries
    from .module import ModuleContext, Unit

# Calls given main_grad first that read it rather than write into it.
_NOT_KERNELS = frozenset({"setattr", "getattr", "hasattr", "isinstance", "print", "id", "len"})
# In-place methods that put their argument into the buffer they are called on.
DELIVERING = frozenset({"add_", "copy_"})
# torch's list kernels that put each tensor of their second argument into the first's.
FOREACH_DELIVERING = frozenset({"_foreach_add_", "_foreach_copy_"})


def writes(unit: Unit, facts: Deliveries):
    """(node, the binding of g, elements) for each statement that puts a local ``g`` into
    main_grad; also the binding of the list ``g`` is an element of (``for w, g in zip(ws,
    grads)``, ``grads[i]``), whose hand-off hands on every element (``elements``: True)."""
    for root, node in unit.expression_roots():
        value = None
        if isinstance(root, cst.AugAssign) and isinstance(root.operator, cst.AddAssign):
            if _is_buffer(unit, facts, root.target, node):
                value = root.value
        elif isinstance(root, cst.Expr) and isinstance(root.value, cst.Call):
            method = patterns.method_call(root.value)  # also torch.Tensor.add_(buffer, g)
            if (
                method is not None
                and method[1] in DELIVERING
                and method[2]
                and _is_buffer(unit, facts, method[0], node)
            ):
                value = method[2][0].value
        if value is None and isinstance(root, (cst.Expr, cst.Assign)):
            # also bound: ``g = _finish_wgrad(w, g)`` (blind corpus 26)
            value = _helper_gradient(unit.context, root.value)
        if value is None and isinstance(root, cst.Expr):
            value = _kernel_gradient(unit, facts, root.value, node)
        if value is None and isinstance(root, cst.Expr):
            listed = _foreach_gradients(unit, root.value, node)
            if listed is not None:  # every element of the list went into a main_grad
                yield from _container_writes(unit, listed, node)
                continue
        if value is not None:  # ``add_(g.float())`` puts g in, converted
            value = handoff_values.same_gradient(value)
        if isinstance(value, cst.Name):
            for d in unit.reaching.reaching(value.value, node):
                yield node, d, False
                if d.kind == "for":  # an element of a list of gradients: the list too
                    source = iteration.element_source(d.node.owner, d.target)
                    yield from _container_writes(unit, source, node)
        elif isinstance(value, cst.Subscript):  # ``wgrads[i]``: an element of ``wgrads``
            yield from _container_writes(unit, value.value, node)


def _container_writes(unit: Unit, container, node):
    """(node, binding, True) of a local list or tuple whose elements went into main_grad at
    ``node``: what a hand-off of the whole list hands on."""
    if isinstance(container, cst.Name):
        for d in unit.reaching.reaching(container.value, node):
            yield node, d, True


def _foreach_gradients(unit: Unit, call, node) -> cst.BaseExpression | None:
    """L for ``torch._foreach_add_(<main_grads>, L)`` / ``_foreach_copy_``: each element of
    L put into its expert's main_grad (the buffers a list of main_grads, or a local every
    reaching binding of which is one)."""
    if not isinstance(call, cst.Call) or patterns.callee_name(call) not in FOREACH_DELIVERING:
        return None
    args = patterns.positional_args(call)
    if len(args) < 2:
        return None
    listed = tensor_writes.main_grad_list(unit, args[0].value, node)
    return args[1].value if listed else None


def _kernel_gradient(unit: Unit, facts: Deliveries, call, node) -> cst.BaseExpression | None:
    """The gradient a kernel that takes its destination first puts into main_grad:
    ``fused_accumulate(p.main_grad, g)`` -> g (a function, not a method of a tensor: an
    in-place ``x.copy_(p.main_grad)`` reads the buffer)."""
    if not isinstance(call, cst.Call):
        return None
    name = patterns.callee_name(call) or ""
    if name in _NOT_KERNELS or name.endswith("_"):  # in-place methods: ``add_``, ``copy_``
        return None
    args = patterns.positional_args(call)
    if len(args) == 2 and _is_buffer(unit, facts, args[0].value, node):
        return args[1].value
    return None


def _helper_gradient(context: ModuleContext, call) -> cst.BaseExpression | None:
    """The argument a call of a helper of the file puts into main_grad: the helper does
    ``P.main_grad.add_(Q)`` / ``copy_(Q)`` / ``P.main_grad += Q`` with its parameters P and
    Q and marks nothing itself (the write moved out of the function, one level)."""
    if not isinstance(call, cst.Call):
        return None
    func = call.func
    if isinstance(func, cst.Name):
        name = func.value
    elif isinstance(func, cst.Attribute) and patterns.attribute_of(func, "self") is not None:
        name = func.attr.value
    else:
        return None
    position = context.shared(helper_writes).get(name)
    if position is None:
        return None
    index, keyword = position
    args = patterns.positional_args(call)
    if index < len(args):
        return args[index].value
    arg = patterns.keyword_arg(call, keyword)
    return arg.value if arg is not None else None


def helper_writes(context: ModuleContext) -> dict[str, tuple[int, str]]:
    """function name -> (position, name) of the parameter it puts into another parameter's
    main_grad, for the file's functions defined once that mark nothing."""
    found: dict[str, tuple[int, str] | None] = {}
    for unit in context.units:
        function = unit.owner
        if not isinstance(function, cst.FunctionDef) or not unit.survey.spells_main_grad:
            continue
        name = function.name.value
        if name in found or unit.survey.spells_grad_added:
            found[name] = None
            continue
        params = _params(function)
        found[name] = None
        for stmt, _ in unit.statements():
            gradient = _put_into_parameter(stmt, params)
            if gradient is not None:
                found[name] = (params.index(gradient), gradient)
                break
    return {name: position for name, position in found.items() if position is not None}


def _put_into_parameter(stmt, params: list[str]) -> str | None:
    """Q for ``P.main_grad.add_(Q)`` / ``copy_(Q)`` / ``P.main_grad += Q``, P and Q in
    ``params``."""
    if isinstance(stmt, cst.AugAssign) and isinstance(stmt.operator, cst.AddAssign):
        owner, value = patterns.main_grad_owner(stmt.target), stmt.value
    elif isinstance(stmt, cst.Expr):
        method = patterns.method_call(stmt.value)
        if method is None or method[1] not in DELIVERING or not method[2]:
            return None
        owner, value = patterns.main_grad_owner(method[0]), method[2][0].value
    else:
        return None
    if not (isinstance(owner, cst.Name) and owner.value in params):
        return None
    value = handoff_values.same_gradient(value)  # ``add_(grad.to(main_grad.dtype))``
    return value.value if isinstance(value, cst.Name) and value.value in params else None


def passing_helpers(context: ModuleContext) -> dict[str, tuple[int, cst.Return]]:
    """function name -> (position of the parameter it puts into main_grad, the ``return``
    handing it back), for the helpers of ``helper_writes`` that also hand that parameter
    back (``return grad``, possibly converted) on runs that all wrote it, and never rebind
    it: ``g = _finish_wgrad(w, g)`` leaves ``g`` the gradient that went into main_grad
    (blind corpus 26)."""
    writing = context.shared(helper_writes)
    found: dict[str, tuple[int, cst.Return]] = {}
    for unit in context.units:
        function = unit.owner
        if not isinstance(function, cst.FunctionDef) or function.name.value not in writing:
            continue
        index, gradient = writing[function.name.value]
        if any(d.name == gradient and d.kind != "param" for d in unit.graph.defs):
            continue
        params = _params(function)
        writes = [
            node.index
            for stmt, _ in unit.statements()
            if _put_into_parameter(stmt, params) == gradient
            and (node := unit.node_for(stmt)) is not None
        ]
        for stmt, _ in unit.statements():
            if type(stmt) is cst.Return and stmt.value is not None:
                value = handoff_values.same_gradient(stmt.value)
                node = unit.node_for(stmt)
                # every run to this return wrote the gradient (a return on the path with no
                # main_grad, or with the write switched off, hands back an unwritten one:
                # review 29)
                if (
                    type(value) is cst.Name
                    and value.value == gradient
                    and node is not None
                    and writes
                    and not deliveries.through(
                        unit.graph, unit.graph.entry, node, frozenset(writes)
                    )
                ):
                    found[function.name.value] = (index, stmt)
                    break
    return found


def _params(function: cst.FunctionDef) -> list[str]:
    """The function's positional parameters but a leading ``self`` / ``cls``."""
    params = [p.name.value for p in function.params.params]
    return params[1:] if params and params[0] in ("self", "cls") else params


def passed_through(context: ModuleContext, call: cst.CSTNode) -> cst.BaseExpression | None:
    """The argument a call of a ``passing_helpers`` function hands back (as a plain name),
    else None."""
    helper = passing_return(context, call)
    if helper is None:
        return None
    index, args = helper[0], patterns.positional_args(call)
    if index < len(args):
        value = args[index].value
    else:  # handed by keyword (``_finish_wgrad(param=w, grad=g)``)
        name = context.shared(helper_writes)[call.func.value][1]
        arg = patterns.keyword_arg(call, name)
        value = arg.value if arg is not None else None
    return value if type(value) is cst.Name else None


def passing_return(context: ModuleContext, call: cst.CSTNode) -> tuple[int, cst.Return] | None:
    """For a call of a ``passing_helpers`` function: its entry there."""
    if type(call) is not cst.Call or type(call.func) is not cst.Name:
        return None
    return context.shared(passing_helpers).get(call.func.value)


def _is_buffer(unit: Unit, facts: Deliveries, expr, node) -> bool:
    if patterns.is_main_grad_direct(expr):
        return True
    if isinstance(expr, cst.Name):
        defs = unit.reaching.reaching(expr.value, node)
        return bool(defs) and all(d.index in facts.holders for d in defs)
    return False
