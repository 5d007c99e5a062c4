"""Overrides that keep a class's own delayed weight gradients from being computed (issue
#19, class 6): ``backward_dw`` overridden in a class whose base was built with
``delay_wgrad_compute``, without running the base's version or doing its work; and a piece
that an inherited ``backward_dw`` calls to compute the class's own weights (it uses what it
pops, writes a ``.grad`` or main_grad), overridden with an empty body.

A base built with delayed wgrad (``super().__init__(..., delay_wgrad_compute=X)``, X not a
literal False) stores its own weights' wgrad work in backward and computes it in its
``backward_dw`` (Transformer Engine's ``TransformerEngineBaseModule.backward_dw`` pops the
store and hands the result on). An override *does the work* when it (or a method of the
class it calls through ``self.``) calls ``super().backward_dw()`` / ``Base.backward_dw(self)``,
uses what it pops (``x = store.pop()``, not a bare ``store.pop()``), writes main_grad or a
``.grad``, or only raises (the class refuses the schedule loudly).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from . import patterns
from .classes import BACKWARD_DW, DELAY, ClassModel, class_index, self_call_closure
from .module import ModuleContext, suite_body
from .wgrad_pieces import is_abstract, is_empty


@dataclass(frozen=True)
class DroppedWork:
    class_name: str
    method: cst.FunctionDef  # the override
    base: str  # the class whose work it no longer runs ("" for a base built with the delay)


def dropped_work(context: ModuleContext) -> list[DroppedWork]:
    """For ``context.shared``: every override of the file that drops delayed wgrad work."""
    index = context.shared(class_index)
    found: list[DroppedWork] = []
    for model in index.classes.values():
        own = model.methods.get(BACKWARD_DW)
        if own is not None:
            if not is_abstract(own) and _base_built_delayed(model) and not _does_work(model, own):
                found.append(DroppedWork(model.name, own, ""))
            continue
        owner = index.owner(model, BACKWARD_DW)
        if not isinstance(owner, ClassModel) or owner is model:
            continue
        for name in sorted(_pieces(owner, owner.methods[BACKWARD_DW])):
            override = model.methods.get(name)
            original = owner.methods.get(name)
            if (
                override is not None
                and original is not None
                and is_empty(override)
                and not is_abstract(override)
                and _computes_own(owner, original)
            ):
                found.append(DroppedWork(model.name, override, owner.name))
    return found


def _base_built_delayed(model: ClassModel) -> bool:
    """``__init__`` hands its base a ``delay_wgrad_compute`` that may be true."""
    init = model.methods.get("__init__")
    if init is None:
        return False
    for node in patterns.walk(init.body):
        if type(node) is not cst.Call or not _calls_base(node, "__init__"):
            continue
        arg = patterns.keyword_arg(node, DELAY)
        if arg is not None and not patterns.is_false_literal(arg.value):
            return True
    return False


def _calls_base(call: cst.Call, method: str) -> bool:
    """``super().<method>(...)``, ``super(C, self).<method>(...)`` or
    ``Base.<method>(self, ...)``."""
    func = call.func
    if type(func) is not cst.Attribute or func.attr.value != method:
        return False
    receiver = func.value
    if type(receiver) is cst.Call:
        return patterns.callee_name(receiver) == "super"
    args = patterns.positional_args(call)
    return (
        isinstance(receiver, (cst.Name, cst.Attribute))
        and bool(args)
        and type(args[0].value) is cst.Name
        and args[0].value.value == "self"
    )


def _does_work(model: ClassModel, method: cst.FunctionDef) -> bool:
    for current in _with_helpers(model, method):
        if _only_raises(current):
            return True
        if any(
            type(n) is cst.Call and _calls_base(n, BACKWARD_DW) for n in patterns.walk(current.body)
        ):
            return True
    return _computes_own(model, method)


def _computes_own(model: ClassModel, method: cst.FunctionDef) -> bool:
    """``method`` (or a method of the class it calls) computes the class's own weights'
    delayed gradients: it uses what it pops, writes a ``.grad`` or main_grad. Calling
    member layers' ``backward_dw`` is not this (GMLP014 and GMLP020 follow layers)."""
    for current in _with_helpers(model, method):
        for node in patterns.walk(current.body):
            if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and (
                _uses_pop(node)
                or any(patterns.is_attr(t, "grad") for t in patterns.assignment_targets(node))
            ):
                return True
            if type(node) is cst.Attribute and node.attr.value == "main_grad":
                return True
    return False


def _uses_pop(assign: cst.CSTNode) -> bool:
    value = getattr(assign, "value", None)
    return value is not None and any(
        type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value == "pop"
        for n in patterns.walk(value)
    )


def _only_raises(method: cst.FunctionDef) -> bool:
    body = suite_body(method.body)
    return any(
        isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Raise)
        for stmt in body
    ) and all(
        isinstance(stmt, cst.SimpleStatementLine)
        and isinstance(stmt.body[0], (cst.Raise, cst.Expr))
        for stmt in body
    )


def _with_helpers(model: ClassModel, method: cst.FunctionDef) -> list[cst.FunctionDef]:
    return self_call_closure(method, model.methods)


def _pieces(owner: ClassModel, method: cst.FunctionDef) -> set[str]:
    """Methods of ``owner`` that its ``backward_dw`` calls through ``self.``, transitively."""
    return {f.name.value for f in _with_helpers(owner, method)} - {BACKWARD_DW}
