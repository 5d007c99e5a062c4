"""What a function does about delayed weight gradients, read from its code rather than its
name (issue #19, class 5's converse, GMLP019).

With ``delay_wgrad_compute`` the backward pass leaves the weight-gradient GEMMs for later;
some function runs them afterwards (TE calls it ``backward_dw``, but a finalizer, a helper
it calls or a graphed closure does the same work under other names). Autograd's
AccumulateGrad never sees that work, so Megatron's DDP hears that the weights are ready only
if the function that did the work fires the hooks itself. Two questions are asked of each
function of a file:

* **does it run delayed wgrad work?** It takes queued work out of a store whose name says
  deferred weight gradients (``self.wgrad_store.pop()``, ``self._deferred_wgrads.popleft()``),
  replays a captured graph of the weight gradients (``bwd_dw_graphs[i].replay()``; a bare
  ``graph.replay()`` only inside a ``backward_dw``, where the protocol says what it holds),
  drains such a store in a loop whose body writes a main_grad (a GEMM given
  ``out=<w>.main_grad``, ``<w>.main_grad.add_(...)``), or calls a helper of this file that
  does any of these, or a helper of another file of the run that does
  (``RunFacts.wgrad_work``).
* **does a statement fire a grad-accumulation / reduce hook?** A call of a name that says
  hook (``_grad_accum_hook``, ``post_wgrad_grad_acc_hook``,
  ``_trigger_wgrad_accumulation_and_reduce_hooks``) or a grad-ready callback, not one that
  registers or builds one; a local bound to such a hook (``fn = p._grad_accum_hook``, ``for
  fn in self.wgrad_accumulation_and_reduce_hooks``) under any name; a callable this file
  hands to a ``register_*hook*`` call; or a helper of this file, or of another file of the
  run (``RunFacts.hook_firing``), that fires one.

Helpers of this file are resolved by name (``self.name(...)`` or ``name(...)`` with a ``def
name`` here); helpers of other files by the name they are imported under (``from m import
f as g``: ``g(...)``; ``import m``: ``m.f(...)``), top-level functions only
(``delayed_helpers``). ``backward_dw`` calls are never resolved that way: each layer's
``backward_dw`` announces its own weights, and a caller that forwards to it does no work of
its own (the protocol, not a helper).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ..wgrad_words import names_hook as _names_hook
from ..wgrad_words import names_protocol_callables, says_deferred_wgrad
from . import exit_callbacks, hook_containers, imports, patterns
from .cfg import Node
from .module import ModuleContext, Unit

BACKWARD_DW = "backward_dw"
# Taking one piece of queued work out of a store.
TAKE_METHODS = frozenset({"pop", "popleft"})
REPLAY = "replay"
# How deep helper calls are followed (a helper of a helper of a helper).
HELPER_DEPTH = 3


@dataclass
class FileFacts:
    """What the functions of one file do, by name (a name defined twice: any of them)."""

    functions: dict[str, list[Unit]] = field(default_factory=dict)
    registered: frozenset[str] = frozenset()  # callables handed to ``register_*hook*``
    called: frozenset[str] = frozenset()  # names called somewhere in the file
    # Helpers of other files called here: the name a ``from`` import binds -> the name
    # defined, and the names bound to whole modules (``import m``: ``m.f()``).
    imported: dict[str, str] = field(default_factory=dict)
    modules: frozenset[str] = frozenset()
    run_work: frozenset[str] = frozenset()  # ``RunFacts.wgrad_work``
    run_fires: frozenset[str] = frozenset()  # ``RunFacts.hook_firing``
    containers: frozenset[str] = frozenset()  # containers the file fills with hooks
    _work: dict[str, bool] = field(default_factory=dict)
    _fires: dict[str, bool] = field(default_factory=dict)
    _writes: dict[str, bool] = field(default_factory=dict)


def file_facts(context: ModuleContext) -> FileFacts:
    """The file's functions by name, and the callables it registers as hooks (shared by the
    rules through ``context.shared``)."""
    functions: dict[str, list[Unit]] = {}
    registered: set[str] = set()
    called: set[str] = set()
    for unit in context.units:
        if type(unit.owner) is cst.FunctionDef:
            functions.setdefault(unit.name, []).append(unit)
        if type(unit.owner) is not cst.Module:
            called |= unit.survey.calls
        if not any(_registers(name) for name in unit.survey.calls):
            continue
        for root in _roots(unit):
            for sub in patterns.walk(root):
                if type(sub) is cst.Call and _registers(patterns.callee_name(sub) or ""):
                    # ``register_wgrad_accumulation_and_reduce_hooks(self._start_reduce)``,
                    # ``p.register_grad_accum_hook(node, finish)``: calling that callable
                    # later is firing the hook, whatever it is called.
                    for arg in sub.args:
                        word = _word(arg.value)
                        if word:
                            registered.add(word)
    facts = FileFacts(functions, frozenset(registered), frozenset(called))
    facts.containers = context.shared(hook_containers.file_containers).any
    run_work, run_fires = context.wgrad_work_helpers, context.hook_firing_helpers
    # The file's imports are read only where it spells a helper of the run.
    if any(name in context.source for name in run_work | run_fires):
        facts.imported = imports.imported_names(context)
        facts.modules = imports.imported_modules(context)
        facts.run_work, facts.run_fires = run_work, run_fires
    return facts


def _registers(name: str) -> bool:
    lowered = name.lower()
    return "register" in lowered and ("hook" in lowered or "callback" in lowered)


def _word(expr: cst.CSTNode) -> str:
    """The last name of ``a.b.c`` or ``a.b[i]`` (``c``, ``b``), as spelled."""
    while type(expr) is cst.Subscript:
        expr = expr.value
    if type(expr) is cst.Name:
        return expr.value
    if type(expr) is cst.Attribute:
        return expr.attr.value
    return ""


# -- the work -------------------------------------------------------------------------
def _roots(unit: Unit):
    """The code ``unit.expression_roots`` yields, without the control-flow graph: most
    functions are asked only whether they do work or fire hooks, and building a graph for
    each of them was most of this analysis' time."""
    for stmt, _ in unit.statements():
        kind = type(stmt)
        if kind is cst.If or kind is cst.While:
            yield stmt.test
        elif kind is cst.For:
            yield stmt.iter
        elif kind is cst.With:
            yield from (item.item for item in stmt.items)
        elif not isinstance(stmt, cst.BaseCompoundStatement):
            yield stmt


