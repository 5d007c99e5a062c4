"""Does a statement fire a grad-accumulation / reduce hook (``delayed_work``'s second
question): a call of a name that says hook, of a local bound to one, of a callable the file
registered as one, or of a helper of this file or of the run that fires one."""

from __future__ import annotations

import libcst as cst

from ..wgrad_words import names_hook as _names_hook
from . import exit_callbacks, hook_containers, patterns
from .cfg import Node
from .helper_facts import FileFacts, flat_roots, imported_function, last_name, memo, own_function
from .module import Unit


def _fires(facts: FileFacts, name: str, depth: int) -> bool:
    return memo(facts._fires, name, depth, facts, _unit_fires)


def _unit_fires(unit: Unit, facts: FileFacts, depth: int) -> bool:
    bound = hook_locals(unit)
    return any(_fires_in(root, bound, facts, depth) for root in flat_roots(unit))


def hook_locals(unit: Unit) -> frozenset[str]:
    """Locals that hold a hook under a name of their own: ``for fn in <hooks>``, ``fn =
    p.<hook>``, ``fn = getattr(p, "<hook>", None)``, ``fn = <hooks>[i]``, ``fn = lambda p:
    p.<hook>(p)`` (calling it fires the hook); ``<hooks>`` also a container the file fills
    with hooks (``for fire in self._pending.values()``, ``hook_containers``)."""
    held = unit.context.shared(hook_containers.file_containers).any
    found = set()
    for stmt, _ in unit.statements():
        if type(stmt) is cst.For and type(stmt.target) is cst.Name:
            if (
                _names_hook(last_name(stmt.iter))
                or hook_containers.walked_container(stmt.iter) in held
            ):
                found.add(stmt.target.value)
        elif type(stmt) is cst.Assign and len(stmt.targets) == 1:
            target, value = stmt.targets[0].target, stmt.value
            if type(target) is cst.Name and (
                _names_hook(_hook_word(value)) or hook_containers.element_container(value) in held
            ):
                found.add(target.value)
    return frozenset(found)


def _hook_word(value: cst.CSTNode) -> str:
    if type(value) is cst.Lambda and type(value.body) is cst.Call:
        value = value.body if patterns.callee_name(value.body) == "getattr" else value.body.func
    if type(value) is cst.IfExp:
        value = value.body
    if type(value) is cst.Call and patterns.callee_name(value) == "getattr":
        args = patterns.positional_args(value)
        return patterns.string_value(args[1].value) or "" if len(args) >= 2 else ""
    return last_name(value)


def fires_hook(expr: cst.CSTNode, bound: frozenset[str], facts: FileFacts) -> bool:
    """``expr`` calls a hook: by a name that says so, through a local bound to one, a
    callable this file registered as one, or a helper of this file that fires one."""
    return _fires_in(expr, bound, facts, 1)


def _fires_in(expr: cst.CSTNode, bound: frozenset[str], facts: FileFacts, depth: int) -> bool:
    for sub in patterns.walk(expr):
        if type(sub) is not cst.Call:
            continue
        name = patterns.callee_name(sub) or ""
        if _names_hook(name) or name in facts.registered:
            return True
        if hook_containers.element_container(sub.func) in facts.containers:
            return True  # ``self._pending[i]()``: a hook the file keeps there
        if type(sub.func) is cst.Name and name in bound:
            return True
        helper = own_function(sub, facts)
        if helper is not None and _fires(facts, helper, depth + 1):
            return True
        if facts.run_fires and imported_function(sub, facts) in facts.run_fires:
            return True
    return False


def calls_imported_firing(expr: cst.CSTNode, facts: FileFacts) -> bool:
    """``expr`` calls a helper of another file of the run that fires a gradient hook
    (``RunFacts.hook_firing``), by the name it is imported under: for rules that count
    firings their own way (GMLP011)."""
    return bool(facts.run_fires) and any(
        imported_function(sub, facts) in facts.run_fires for sub in patterns.walk(expr)
    )


def notifying_nodes(unit: Unit, facts: FileFacts) -> list[Node]:
    """Nodes after which the weights' hooks count as fired: a statement that fires one,
    and the head of a loop whose body fires one (a loop over the modules or the hooks: an
    empty one has nobody to notify)."""
    bound = hook_locals(unit)
    found = []
    for stmt, _ in unit.statements():
        node = unit.node_for(stmt)
        if node is None:
            continue
        if type(stmt) in (cst.For, cst.While):
            if fires_hook(stmt.body, bound, facts):
                found.append(node)
        elif not isinstance(stmt, cst.BaseCompoundStatement) and fires_hook(stmt, bound, facts):
            found.append(node)
    for deferred in exit_callbacks.deferred_calls(unit):  # ``stack.callback(<hook>)``
        if fires_hook(deferred.call, bound, facts):
            found.extend(deferred.sure)
    return found
