"""What a hand-off hands on: the gradient a returned or stored element carries, converted
(``wgrad.to(weight.dtype)``) or as a whole list (``*grads``). Moved out of ``wgrad`` (the
weight-gradient vocabulary), which the rules that read returns share with these two."""

from __future__ import annotations

import libcst as cst

from ..project import CONVERTING
from . import patterns

# -- what a hand-off hands on ------------------------------------------------------------
# ``CONVERTING`` (``project``): the same gradient in another dtype or layout; handing it on
# hands on the gradient (``return dx, wgrad.to(weight.dtype)``); views of it count too
# (``patterns.VIEW_METHODS``) but for those that take a part of it.
PARTS = frozenset({"split", "chunk", "unbind", "select", "narrow"})


def same_gradient(element: cst.BaseExpression) -> cst.BaseExpression:
    """``g`` for ``g.to(weight.dtype)``, ``g.float().view(shape)`` and the like: the same
    gradient, converted."""
    while (
        type(element) is cst.Call
        and type(element.func) is cst.Attribute
        and (method := element.func.attr.value) not in PARTS
        and (method in CONVERTING or method in patterns.VIEW_METHODS)
    ):
        element = element.func.value
    return element


def whole_list(element: cst.BaseExpression) -> cst.BaseExpression:
    """The list a returned element hands on whole: ``L`` for ``*L`` (the element itself),
    ``*[g for g in L]``, ``*(g for g in L)``, ``*tuple(L)`` and ``*list(L)``."""
    if isinstance(element, (cst.ListComp, cst.GeneratorExp)):
        loop = element.for_in
        if (
            loop.inner_for_in is None
            and isinstance(loop.target, cst.Name)
            and isinstance(element.elt, cst.Name)
            and element.elt.value == loop.target.value
        ):
            return loop.iter
    elif isinstance(element, cst.Call) and patterns.callee_name(element) in ("tuple", "list"):
        args = element.args
        if len(args) == 1 and args[0].keyword is None and not args[0].star:
            return args[0].value
    return element


def choice_of(value: cst.BaseExpression, element: cst.BaseExpression) -> cst.BaseExpression:
    """The conditional expression of ``value`` one arm of which is ``element`` (returned
    elements come with the choices taken apart: ``wgrad.elements``), else ``element``."""
    for sub in patterns.walk(value):
        if type(sub) is cst.IfExp and (sub.body is element or sub.orelse is element):
            return sub
    return element
