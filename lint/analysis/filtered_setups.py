"""Parameters left out of every main_grad set-up by the filters of the loops that make them
(GMLP058; issue #19, class 8), two shapes from blind corpus 24:

* main_grad set up in a loop over a model's parameters only for those that are not
  quantized: the FP8 training example, built with ``fuse_wgrad_accumulation=True`` inside
  ``quantized_model_init``, where ``for p in model.parameters(): if not isinstance(p,
  QuantizedTensor): p.main_grad = torch.zeros(...)`` leaves out exactly the weights the fused
  weight-gradient GEMMs write into;
* two loops over a module's parameters that share them out between grad buffers, each
  skipping the members of one set the same way (``if param in weight_for_zero_bubble:
  continue`` in both, where one should read ``not in``): the zero-bubble DDP's weights get no
  buffer, so no main_grad, at all."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import patterns
from .module import ModuleContext, suite_body
from .own_parameter_fetches import PARAMETER_WALKS

# The switches that make a module's weight-gradient GEMMs write ``main_grad``.
FUSION_SWITCHES = ("fuse_wgrad_accumulation", "accumulate_into_main_grad")
# What a type's name says when it is a quantized tensor (``QuantizedTensor``, ``Float8Tensor``).
QUANTIZED_TYPE_WORDS = ("quantized", "float8", "fp8", "mxfp8", "nvfp4")


def quantized_left_out(context: ModuleContext) -> Iterator[cst.BaseExpression]:
    """The test of each such filter (an ``if`` with no ``else``), in a file that turns one of
    ``FUSION_SWITCHES`` on and binds main_grad nowhere else: another binding (an ``else``, a
    second loop, a helper) may give the quantized parameters theirs."""
    if not any(f"{switch}=True" in context.source for switch in FUSION_SWITCHES):
        return
    found = [test for unit in context.units for test in _in_body(unit.owner)]
    if len(found) != 1:
        return
    bindings = sum(
        1
        for unit in context.units
        for stmt, _ in unit.statements()
        if (bound := patterns.attribute_set(stmt, patterns.MAIN_GRAD)) is not None
        and not patterns.is_none_like(bound[1])
    )
    if bindings == 1:
        yield found[0]


def _in_body(owner) -> Iterator[cst.BaseExpression]:
    """The ``isinstance(p, Q)`` of ``if not isinstance(p, Q): p.main_grad = ...`` (no
    ``else``), or of ``if isinstance(p, Q): continue`` before ``p.main_grad = ...``, in a
    loop over parameters."""
    for node in patterns.walk(owner.body if type(owner) is cst.FunctionDef else owner):
        if type(node) is not cst.For or type(node.target) is not cst.Name:
            continue
        if patterns.callee_name(node.iter) not in PARAMETER_WALKS:
            continue
        var = node.target.value
        binds = any(_binds_main_grad(s, var) for s in patterns.walk(node.body))
        for stmt in patterns.walk(node.body):
            if type(stmt) is not cst.If or stmt.orelse is not None:
                continue
            test = stmt.test
            negated = type(test) is cst.UnaryOperation and type(test.operator) is cst.Not
            if negated and _quantized_type_test(test.expression, var):
                if any(_binds_main_grad(s, var) for s in patterns.walk(stmt.body)):
                    yield test.expression
            elif _quantized_type_test(test, var) and _only_continues(stmt.body) and binds:
                yield test


def _quantized_type_test(call, name: str) -> bool:
    """``isinstance(name, <a quantized tensor type>)``."""
    if patterns.callee_name(call) != "isinstance" or len(call.args) < 2:
        return False
    subject, kinds = call.args[0].value, call.args[1].value
    if type(subject) is not cst.Name or subject.value != name:
        return False
    words = [patterns.last_word(k) or "" for k in patterns.walk(kinds)]
    return any(w in word.lower() for word in words for w in QUANTIZED_TYPE_WORDS)


def _binds_main_grad(stmt, name: str) -> bool:
    found = patterns.attribute_set(stmt, patterns.MAIN_GRAD)
    return (
        found is not None
        and type(found[0]) is cst.Name
        and found[0].value == name
        and not patterns.is_none_like(found[1])
    )


def skipped_twice(unit) -> Iterator[cst.Comparison]:
    """The skip test of the second of two loops over parameters (``named_parameters()`` /
    ``parameters()``) of one function that both ``continue`` past the members of one set
    (``if p in S: continue``) and hand the loop's parameter on after it (appended, a
    subscript key): the set's parameters are handed to neither. The set must be one the
    function builds itself, once, empty, and fills outside those loops (the zero-bubble DDP's
    ``weight_for_zero_bubble = set()`` filled from its linear layers' weights): a set handed
    in (parameters to ignore) or one each loop fills as it goes (de-duplicating tied
    parameters) is left alone, as is a function that also walks the set (``for p in S:``)."""
    seen: dict[str, int] = {}
    loops: dict[str, list[cst.For]] = {}
    code = unit.context.code
    body = unit.owner.body
    # a loop over the set itself may give its members their own set-up
    walked = {code(n.iter).strip() for n in patterns.walk(body) if type(n) is cst.For}
    for node in patterns.walk(body):
        var = _parameter_variable(node)
        if var is None:
            continue
        for test in _member_skips(node, var):
            comparator = test.comparisons[0].comparator
            key = code(comparator).strip()
            if type(comparator) is not cst.Name or key in walked or not _hands_on(node, var):
                continue
            seen[key] = seen.get(key, 0) + 1
            loops.setdefault(key, []).append(node)
            if seen[key] == 2 and _built_apart(body, key, loops[key]):
                yield test


# An empty collection, and the methods that fill one.
EMPTY_MAKERS = frozenset({"set", "list", "dict"})
FILLING = frozenset({"add", "append", "update", "extend"})


def _built_apart(body, name: str, skipping: list[cst.For]) -> bool:
    """``name`` is bound once in the function, to an empty collection, and filled by a call
    (``name.add(x)``) outside the loops that skip its members."""
    bindings = [
        n
        for n in patterns.walk(body)
        if type(n) is cst.Assign
        and any(type(t.target) is cst.Name and t.target.value == name for t in n.targets)
    ]
    if len(bindings) != 1 or not _empty(bindings[0].value):
        return False
    inside = {id(n) for loop in skipping for n in patterns.walk(loop)}
    return any(
        type(n) is cst.Call
        and type(n.func) is cst.Attribute
        and n.func.attr.value in FILLING
        and type(n.func.value) is cst.Name
        and n.func.value.value == name
        and id(n) not in inside
        for n in patterns.walk(body)
    )


def _empty(value) -> bool:
    if type(value) in (cst.List, cst.Dict, cst.Set):
        return not value.elements
    return (
        type(value) is cst.Call and not value.args and patterns.callee_name(value) in EMPTY_MAKERS
    )


def _parameter_variable(node) -> str | None:
    """``p`` of ``for p in m.parameters()`` / ``for name, p in m.named_parameters()``."""
    if type(node) is not cst.For:
        return None
    callee = patterns.callee_name(node.iter)
    target = node.target
    if callee == "named_parameters" and type(target) is cst.Tuple and len(target.elements) == 2:
        target = target.elements[1].value
    elif callee != "parameters":
        return None
    return target.value if type(target) is cst.Name else None


def _member_skips(loop: cst.For, var: str) -> Iterator[cst.Comparison]:
    """``if var in S: continue`` in the loop's body (not in a loop nested in it, where
    ``continue`` goes on with that loop)."""
    for stmt in _outside_nested_loops(loop.body):
        if type(stmt) is not cst.If or stmt.orelse is not None:
            continue
        test = stmt.test
        if (
            type(test) is cst.Comparison
            and len(test.comparisons) == 1
            and type(test.comparisons[0].operator) is cst.In
            and type(test.left) is cst.Name
            and test.left.value == var
            and _only_continues(stmt.body)
        ):
            yield test


def _outside_nested_loops(suite) -> Iterator[cst.CSTNode]:
    for stmt in suite_body(suite):
        if type(stmt) in (cst.For, cst.While):
            continue
        yield stmt
        if type(stmt) is cst.If:
            yield from _outside_nested_loops(stmt.body)
            if stmt.orelse is not None:
                yield from _outside_nested_loops(stmt.orelse.body)
        elif type(stmt) in (cst.With, cst.Try):
            yield from _outside_nested_loops(stmt.body)


def _only_continues(suite) -> bool:
    body = suite_body(suite)
    return (
        len(body) == 1
        and type(body[0]) is cst.SimpleStatementLine
        and type(body[0].body[0]) is cst.Continue
    )


def _hands_on(loop: cst.For, var: str) -> bool:
    """The loop's parameter is appended somewhere or used as a subscript key (a grad buffer
    built over it, a map from parameters to buffers)."""
    for node in patterns.walk(loop.body):
        if (
            type(node) is cst.Call
            and patterns.callee_name(node) == "append"
            and any(type(a.value) is cst.Name and a.value.value == var for a in node.args)
        ):
            return True
        if type(node) is cst.SubscriptElement:
            index = node.slice
            if (
                type(index) is cst.Index
                and type(index.value) is cst.Name
                and index.value.value == var
            ):
                return True
    return False
