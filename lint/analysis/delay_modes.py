"""Which delay mode decides what, in one class (issue #19, class 6: delay-mode mismatches).

A layer built with ``delay_wgrad_compute=<mode>`` leaves its weight gradient to its
``backward_dw()`` exactly when ``<mode>`` holds. The owner's ``backward_dw`` calls the
layer's under a test of some mode; if that test reads a different mode than the one the
layer was built with, there are configurations where the layer delays and nobody computes
its wgrad.

A *mode term* is what an expression reads the delay mode from: an attribute chain or name
ending in ``delay_wgrad_compute`` (``self.`` dropped: ``config.delay_wgrad_compute``), or a
``["delay_wgrad_compute"]`` / ``.get("delay_wgrad_compute")`` look-up on a name. The class's
own ``self.delay_wgrad_compute``, when ``__init__`` copies a single term into it, is that
term; when it is computed (``config.delay_wgrad_compute or overlap``) it is a term of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .classes import BACKWARD_DW, DELAY, ClassIndex, ClassModel
from .module import suite_body

OWN = DELAY  # ``self.delay_wgrad_compute`` with ``self.`` dropped
SUPER = "super()"  # the base the class extends, built by ``super().__init__``
# Ops a method other than ``__init__`` builds (a fused container's ``Sequential`` of TE ops):
# their ``backward_dw()`` is called on what holds them (``children[2].backward_dw()``), not
# on a ``self.<layer>``.
OPS = "<ops>"
TRUE = frozenset({"True"})


@dataclass(frozen=True)
class Guarded:
    call: cst.Call  # ``self.<layer>.backward_dw()``
    layer: str
    terms: frozenset[str]  # the mode terms of the tests it runs under
    # The nearest test that gave it mode terms: where a wrong mode is written, so where the
    # finding and its fix belong (the call itself is right); None when no test did.
    test: cst.BaseExpression | None = None


def terms(expr: cst.CSTNode) -> frozenset[str]:
    found = set()
    for node in patterns.walk(expr):
        kind = type(node)
        if kind is cst.Attribute and node.attr.value == DELAY:
            found.add(dotted(node))
        elif kind is cst.Name and node.value == DELAY:
            found.add(DELAY)
        elif kind is cst.Subscript and _is_delay_key(node.slice[0].slice):
            found.add(f"{dotted(node.value)}[{DELAY}]")
        elif kind is cst.Call and patterns.callee_name(node) == "get":
            args = patterns.positional_args(node)
            if args and _is_delay_key(args[0]) and type(node.func) is cst.Attribute:
                found.add(f"{dotted(node.func.value)}[{DELAY}]")
    return frozenset(found)


def own_mode(model: ClassModel) -> frozenset[str] | None:
    """The terms ``self.delay_wgrad_compute`` stands for: the one term ``__init__`` copies
    into it, or None when ``__init__`` computes it (it is then a term of its own)."""
    init = model.methods.get("__init__")
    if init is None:
        return None
    for node in patterns.walk(init.body):
        if type(node) is cst.Assign and any(
            dotted(t.target) == OWN for t in node.targets if type(t.target) is cst.Attribute
        ):
            value = node.value
            single = type(value) in (cst.Attribute, cst.Name, cst.Subscript, cst.Call)
            found = terms(value)
            return found if single and len(found) == 1 else None
    return None


def built_modes(model: ClassModel) -> dict[str, tuple[frozenset[str], cst.CSTNode]]:
    """layer attribute (``SUPER`` for the base the class extends) -> (the mode terms it was
    built with, where), for what ``__init__`` builds with a mode that is not ``False``:
    ``self.x = Layer(..., delay_wgrad_compute=A)``, ``Layer(..., **kwargs)`` after
    ``kwargs["delay_wgrad_compute"] = A``, and ``super().__init__(...)`` given either. A
    literal ``True`` set under ``if B:`` is mode ``B``."""
    init = model.methods.get("__init__")
    if init is None:
        return {}
    dicts = dict(_dict_modes(suite_body(init.body), frozenset()))
    found = {}
    for node in patterns.walk(init.body):
        if type(node) is not cst.Call:
            continue
        mode = _call_mode(node, dicts)
        if mode is None:
            continue
        if _is_super_init(node):
            found[SUPER] = (mode, node)
    for attr, assignment in model.layers.items():
        for node in patterns.walk(assignment.value):
            if type(node) is cst.Call and (mode := _call_mode(node, dicts)) is not None:
                found[attr] = (mode, node)
    return found


def method_built_modes(model: ClassModel) -> list[tuple[frozenset[str], cst.CSTNode]]:
    """(mode terms, the call) for each op a method other than ``__init__`` builds with a
    mode that is not ``False``; a local bound to an expression of mode terms in that method
    (``fc1_delay = self.linear_fc1.delay_wgrad_compute``) stands for them."""
    found = []
    for name, method in model.methods.items():
        if name == "__init__":
            continue
        nodes = list(patterns.walk(method.body))
        local_modes = {}
        renames = {}  # ``cfg = self.config``: ``cfg.delay_wgrad_compute`` is the config's
        for node in nodes:
            if type(node) in (cst.Assign, cst.AnnAssign):
                targets = node.targets if type(node) is cst.Assign else [node]
                target = targets[0].target if len(targets) == 1 else None
                if type(target) is not cst.Name or node.value is None:
                    continue
                if (bound := terms(node.value)) and not (
                    type(node.value) is cst.Attribute and node.value.attr.value != DELAY
                ):
                    local_modes[target.value] = bound
                elif type(node.value) is cst.Attribute:
                    renames[target.value] = dotted(node.value)
        for node in nodes:
            if type(node) is not cst.Call:
                continue
            arg = patterns.keyword_arg(node, DELAY)
            if arg is not None and type(arg.value) is cst.Name and arg.value.value in local_modes:
                mode = local_modes[arg.value.value]
            else:
                mode = _call_mode(node, {})
            if mode is not None:
                found.append((frozenset(_renamed(term, renames) for term in mode), node))
    return found


def _renamed(term: str, renames: dict[str, str]) -> str:
    head, _, rest = term.partition(".")
    return f"{renames[head]}.{rest}" if rest and head in renames else term


def loop_names(index: ClassIndex, model: ClassModel) -> frozenset[str]:
    """Names the class's ``backward_dw`` binds by a ``for`` or a comprehension."""
    method = index.method(model, BACKWARD_DW)
    if method is None:
        return frozenset()
    found = set()
    for node in patterns.walk(method.body):
        if type(node) in (cst.For, cst.CompFor):
            found.update(n.value for n in patterns.walk(node.target) if type(n) is cst.Name)
    return frozenset(found)


