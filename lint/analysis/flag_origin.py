"""Where a downgraded flag came from: the cause GMLP001 and GMLP002 name in their messages,
and the op-level expression their fix gates on instead.

The fix follows each tainted name in the branch's test back through its reaching
definitions: a copy of an expression gives that expression; a downgrade
(``flag = op_flag and not w.overwrite_main_grad``, ``flag &= ...``, or one made inside
``if op_flag:``) gives what it was downgraded from. The fix is offered only when every
name leads to one and the same expression.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ..model import UNSAFE, Fix
from . import carried as carried_flags
from . import first_microbatch, pasted_names, patterns
from .branches import Branch
from .cfg import Def, Node
from .collector import Collector
from .module import ModuleContext, Unit

# Words that make an enclosing test look like the op-level output-into-main-grad setting.
OP_LEVEL_HINTS = ("main_grad", "accumulat", "fuse_wgrad", "gradient_accumulation_fusion")


@dataclass(frozen=True)
class Gate:
    """How to report a suspect branch: where, why, and the fix."""

    anchor: cst.CSTNode  # the tainted flag in the test, or the test itself
    cause: str  # what the branch is gated on, for the message
    fix: Fix | None
    replacement: str | None  # the op-level expression the fix gates on

    def message(self, problem: str) -> str:
        if self.replacement is None:
            return problem
        return f"{problem}; gate on `{self.replacement}` instead"


def gate_of(branch: Branch, out: Collector) -> Gate:
    unit, test, node = branch.unit, branch.test, branch.node
    taint = unit.overwrite
    if branch.via is not None:
        # The test reads a comprehension's variable: the cause is the sequence it walks,
        # and there is no one op-level expression to splice in for an element.
        names = taint.tainted_names(branch.via, node)
        direct = taint.direct(branch.via)
        origin = _cause(unit, branch.via, names[0] if names else None, node, direct)
        cause = f"`{unit.context.text(test)}`, an element of {origin}"
        return Gate(test, cause, None, None)
    names = taint.tainted_names(test, node)
    direct = taint.direct(test)
    anchor: cst.CSTNode = names[0] if names and not direct else test
    cause = _cause(unit, test, names[0] if names else None, node, direct)
    chosen = _chosen_where_defined(unit, names[0], node) if names and not direct else None
    if chosen is not None:
        anchor, defined_at = chosen
        inner = _cause(unit, defined_at.value, anchor, defined_at.node, False)
        cause = f"`{names[0].value}`, which its definition takes from {inner}"
    site = None if direct or not names else _caller_site(unit, names[0], node)
    if site is not None:
        # The helper is right for a right argument: point at the caller that hands it the
        # downgraded flag (the first one in source order).
        line = unit.context.line_of(branch.test)
        cause = (
            f"`{unit.context.text(site.value)}`, a flag `overwrite_main_grad` can switch off, "
            f"handed here to `{unit.name}`'s `{names[0].value}`, which gates it (line {line})"
        )
        return Gate(site.value, cause, None, None)
    origins = _Origins(unit)
    replacement = None if direct else origins.op_level_replacement(names, node)
    if replacement is None:
        return Gate(anchor, cause, None, None)
    text, atomic = replacement
    if not pasted_names.hold_at(unit.context, unit.owner, text, test, origins.reads):
        # ``op`` rebound, deleted or shadowed between the flag and the test: the spliced
        # source would read another object there (or none)
        return Gate(anchor, cause, None, None)
    edits = tuple(out.replace(name, text if atomic else f"({text})") for name in names)
    return Gate(anchor, cause, Fix(f"Gate on `{text}`", edits, UNSAFE), text)


def _chosen_where_defined(unit: Unit, name: cst.Name, node: Node) -> tuple[cst.Name, Def] | None:
    """The downgraded flag inside the definition of ``name`` when that definition is the
    bookkeeping decision itself (``use_dummy = hasattr(w, "grad_added_to_main_grad") and
    accumulate``): the wrong flag was chosen there, and the tests that read ``name`` only
    follow it. A local that is the downgraded flag itself (also the GEMM's ``accumulate``)
    is reported where it gates."""
    origin = unit.overwrite.origin(name.value, node)
    if origin is None or origin.kind != "assign" or origin.value is None:
        return None
    value = origin.value
    if not any(patterns.spells(sub, patterns.GRAD_ADDED) for sub in patterns.walk(value)):
        return None
    if unit.overwrite.direct(value):
        return None
    inner = unit.overwrite.tainted_names(value, origin.node)
    return (inner[0], origin) if inner else None


def _caller_site(unit: Unit, name: cst.Name, node: Node) -> cst.Arg | None:
    """The first argument of the module that hands the parameter ``name`` of ``unit`` (the
    origin of the flag at ``node``) a downgraded flag."""
    origin = unit.overwrite.origin(name.value, node)
    if origin is None or origin.kind != "param":
        return None
    found = unit.context.carried.sites.get((unit.name, name.value))
    return found[0] if found else None


def _cause(unit: Unit, test, name: cst.Name | None, node: Node, direct: bool) -> str:
    if direct:
        carried = unit.context.carried.ctx_attrs
        for sub in patterns.walk(test):
            if carried and carried_flags.is_ctx_attr(sub, carried):
                text = unit.context.text(sub)
                return f"`{text}`, a flag forward derived from `overwrite_main_grad`"
        return f"a test on `{_switch(unit.context.text(test))}`"
    origin = unit.overwrite.origin(name.value, node)
    if origin is not None and origin.kind == "param":
        return (
            f"`{name.value}`, a parameter that a caller in this module passes a flag "
            "`overwrite_main_grad` can switch off"
        )
    site = origin and (origin.target or origin.node.owner)
    where = f" (line {unit.context.line_of(site)})" if site is not None else ""
    switch = _switch(" ".join(unit.context.text(v) for v in _origin_values(unit, name.value, node)))
    return f"`{name.value}`, a local flag that `{switch}` can switch off{where}"


def _origin_values(unit: Unit, name: str, node: Node) -> list[cst.CSTNode]:
    """The values that make ``name`` downgraded: its tainted definition, or for a closure's
    free name the enclosing function's tainted definitions of it."""
    origin = unit.overwrite.origin(name, node)
    if origin is not None:
        return [origin.value] if origin.value is not None else []
    outer = unit.overwrite.outer
    if outer is None:
        return []
    return [
        d.value for d in outer.graph.defs if d.name == name and outer.value[d.index] and d.value
    ]


def _switch(text: str) -> str:
    """The accumulate-or-overwrite switch a flag's source text reads, for the message."""
    if first_microbatch.FIRST_MICROBATCH in text and "overwrite" not in text:
        return first_microbatch.FIRST_MICROBATCH
    return patterns.OVERWRITE


class _Origins:
    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.context = unit.context
        # every expression a source text was read from, for the check that its names mean
        # the same where the text is spliced (a superset: tried and dropped ones too)
        self.reads: list[cst.CSTNode] = []

    def _spliced(self, expr: cst.CSTNode) -> tuple[str, bool]:
        self.reads.append(expr)
        return _spliced(self.context, expr)

    def op_level_replacement(self, names: list[cst.Name], node: Node) -> tuple[str, bool] | None:
        """The one expression every tainted flag in the test was derived from, and whether
        it can be spliced without parentheses; None when there is no single answer."""
        if not names:
            return None
        found: dict[str, bool] = {}
        for name in names:
            sources = self.sources(name.value, node, set())
            if not sources:
                return None
            found.update(sources)
        if len(found) != 1:
            return None
        ((text, atomic),) = found.items()
        return text, atomic

    def sources(self, name: str, node: Node, seen: set[int]) -> dict[str, bool] | None:
        taint = self.unit.overwrite
        found: dict[str, bool] = {}
        for d in self.unit.reaching.reaching(name, node):
            if d.index in seen:
                continue
            seen.add(d.index)
            if d.node.owner is not None:
                # where the flag took its value: a definition that does not run on every
                # pass to the test keeps an earlier pass's (pasted_names judges it as a read)
                self.reads.append(d.node.owner)
            if d.kind in ("param", "import", "except", "match", "def", "for", "with"):
                return None
            if taint.value[d.index]:
                # A downgrade whose origin cannot be read (``flag = not overwrite`` at the
                # bottom of a loop) leaves the answer to the other definitions, unless it
                # reads an op-level setting of its own (``f(ops[1].accumulate_into_main_grad,
                # ...)``): the test would then be rewritten onto another op's.
                source = self.downgrade_source(d, seen)
                if source is None and d.value is not None and _reads_op_setting(d.value):
                    return None
                found.update(source or {})
                continue
            part = self.copy_source(d, seen)
            if part is None:
                return None
            found.update(part)
        return found

    def copy_source(self, d: Def, seen: set[int]) -> dict[str, bool] | None:
        value = d.value
        if value is None or _is_bool_literal(value):
            return {}
        if isinstance(value, cst.Dict):
            return None  # a dict of arguments: no one expression to gate on
        if isinstance(value, cst.Name) and self.unit.reaching.defines(value.value):
            return self.sources(value.value, d.node, seen)
        text, atomic = self._spliced(value)
        return {text: atomic}

    def downgrade_source(self, d: Def, seen: set[int]) -> dict[str, bool] | None:
        taint = self.unit.overwrite
        if d.kind == "aug":
            return self.sources(d.name, d.node, seen)
        value = d.value
        if isinstance(value, cst.Name) and self.unit.reaching.defines(value.value):
            return self.sources(value.value, d.node, seen)  # a copy: ``acc = accumulate``
        operands = _and_operands(_unparenthesized(value)) if value is not None else []
        if len(operands) > 1:
            kept = [op for op in operands if not taint.expr(op, d.node)]
            if kept:
                only = kept[0]
                if (
                    len(kept) == 1
                    and isinstance(only, cst.Name)
                    and self.unit.reaching.defines(only.value)
                ):
                    return self.sources(only.value, d.node, seen)
                spliced = [self._spliced(op) for op in kept]
                if len(spliced) == 1:
                    return dict(spliced)
                return {" and ".join(t if a else f"({t})" for t, a in spliced): False}
        # ``flag = not getattr(w, "overwrite_main_grad", False)`` inside ``if op_flag:``:
        # the enclosing test is what the flag stood for.
        for stmt, branch in d.node.enclosing_ifs:
            if branch != "body":
                continue
            test_node = self.unit.node_for(stmt)
            if test_node is None or taint.direct(stmt.test):
                continue
            resolved = self.resolve_test(stmt.test, test_node, seen)
            if resolved is not None:
                return resolved
        return None

    def resolve_test(self, test, node: Node, seen: set[int]) -> dict[str, bool] | None:
        """An enclosing test rewritten in op-level terms: its ``and`` operands kept as they
        are, except local flags, which are replaced by what they were copied from. None
        when the test does not look like the output-into-main-grad setting."""
        operands = _and_operands(test)
        parts: list[tuple[str, bool]] = []
        looks_op_level = False
        for operand in operands:
            if isinstance(operand, cst.Name) and self.unit.reaching.defines(operand.value):
                found = self.sources(operand.value, node, seen)
                if not found or len(found) != 1:
                    return None
                ((text, atomic),) = found.items()
                parts.append((text, atomic))
                looks_op_level = True
            elif self.unit.overwrite.expr(operand, node):
                return None
            else:
                text, atomic = self._spliced(operand)
                looks_op_level = looks_op_level or any(h in text for h in OP_LEVEL_HINTS)
                parts.append((text, atomic))
        if not looks_op_level:
            return None
        if len(parts) == 1:
            return {parts[0][0]: parts[0][1]}
        return {" and ".join(t if a else f"({t})" for t, a in parts): False}


def _unparenthesized(expr: cst.CSTNode) -> cst.CSTNode:
    """A whole value's own parentheses dropped: ``(a and not b)`` splits as ``a and not b``."""
    if isinstance(expr, cst.BooleanOperation) and expr.lpar:
        return expr.with_changes(lpar=(), rpar=())
    return expr


def _reads_op_setting(expr: cst.CSTNode) -> bool:
    """``expr`` names an op-level accumulation setting (``accumulate_into_main_grad``,
    ``fuse_wgrad_accumulation``, ``gradient_accumulation_fusion``)."""
    return any(
        ("accumulat" in word or "fuse_wgrad" in word) and "overwrite" not in word
        for sub in patterns.walk(expr)
        if type(sub) in (cst.Name, cst.Attribute)
        for word in [sub.value if type(sub) is cst.Name else sub.attr.value]
    )


def _is_bool_literal(expr: cst.CSTNode) -> bool:
    return isinstance(expr, cst.Name) and expr.value in ("True", "False", "None")


def _and_operands(expr: cst.CSTNode) -> list[cst.BaseExpression]:
    if (
        isinstance(expr, cst.BooleanOperation)
        and isinstance(expr.operator, cst.And)
        and not expr.lpar
    ):
        return _and_operands(expr.left) + _and_operands(expr.right)
    return [expr]


def _spliced(context: ModuleContext, expr: cst.CSTNode) -> tuple[str, bool]:
    """The text to splice in for ``expr`` and whether it needs no parentheses around it.

    A node's located text leaves out its own parentheses (libcst's positions do), so a
    parenthesized node gets them written back: ``(a or b)`` spliced as ``a or b`` after
    ``ready and`` would change what the test means. A walrus (``(f := op.flag)``) stands for
    its value: splicing the assignment would bind the name again."""
    while isinstance(expr, cst.NamedExpr):
        expr = expr.value
    text = context.text(expr)
    if getattr(expr, "lpar", ()):
        return "(" * len(expr.lpar) + text + ")" * len(expr.rpar), True
    return text, patterns.is_atom(expr)
