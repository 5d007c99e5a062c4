"""Grad-accumulation hooks fired for every element of a sequence, and lists whose every
element had its books kept before it was put there (issue #19, class 5).

``analysis.hooks`` finds a hook fired for one named parameter. Code that finishes a group of
parameters often fires them all in one expression instead: ``map(operator.methodcaller(
"post_wgrad_grad_acc_hook"), params)`` (the caller possibly bound to a name at module
level), ``map(lambda p: p._grad_accum_hook(), params)``, or a loop over hooks collected from
the parameters (``for h in [p._grad_accum_hook for p in params]: h()``, ``for h in
map(operator.attrgetter("_grad_accum_hook"), params)``). Each such firing is a firing for
every element of ``params``: its bookkeeping is that of an earlier loop over ``params`` that
keeps each element's books on every pass, or of a list filled only with parameters whose
books were kept (see ``booked_list``).

A *booked list* ``L`` is bound to an empty list (``L = []``) and only ever appended to
(``L.append(w)``, walked by ``for``, ``zip``, ``map``, measured by ``len``: any other use
may put something else in it), each append handing a name whose books were kept on every
path to it. A hook fired for each element of ``L`` (``for w in L:
w.post_wgrad_grad_acc_hook()``) has its bookkeeping done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from . import iteration, patterns
from .hook_owners import hook_owner
from .hook_words import is_stored_hook
from .module import ModuleContext, Unit

# Calls that only walk a sequence or copy it: handing them ``params`` keeps no books for
# its elements (``zip(params, grads)`` in a loop header).
ITERATING_CALLS = frozenset(
    {"zip", "enumerate", "list", "tuple", "reversed", "sorted", "iter", "len", "map", "filter"}
)
CALLER_MAKERS = frozenset({"methodcaller"})
GETTER_MAKERS = frozenset({"attrgetter"})


def module_callers(context: ModuleContext) -> dict[str, str]:
    """For ``context.shared``: module-level names bound to ``operator.methodcaller("<stored
    hook>")`` (name -> hook attribute): a function fires them without binding them itself."""
    found = {}
    for line in context.module.body:
        if type(line) is not cst.SimpleStatementLine:
            continue
        for small in line.body:
            if type(small) is cst.Assign and len(small.targets) == 1:
                target, attr = small.targets[0].target, _made_hook(small.value, CALLER_MAKERS)
                if type(target) is cst.Name and attr is not None:
                    found[target.value] = attr
    return found


def _made_hook(expr: cst.CSTNode | None, makers: frozenset[str]) -> str | None:
    """``<stored hook>`` for ``operator.methodcaller("<stored hook>", ...)`` (or
    ``attrgetter``, as ``makers`` says)."""
    if type(expr) is not cst.Call or patterns.callee_name(expr) not in makers:
        return None
    args = patterns.positional_args(expr)
    word = patterns.string_value(args[0].value) if args else None
    return word if word is not None and is_stored_hook(word) else None


def mapped_firings(unit: Unit) -> Iterator[tuple[cst.Call, object, cst.BaseExpression]]:
    """(call, graph node, sequence) for each call that fires the hook of every element of
    ``sequence``: ``map(<hook caller>, sequence)`` and ``h()`` with ``h`` each hook of a
    sequence of hooks taken from ``sequence``'s elements."""
    callers = unit.context.shared(module_callers)
    for root, node in unit.expression_roots():
        for sub in patterns.walk(root):
            if type(sub) is not cst.Call:
                continue
            name = patterns.callee_name(sub)
            args = patterns.positional_args(sub)
            if name == "map" and len(args) == 2 and type(sub.func) is cst.Name:
                if _fires_element_hook(unit, args[0].value, node, callers):
                    yield sub, node, args[1].value
            elif type(sub.func) is cst.Name:
                sequence = _hooks_walked(unit, sub, node)
                if sequence is not None:
                    yield sub, node, sequence


def _fires_element_hook(unit: Unit, func: cst.CSTNode, node, callers: dict[str, str]) -> bool:
    """``func``, called with one element, fires that element's stored hook:
    ``methodcaller("<hook>")`` (or a name bound to one, here or at module level), ``lambda
    p: p.<hook>()`` / ``lambda p: getattr(p, "<hook>")()``."""
    if _made_hook(func, CALLER_MAKERS) is not None:
        return True
    if type(func) is cst.Name:
        defs = unit.reaching.reaching(func.value, node)
        if defs:
            return all(_made_hook(d.value, CALLER_MAKERS) is not None for d in defs)
        return func.value in callers
    return lambda_fires_own_hook(func)


def lambda_fires_own_hook(func: cst.CSTNode) -> bool:
    """``lambda p: p.<stored hook>()`` (or ``getattr(p, "<hook>")()``): a lambda of one
    parameter whose body fires that parameter's hook."""
    if type(func) is not cst.Lambda or len(func.params.params) != 1:
        return False
    body, param = func.body, func.params.params[0].name.value
    return type(body) is cst.Call and _owner_without_flow(body.func) == param


def _owner_without_flow(expr: cst.CSTNode) -> str | None:
    """``p`` for ``p.<stored hook>`` or ``getattr(p, "<stored hook>")`` (no data flow)."""
    if type(expr) is cst.Attribute and type(expr.value) is cst.Name:
        return expr.value.value if is_stored_hook(expr.attr.value) else None
    if patterns.callee_name(expr) == "getattr" and type(expr.func) is cst.Name:
        args = patterns.positional_args(expr)
        word = patterns.string_value(args[1].value) if len(args) >= 2 else None
        if word is not None and type(args[0].value) is cst.Name and is_stored_hook(word):
            return args[0].value.value
    return None


def _hooks_walked(unit: Unit, call: cst.Call, node) -> cst.BaseExpression | None:
    """The sequence ``X`` for ``h()`` with ``h`` bound by ``for h in S`` to each hook of
    ``S``, a sequence of the hooks of ``X``'s elements (``[p.<hook> for p in X]``,
    ``map(attrgetter("<hook>"), X)``, or a name bound to one of them)."""
    defs = unit.reaching.reaching(call.func.value, node)
    if len(defs) != 1 or defs[0].kind != "for" or type(defs[0].node.owner) is not cst.For:
        return None
    loop = defs[0].node.owner
    if loop.target is not defs[0].target:
        return None
    hooks = loop.iter
    if type(hooks) is cst.Name:
        bound = unit.reaching.reaching(hooks.value, defs[0].node)
        if len(bound) != 1 or bound[0].kind != "assign":
            return None
        hooks = bound[0].value
    return _hook_sequence_source(unit, hooks, node)


def _hook_sequence_source(unit: Unit, hooks, node) -> cst.BaseExpression | None:
    if type(hooks) in (cst.ListComp, cst.GeneratorExp):
        walk = hooks.for_in
        if walk.inner_for_in is not None or walk.ifs or type(walk.target) is not cst.Name:
            return None
        owner = hook_owner(hooks.elt, unit, node)
        return walk.iter if owner == walk.target.value else None
    args = patterns.positional_args(hooks) if type(hooks) is cst.Call else []
    if patterns.callee_name(hooks) == "map" and len(args) == 2:
        return args[1].value if _made_hook(args[0].value, GETTER_MAKERS) else None
    return None


def mapped_lambda_calls(unit: Unit) -> frozenset[int]:
    """The ids of the calls in the body of a lambda mapped over a sequence (``map(lambda p:
    p.<hook>(), params)``): the firing is each element's, not that of a parameter ``p``."""
    found = set()
    for root, _ in unit.expression_roots():
        for sub in patterns.walk(root):
            if patterns.callee_name(sub) == "map" and sub.args:
                func = sub.args[0].value
                if lambda_fires_own_hook(func):
                    found.add(id(func.body))
    return frozenset(found)


def keeps_sequence_books(root: cst.CSTNode, code: str, protocol: frozenset[str]) -> bool:
    """``root`` hands the sequence ``code`` itself to a call that may keep its elements'
    books (not one that only walks or measures it), or calls one of the ``protocol`` calls
    (``backward_dw()``: the delayed-wgrad protocol keeps the books of what it computes)."""
    for sub in patterns.walk(root):
        if type(sub) is not cst.Call:
            continue
        name = patterns.callee_name(sub)
        if name in protocol:
            return True
        if name not in ITERATING_CALLS and any(_code(arg.value) == code for arg in sub.args):
            return True
    return False


def booked_list(unit: Unit, code: str, at, books: Callable[[str, object], bool]) -> bool:
    """The sequence ``code`` (a local name) is, where ``at`` reads it, a list that holds
    only names whose books ``books(name, node)`` says were kept on every path to the
    ``append`` that put them there."""
    if not code.isidentifier():
        return False
    defs = unit.reaching.reaching(code, at)
    if not defs or not all(d.kind == "assign" and _is_empty_list(d.value) for d in defs):
        return False
    if not _only_appended(unit, code):
        return False
    appended = [pair for d in defs for pair in iteration.appended_to(unit, d)]
    return bool(appended) and all(
        type(value) is cst.Name and books(value.value, node) for value, node in appended
    )


def _is_empty_list(expr) -> bool:
    if type(expr) is cst.List:
        return not expr.elements
    return patterns.callee_name(expr) == "list" and not expr.args


def _only_appended(unit: Unit, name: str) -> bool:
    """Every use of ``name`` in the unit binds it, appends to it, walks it in a ``for``
    (statement or comprehension) or hands it to a call that only walks or measures it."""
    uses = allowed = 0
    for stmt in unit.body:
        for sub in patterns.walk(stmt):
            kind = type(sub)
            if kind is cst.Name and sub.value == name:
                uses += 1
            elif kind is cst.Attribute and _is_name(sub.value, name):
                allowed += sub.attr.value == "append"
            elif kind in (cst.For, cst.CompFor) and _is_name(sub.iter, name):
                allowed += 1
            elif kind is cst.AssignTarget:
                allowed += sum(1 for n in _target_names(sub.target) if n.value == name)
            elif patterns.callee_name(sub) in ITERATING_CALLS:
                allowed += sum(1 for arg in sub.args if _is_name(arg.value, name))
    return uses == allowed


def _target_names(target: cst.CSTNode) -> list[cst.Name]:
    if type(target) is cst.Name:
        return [target]
    if type(target) in (cst.Tuple, cst.List):
        return [n for element in target.elements for n in _target_names(element.value)]
    return []


def _is_name(expr: cst.CSTNode, word: str) -> bool:
    return type(expr) is cst.Name and expr.value == word


def _code(expr: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(expr)