def _call_mode(call: cst.Call, dicts: dict[str, frozenset[str]]) -> frozenset[str] | None:
    arg = patterns.keyword_arg(call, DELAY)
    if arg is not None:
        if patterns.is_false_literal(arg.value):
            return None
        if patterns.is_true_literal(arg.value):
            return TRUE
        return terms(arg.value) or None  # a mode read from no term we know: unknown
    for arg in call.args:
        if arg.star == "**" and type(arg.value) is cst.Name and arg.value.value in dicts:
            return dicts[arg.value.value]
    return None


def _dict_modes(body, tests: frozenset[str]) -> Iterator[tuple[str, frozenset[str]]]:
    """(kwargs dict, mode) for ``kw["delay_wgrad_compute"] = A``, ``kw = {"delay_wgrad_compute":
    A}`` and ``kw = dict(delay_wgrad_compute=A)`` (under ``if`` tests)."""
    for stmt in body:
        if isinstance(stmt, cst.If):
            inner = tests | terms(stmt.test)
            yield from _dict_modes(suite_body(stmt.body), inner)
            if isinstance(stmt.orelse, cst.Else):
                yield from _dict_modes(suite_body(stmt.orelse.body), inner)
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if type(small) is not cst.Assign:
                    continue
                for target in small.targets:
                    found = _entry_mode(target.target, small.value, tests)
                    if found is not None:
                        yield found


def _entry_mode(target, value, tests) -> tuple[str, frozenset[str]] | None:
    if type(target) is cst.Subscript and _is_delay_key(target.slice[0].slice):
        name = target.value
    elif type(target) is cst.Name:
        name, value = target, _literal_entry(value)
    else:
        return None
    if type(name) is not cst.Name or value is None or patterns.is_false_literal(value):
        return None
    if patterns.is_true_literal(value):
        return name.value, tests or TRUE
    found = terms(value)
    return (name.value, found) if found else None


