"""Whether an expression a fix pastes at a site means there what it meant where it was read.

A fix that writes a name somewhere new (a flag's op-level source spliced into a test,
``origin_weight`` swapped in for ``weight``) is only right when the name there is bound to
the same object: not rebound or deleted between (``op = ops[1]``, ``del op``), not bound
after the site (``origin_weight = ...`` further down), and not shadowed by a comprehension's
or a lambda's own variable of that name. Those are found by the function's bindings, read
conservatively: a name is trusted when the function never binds it (a parameter left alone,
a global), or binds it exactly once, by a plain assignment directly in its body, above the
site. Anything else (two bindings, a loop variable, a ``with ... as``, a binding in a nested
scope) makes the fix stand down; the finding stays."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import file_functions, patterns

if TYPE_CHECKING:
    from .module import ModuleContext


def hold_at(context: ModuleContext, function: cst.CSTNode, text: str, site: cst.CSTNode) -> bool:
    """Every name ``text`` reads is bound, at ``site`` inside ``function``, to what the
    function's one binding of it (or none) gives it."""
    try:
        expr = cst.parse_expression(text)
    except cst.ParserSyntaxError:
        return False
    if not isinstance(function, cst.FunctionDef):
        return False
    bindings = _bindings(function)
    parameters = set(file_functions.parameters(function))
    site_line = context.line_of(site)
    for name in {n.value for n in patterns.read_names(expr)}:
        found = bindings.get(name, [])
        if not found:
            continue  # a parameter never rebound, or a name from outside the function
        if name in parameters or len(found) != 1:
            return False
        kind, line_node = found[0]
        if kind != "assign":
            return False
        if context.line_of(line_node) >= site_line:
            return False
    return True


def _bindings(function: cst.FunctionDef) -> dict[str, list[tuple[str, cst.CSTNode]]]:
    """Every binding of a name in ``function``'s body, nested scopes included, as (kind,
    the statement line or node that makes it)."""
    found: dict[str, list[tuple[str, cst.CSTNode]]] = {}

    def bind(target: cst.CSTNode, kind: str, where: cst.CSTNode) -> None:
        for node in _target_names(target):
            found.setdefault(node.value, []).append((kind, where))

    for line in _statement_lines(function.body):
        for node in _all_nodes(line):
            kind = type(node)
            if kind is cst.Assign:
                single = len(node.targets) == 1 and type(node.targets[0].target) is cst.Name
                # directly in the body: a statement of its own line (not inside an ``if``)
                direct = type(line) is cst.SimpleStatementLine and node in line.body
                for target in node.targets:
                    bind(target.target, "assign" if single and direct else "other", line)
            elif kind in (cst.AnnAssign, cst.AugAssign):
                bind(node.target, "other", line)
            elif kind in (cst.For, cst.CompFor):
                bind(node.target, "loop", node)
            elif kind is cst.NamedExpr:
                bind(node.target, "walrus", node)
            elif kind is cst.Del:
                bind(node.target, "del", node)
            elif kind is cst.AsName:
                bind(node.name, "as", node)
            elif kind is cst.Param:
                bind(node.name, "nested parameter", node)
            elif kind in (cst.FunctionDef, cst.ClassDef):
                bind(node.name, "def", node)
            elif kind in (cst.Global, cst.Nonlocal):
                for item in node.names:
                    bind(item.name, "global", node)
            elif kind is cst.ImportAlias and node.asname is None:
                bind(node.name, "import", node)
    return found


def _statement_lines(body: cst.CSTNode):
    """The statements of a function body, compound ones whole: each is walked in full."""
    if isinstance(body, cst.IndentedBlock):
        yield from body.body
    else:
        yield body


def _all_nodes(node: cst.CSTNode):
    """Every node under ``node``, nested functions, classes, lambdas and comprehensions
    included (libcst's own children, not the fast walk, which stops at scopes)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _target_names(target: cst.CSTNode) -> list[cst.Name]:
    if type(target) is cst.Name:
        return [target]
    if type(target) in (cst.Tuple, cst.List):
        return [n for e in target.elements for n in _target_names(e.value)]
    if type(target) is cst.StarredElement:
        return _target_names(target.value)
    return []  # an attribute or a subscript binds no name
