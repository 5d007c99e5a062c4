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
says every such choice is contradicted by an ``if`` the assignment sits in (the same test,
``not`` read as a negation: ``decided_tests.plain_test``).
"""

from __future__ import annotations

import libcst as cst

from . import file_functions, patterns
from .decided_tests import plain_test
from .module import ModuleContext

MARK = "\0arm:"  # prefixes the recorded choices among the tests' texts (never code)


def hands_back_other(context: ModuleContext, call: cst.Call) -> bool:
    """``call`` runs a function of the file with an ``out`` parameter that none of its
    ``return`` values hands back (itself, a view of it, or a call given it as ``out=``)."""
    function = file_functions.resolved(context, call)
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


def arm(test: cst.BaseExpression, side: str) -> str | None:
    """The record that main_grad was chosen where ``test`` is true (``side`` "body") or
    false ("orelse"), by the test with its ``not`` taken off (``decided_tests.plain_test``);
    None for a test that may not read the same twice."""
    text, negated = plain_test(test)
    if text is None:
        return None
    return f"{MARK}{(side == 'body') != negated}:{text}"


def decided_against(unit, node, tests: set[str]) -> bool:
    """Every choice of main_grad recorded in ``tests`` is contradicted by an ``if`` that
    ``node`` sits in: the same test, taken the other way."""
    choices = [t[len(MARK) :].split(":", 1) for t in tests if t.startswith(MARK)]
    if not choices:
        return False
    runs = set()  # (test, the truth value the node needs of it)
    for branch, side in node.enclosing_ifs:
        text, negated = plain_test(branch.test)
        if text is not None:
            runs.add((text, (side == "body") != negated))
    return all((text, truth != "True") in runs for truth, text in choices)