def may_work(unit: Unit, facts: FileFacts) -> bool:
    """``unit`` runs delayed wgrad work, asked without its graph (``work_calls`` then says
    where)."""
    calls = unit.survey.calls
    if not (
        calls & WORK_CALLS
        or unit.survey.spells_main_grad
        or any(name in facts.functions for name in calls)
        or bool(_local_names(facts, facts.run_work) & calls)
    ):
        return False
    return _unit_does_work(unit, facts, 0)


WORK_CALLS = TAKE_METHODS | {REPLAY}


def _local_names(facts: FileFacts, defined: frozenset[str]) -> set[str]:
    """The names under which this file may call the helpers ``defined`` (bare, or as an
    attribute of a module it imports)."""
    if not defined:
        return set()
    bound = {local for local, name in facts.imported.items() if name in defined}
    return bound | set(defined) if facts.modules or facts.imported else bound


def work_calls(unit: Unit, facts: FileFacts) -> list[tuple[cst.CSTNode, Node]]:
    """(the code to report, its graph node) for each place ``unit`` runs delayed wgrad
    work itself or through a helper of this file."""
    found = []
    for root, node in unit.expression_roots():
        hit = _direct_work(root, unit.name == BACKWARD_DW)
        if hit is None:
            hit = _helper_call(root, facts, _does_work, facts.run_work)
        if hit is not None:
            found.append((hit, node))
    for stmt, _ in unit.statements():
        if type(stmt) is cst.For and says_deferred_wgrad(_word(stmt.iter)):
            node = unit.node_for(stmt)
            if node is not None and _writes_main_grad(stmt.body, facts):
                found.append((stmt.iter, node))
    return found


