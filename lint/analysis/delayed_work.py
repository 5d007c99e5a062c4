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

The module holds the first question; the second is ``hook_firing``'s, and what both read
about the file's functions, by the names calls spell, is ``helper_facts``'.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from ..wgrad_words import names_protocol_callables, says_deferred_wgrad
from . import patterns
from .cfg import Node
from .helper_facts import (
    BACKWARD_DW,
    FileFacts,
    flat_roots,
    imported_function,
    last_name,
    memo,
    own_function,
)

# Re-exported: the rules and skipped_hooks name them ``delayed_work.X``.
from .helper_facts import file_facts as file_facts
from .hook_firing import calls_imported_firing as calls_imported_firing
from .hook_firing import fires_hook as fires_hook
from .hook_firing import hook_locals as hook_locals
from .hook_firing import notifying_nodes as notifying_nodes
from .module import Unit

# Taking one piece of queued work out of a store.
TAKE_METHODS = frozenset({"pop", "popleft"})
REPLAY = "replay"


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
        if _loops_over_store(unit, stmt):
            node = unit.node_for(stmt)
            if node is not None and _writes_main_grad(stmt.body, facts):
                found.append((stmt.iter, node))
    return found


# Displays that build a sequence on the spot: a local bound only to one of them is this
# call's own list (``wgrad_args = [(dy, x, w1), ...]``), run now, not a store of work
# deferred from an earlier call (blind corpus 26: the undelayed branch of a backward). A
# comprehension may copy a store (``[i for i in self.wgrad_store.drain()]``): not one.
_DISPLAYS = (cst.List, cst.Tuple)


def _loops_over_store(unit: Unit, stmt: cst.CSTNode) -> bool:
    """``stmt`` is a ``for`` over something named for deferred weight gradients that is no
    local built here as a list, tuple or comprehension."""
    if type(stmt) is not cst.For or not says_deferred_wgrad(last_name(stmt.iter)):
        return False
    if type(stmt.iter) is not cst.Name:
        return True
    node = unit.node_for(stmt)
    defs = unit.reaching.reaching(stmt.iter.value, node) if node is not None else ()
    return not defs or not all(d.kind == "assign" and _own_display(d.value) for d in defs)


def _own_display(value) -> bool:
    """A list or tuple written out element by element, none unpacked (``[*store]`` copies a
    store) and none naming a store of deferred work (review 29)."""
    if type(value) not in _DISPLAYS:
        return False
    for element in value.elements:
        if type(element) is cst.StarredElement:
            return False
        for sub in patterns.walk(element.value):
            if type(sub) in (cst.Name, cst.Attribute) and says_deferred_wgrad(last_name(sub)):
                return False
    return True


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
            if in_backward_dw or says_deferred_wgrad(last_name(receiver)):
                return sub
        elif method in TAKE_METHODS:
            store = last_name(receiver)
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
        helper = own_function(sub, facts)
        if helper is not None and memo(facts._writes, helper, depth + 1, facts, _unit_writes):
            return True
    return False


def _helper_call(
    expr: cst.CSTNode, facts: FileFacts, question, of_run: frozenset[str]
) -> cst.Call | None:
    """The call in ``expr`` of a function of this file for which ``question`` holds, or of
    one of ``of_run`` imported from another file."""
    for sub in patterns.walk(expr):
        name = own_function(sub, facts)
        if name is not None and question(facts, name, 1):
            return sub
        if of_run and imported_function(sub, facts) in of_run:
            return sub
    return None


def _does_work(facts: FileFacts, name: str, depth: int) -> bool:
    return memo(facts._work, name, depth, facts, _unit_does_work)


def _unit_does_work(unit: Unit, facts: FileFacts, depth: int) -> bool:
    for root in flat_roots(unit):
        if _direct_work(root, unit.name == BACKWARD_DW) is not None:
            return True
        deeper = lambda f, n, _d: _does_work(f, n, depth + 1)  # noqa: E731
        if _helper_call(root, facts, deeper, facts.run_work):
            return True
    return any(
        _loops_over_store(unit, stmt) and _writes_main_grad(stmt.body, facts, depth)
        for stmt, _ in unit.statements()
    )


def _unit_writes(unit: Unit, facts: FileFacts, depth: int) -> bool:
    return any(_writes_main_grad(root, facts, depth) for root in flat_roots(unit))


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


def working_functions(context) -> Iterator[tuple[Unit, FileFacts, list]]:
    """(function, the file's facts, its work as ``work_calls`` lists it) for each function
    of the file that runs delayed wgrad work itself or through a helper of the file (GMLP019
    and GMLP056 judge these). What the function does decides, not its name; a helper called
    from elsewhere in the file is left to its callers, which then do its work."""
    helpers = context.wgrad_work_helpers
    if not may_defer(context.source) and not any(n in context.source for n in helpers):
        return
    facts = context.shared(file_facts)
    for unit in context.units:
        if type(unit.owner) is not cst.FunctionDef:
            continue
        if is_helper_of_file(unit, facts) or not may_work(unit, facts):
            continue
        work = work_calls(unit, facts)
        if work:
            yield unit, facts, work


def may_defer(source: str) -> bool:
    """The text spells some delayed work ``delayed_work`` can find (a superset: a store or
    graph named for deferred wgrads taken from, replayed or looped over, or any replay in a
    file with a ``backward_dw``). A helper's work needs direct work somewhere in the file,
    so a file without any is not walked: most files with main_grad have none. Found with
    ``str.find`` and a line-anchored pattern (a case-blind pattern of the words over the
    whole text took about 4 ms per file)."""
    if ".replay()" in source and BACKWARD_DW in source:
        return True
    for method in _TAKES:
        at = source.find(method)
        while at >= 0:
            start = at
            while start and (source[start - 1].isalnum() or source[start - 1] in "_[]"):
                start -= 1
            if _says_later(source[start:at]):
                return True
            at = source.find(method, at + len(method))
    return any(_says_later(match.group(1)) for match in _LOOP.finditer(source))


_TAKES = (".pop(", ".popleft(", ".replay(")
_LOOP = re.compile(r"^[ \t]*for[ \t][^\n]*?[ \t]in[ \t]+([\w.\[\]]+)[ \t]*:", re.MULTILINE)
_WORDS = ("wgrad", "dw", "deferred", "delayed", "pending", "queued")


def _says_later(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in _WORDS)
