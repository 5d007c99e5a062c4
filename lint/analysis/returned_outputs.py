"""Two questions GMLP031 asks before it says a gradient handed on is main_grad itself.

Does a call given ``out=main_grad`` hand that buffer back? A GEMM given ``out=`` returns the
tensor it wrote, but a wrapper of the file may accumulate into ``out`` and return something
else: Primus-Turbo's wgrad wrappers (``_bgrad_gemm_impl_wrapper(..., inplace_add_to_out=fuse,
out=ctx.main_grad)``) return a cached dummy once the GEMM has added into ``out``
(``hands_back_other``).

Is the assignment on a run where the buffer was chosen? ``wgrad = gemm(..., out=w.main_grad
if ctx.fuse else None)`` then ``if not ctx.fuse: w.grad = wgrad`` hands on a fresh product:
main_grad is the output only on the runs the ``if`` excludes (a fork of Transformer Engine's
layernorm_linear, at mdy_triton's head). ``arm`` records on which side of its test a
conditional expression (or an ``if`` binding a local) chose main_grad; ``decided_against``
says every such choice is contradicted by an ``if`` the assignment sits in (same test text,
``not`` read as a negation).
"""

from __future__ import annotations

import libcst as cst

from . import file_functions, patterns
from .module import ModuleContext

MARK = "\0arm:"  # prefixes the recorded choices among the tests' texts (never code)


def hands_back_other(context: ModuleContext, call: cst.Call) -> bool:
    """``call`` runs a function of the file with an ``out`` parameter that none of its
    ``return`` values hands back (itself, a view of it, or a call given it as ``out=``)."""
    functions = context.shared(file_functions.by_name)
    function = file_functions.callee(call, functions, context.shared(file_functions.class_names))
    if function is None or "out" not in file_functions.parameters(function):
        return False
    values = [
        node.value
        for node in file_functions.own_nodes(function.body.body)
        if type(node) is cst.Return and node.value is not None
    ]
    return bool(values) and not any(_holds_out(value) for value in values)


def _holds_out(value: cst.BaseExpression) -> bool:
    kind = type(value)
    if kind is cst.Name:
        return value.value == "out"
    if kind is cst.IfExp:
        return _holds_out(value.body) or _holds_out(value.orelse)
    if kind in (cst.Tuple, cst.List):
        return any(_holds_out(element.value) for element in value.elements)
    if kind is cst.Subscript:
        return _holds_out(value.value)
    if kind is cst.Call:
        func = value.func
        if type(func) is cst.Attribute and func.attr.value in patterns.VIEW_METHODS:
            return _holds_out(func.value)
        given = patterns.keyword_arg(value, "out")
        return given is not None and _holds_out(given.value)
    return False


def arm(test: str, side: str) -> str:
    """The record that main_grad was chosen where ``test`` is true (``side`` "body") or
    false ("orelse")."""
    return f"{MARK}{side}:{test}"


def decided_against(unit, node, tests: set[str]) -> bool:
    """Every choice of main_grad recorded in ``tests`` is contradicted by an ``if`` that
    ``node`` sits in: the same test (up to a leading ``not``) on the other side."""
    choices = [t[len(MARK) :].split(":", 1) for t in tests if t.startswith(MARK)]
    if not choices:
        return False
    branches = [
        (base(unit.context.code(branch.test).strip()), side) for branch, side in node.enclosing_ifs
    ]
    return all(_contradicted(side, text, branches) for side, text in choices)


def _contradicted(side: str, text: str, branches) -> bool:
    test, negated = base(text)
    # main_grad when ``test`` is this truth value
    wanted = (side == "body") != negated
    for (other, other_negated), other_side in branches:
        if other == test and ((other_side == "body") != other_negated) != wanted:
            return True
    return False


def base(text: str) -> tuple[str, bool]:
    """The test without a leading ``not`` (and the parentheses around it), and whether it
    had one."""
    text = text.strip()
    negated = False
    while text.startswith("not ") or (text.startswith("(") and text.endswith(")")):
        if text.startswith("not "):
            negated = not negated
            text = text[4:].strip()
        else:
            text = text[1:-1].strip()
    return text, negated