def _literal_entry(value: cst.CSTNode) -> cst.CSTNode | None:
    """The delay mode's value in ``{"delay_wgrad_compute": A, ...}`` or ``dict(...=A)``."""
    if type(value) is cst.Dict:
        for element in value.elements:
            if type(element) is cst.DictElement and _is_delay_key(element.key):
                return element.value
    elif type(value) is cst.Call and patterns.callee_name(value) == "dict":
        arg = patterns.keyword_arg(value, DELAY)
        return arg.value if arg is not None else None
    return None


def _is_super_init(call: cst.Call) -> bool:
    func = call.func
    return (
        type(func) is cst.Attribute
        and func.attr.value == "__init__"
        and patterns.callee_name(func.value) == "super"
    )


def guarded_calls(index: ClassIndex, model: ClassModel) -> Iterator[Guarded]:
    """``self.<layer>.backward_dw()`` calls of the class's own ``backward_dw`` (defined in
    this file) with the mode terms of the tests they run under: enclosing ``if`` tests, and
    an ``if <test>: return`` before them in an enclosing suite."""
    method = index.method(model, BACKWARD_DW)
    if method is not None:
        yield from _walk(suite_body(method.body), frozenset())


def _walk(body, outer: frozenset[str], where=None) -> Iterator[Guarded]:
    current = outer
    for stmt in body:
        if isinstance(stmt, cst.If):
            test = terms(stmt.test)
            inner = _nearest(stmt.test, where)
            yield from _walk(suite_body(stmt.body), current | test, inner)
            orelse = stmt.orelse
            while orelse is not None:
                if isinstance(orelse, cst.If):
                    branch = _nearest(orelse.test, inner)
                    yield from _walk(
                        suite_body(orelse.body), current | test | terms(orelse.test), branch
                    )
                    test = test | terms(orelse.test)
                    orelse = orelse.orelse
                else:
                    yield from _walk(suite_body(orelse.body), current | test, inner)
                    orelse = None
            if _leaves(stmt.body):
                current = current | test  # ``if not <mode>: return`` guards what follows
                where = inner
        elif isinstance(stmt, (cst.For, cst.While, cst.With, cst.Try)):
            yield from _walk(suite_body(stmt.body), current, where)
        elif isinstance(stmt, cst.SimpleStatementLine):
            for node in patterns.walk(stmt):
                layer = _layer_backward_dw(node)
                if layer is not None:
                    yield Guarded(node, layer, current, where)


def _nearest(test: cst.BaseExpression, outer):
    """``test`` when it reads a mode, else the outer test that did."""
    return test if terms(test) else outer


def _leaves(suite: cst.CSTNode) -> bool:
    body = suite_body(suite)
    last = body[-1] if body else None
    return isinstance(last, cst.SimpleStatementLine) and isinstance(
        last.body[-1], (cst.Return, cst.Raise)
    )


def _layer_backward_dw(node: cst.CSTNode) -> str | None:
    if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
        return None
    if node.func.attr.value != BACKWARD_DW:
        return None
    owner = node.func.value
    if patterns.callee_name(owner) == "super":
        return SUPER
    if (
        type(owner) is cst.Attribute
        and type(owner.value) is cst.Name
        and owner.value.value == "self"
    ):
        return owner.attr.value
    return OPS


def _is_delay_key(node: cst.CSTNode) -> bool:
    return patterns.string_value(getattr(node, "value", node)) == DELAY


def dotted(expr: cst.CSTNode) -> str:
    """``self.config.delay_wgrad_compute`` -> ``config.delay_wgrad_compute``."""
    parts = []
    while type(expr) is cst.Attribute:
        parts.append(expr.attr.value)
        expr = expr.value
    if type(expr) is cst.Name and expr.value != "self":
        parts.append(expr.value)
    elif type(expr) is not cst.Name:
        parts.append("?")
    return ".".join(reversed(parts))


def assigns_own(model: ClassModel) -> bool:
    """Some method of the class assigns ``self.delay_wgrad_compute``."""
    return any(
        type(node) is cst.Assign
        and any(type(t.target) is cst.Attribute and dotted(t.target) == OWN for t in node.targets)
        for method in model.methods.values()
        for node in patterns.walk(method.body)
    )