def _direct_work(expr: cst.CSTNode, in_backward_dw: bool) -> cst.Call | None:
    # ``store.pop()()`` runs a stored callable (a layer's own backward_dw, which announces
    # itself), not the store's raw work.
    called = {id(s.func) for s in patterns.walk(expr) if type(s) is cst.Call}
    for sub in patterns.walk(expr):
        if type(sub) is not cst.Call or type(sub.func) is not cst.Attribute or id(sub) in called:
            continue
        method, receiver = sub.func.attr.value, sub.func.value
        if method == REPLAY and not sub.args:
            # A captured graph of the weight gradients by its name; any graph inside a
            # backward_dw (the forward and input-gradient graphs are replayed by autograd).
            if in_backward_dw or says_deferred_wgrad(_word(receiver)):
                return sub
        elif method in TAKE_METHODS:
            store = _word(receiver)
            if says_deferred_wgrad(store) and not names_protocol_callables(store):
                return sub
    return None


def _writes_main_grad(body: cst.CSTNode, facts: FileFacts, depth: int = 1) -> bool:
    """The body names a main_grad (``out=w.main_grad``, ``w.main_grad.add_(g)``, a local
    bound to it, ``getattr(w, "main_grad")``, a kwargs dict holding it) or calls a function
    of the file that does: a loop over a store of deferred wgrads that reaches main_grad
    computes the weight gradients. Any spelling counts, not only a write: the store's name
    already says what the loop is for, and a write can hide behind a local or a dict."""
    for sub in patterns.walk(body):
        if patterns.spells(sub, patterns.MAIN_GRAD):
            return True
        helper = _own_function(sub, facts)
        if helper is not None and _memo(facts._writes, helper, depth + 1, facts, _unit_writes):
            return True
    return False


def _helper_call(
    expr: cst.CSTNode, facts: FileFacts, question, of_run: frozenset[str]
) -> cst.Call | None:
    """The call in ``expr`` of a function of this file for which ``question`` holds, or of
    one of ``of_run`` imported from another file."""
    for sub in patterns.walk(expr):
        name = _own_function(sub, facts)
        if name is not None and question(facts, name, 1):
            return sub
        if of_run and _imported_function(sub, facts) in of_run:
            return sub
    return None


def _imported_function(node: cst.CSTNode, facts: FileFacts) -> str | None:
    """The name (as defined) of the function of another file that ``node`` calls: ``g()``
    after ``from m import f as g``, ``m.f()`` after ``import m`` or ``from p import m``;
    None for any other node. A method is never one: ``self.f()`` names no import."""
    if type(node) is not cst.Call:
        return None
    func = node.func
    if type(func) is cst.Name:
        return facts.imported.get(func.value)
    if type(func) is cst.Attribute:
        # ``import m`` / ``from . import m`` (a module bound by a ``from`` import), then
        # ``m.f()``.
        root = _root_name(func.value)
        if root in facts.modules or root in facts.imported:
            return func.attr.value
    return None


def _root_name(expr: cst.BaseExpression) -> str:
    """``a`` of ``a.b.c`` (an imported package's module: ``a.b.f()``)."""
    while type(expr) is cst.Attribute:
        expr = expr.value
    return expr.value if type(expr) is cst.Name else ""


def _own_function(node: cst.CSTNode, facts: FileFacts) -> str | None:
    """The name of the function of this file that ``node`` calls (``f()``, ``self.f()``,
    ``module.f()``), never ``backward_dw``; None for any other node."""
    if type(node) is not cst.Call:
        return None
    func = node.func
    if type(func) is cst.Name:
        name = func.value
    elif type(func) is cst.Attribute and type(func.value) is cst.Name:
        name = func.attr.value
    else:
        return None
    return name if name != BACKWARD_DW and name in facts.functions else None


def _does_work(facts: FileFacts, name: str, depth: int) -> bool:
    return _memo(facts._work, name, depth, facts, _unit_does_work)


def _fires(facts: FileFacts, name: str, depth: int) -> bool:
    return _memo(facts._fires, name, depth, facts, _unit_fires)


def _memo(cache: dict[str, bool], name: str, depth: int, facts: FileFacts, ask) -> bool:
    if name in cache:
        return cache[name]
    if depth > HELPER_DEPTH:
        return False
    cache[name] = False  # a recursive helper asks itself no further
    answer = any(ask(unit, facts, depth) for unit in facts.functions.get(name, ()))
    cache[name] = answer
    return answer


def _unit_does_work(unit: Unit, facts: FileFacts, depth: int) -> bool:
    for root in _roots(unit):
        if _direct_work(root, unit.name == BACKWARD_DW) is not None:
            return True
        deeper = lambda f, n, _d: _does_work(f, n, depth + 1)  # noqa: E731
        if _helper_call(root, facts, deeper, facts.run_work):
            return True
    return any(
        type(stmt) is cst.For
        and says_deferred_wgrad(_word(stmt.iter))
        and _writes_main_grad(stmt.body, facts, depth)
        for stmt, _ in unit.statements()
    )


def _unit_writes(unit: Unit, facts: FileFacts, depth: int) -> bool:
    return any(_writes_main_grad(root, facts, depth) for root in _roots(unit))


def _unit_fires(unit: Unit, facts: FileFacts, depth: int) -> bool:
    bound = hook_locals(unit)
    return any(_fires_in(root, bound, facts, depth) for root in _roots(unit))


def is_helper_of_file(unit: Unit, facts: FileFacts) -> bool:
    """``unit`` is called by name elsewhere in this file, or is a top-level function that
    another file of the run imports and that runs delayed work (``RunFacts.wgrad_work``),
    and is no ``backward_dw``: its callers are judged with its work, and may fire the hooks
    after it returns."""
    if unit.name == BACKWARD_DW:
        return False
    if unit.name in facts.called:
        return True
    # Only a function defined at the top level: another file imports it by that name,
    # while a method of the same name belongs to a class of its own.
    return unit.name in facts.run_work and any(
        stmt is unit.owner for stmt in unit.context.module.body
    )


# -- the hooks ------------------------------------------------------------------------
def hook_locals(unit: Unit) -> frozenset[str]:
    """Locals that hold a hook under a name of their own: ``for fn in <hooks>``, ``fn =
    p.<hook>``, ``fn = getattr(p, "<hook>", None)``, ``fn = <hooks>[i]``, ``fn = lambda p:
    p.<hook>(p)`` (calling it fires the hook); ``<hooks>`` also a container the file fills
    with hooks (``for fire in self._pending.values()``, ``hook_containers``)."""
    held = unit.context.shared(hook_containers.file_containers).any
    found = set()
    for stmt, _ in unit.statements():
        if type(stmt) is cst.For and type(stmt.target) is cst.Name:
            if _names_hook(_word(stmt.iter)) or hook_containers.walked_container(stmt.iter) in held:
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
    return _word(value)


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
        helper = _own_function(sub, facts)
        if helper is not None and _fires(facts, helper, depth + 1):
            return True
        if facts.run_fires and _imported_function(sub, facts) in facts.run_fires:
            return True
    return False


def calls_imported_firing(expr: cst.CSTNode, facts: FileFacts) -> bool:
    """``expr`` calls a helper of another file of the run that fires a gradient hook
    (``RunFacts.hook_firing``), by the name it is imported under: for rules that count
    firings their own way (GMLP011)."""
    return bool(facts.run_fires) and any(
        _imported_function(sub, facts) in facts.run_fires for sub in patterns.walk(expr)
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
