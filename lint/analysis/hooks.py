"""Where a parameter's grad-accumulation hook is fired by hand, and what was done to that
parameter on the way there (issue #19, class 5).

Megatron's DDP registers its grad-ready hook on each parameter's AccumulateGrad node. Code
that bypasses autograd (a CUDA-graph replay, a delayed-wgrad or tensor-parallel finalizer)
stores the hook on the parameter (``param._grad_accum_hook``, ``post_wgrad_grad_acc_hook``)
and fires it itself. The hook then does what it does after AccumulateGrad: it adds
``param.grad`` into main_grad unless ``grad_added_to_main_grad`` says the wgrad is there
already. AccumulateGrad always sets ``.grad`` first; a hand-fired hook has nobody doing it,
so the code that fires it must set one of the two itself.

A *firing* is a call of a hook read off a plain name: ``p.<attr>(...)`` or ``h()`` where
``h = getattr(p, "<attr>", ...)`` / ``h = p.<attr>`` reaches the call, with ``<attr>`` a
single stored hook about gradients (it names a hook and a gradient, is not plural, and is
not a maker, registrar or trigger of hooks). Hooks kept in a container whose name is the
plural of such a hook are fired for a known parameter too: ``hooks[p]()`` (or ``h()`` with
``h = hooks[p]``) for the key ``p``, and ``h()`` in ``for p, h in zip(params, hooks)`` for
the parameter ``p`` it is paired with; ``hook_owners`` has the other shapes (a position
in ``enumerate``, ``hooks.get(p)``, ``getattr(p, ...)()``, pairs of a container that names
hooks). A loop over the container alone (``for h in hooks: h()``) says nothing about whose
hook it is and is not a firing here.

*Bookkeeping* for ``p`` is a statement that assigns ``p.grad`` or
``p.grad_added_to_main_grad`` (directly or by ``setattr``), a test
``hasattr(p, "grad_added_to_main_grad")`` (where it is False the parameter has no such
bookkeeping to do), a call that is handed ``p``
itself (a helper may do it; the firing call is not counted), or a ``backward_dw`` call
(the delayed-wgrad protocol sets the flags of the weights it computes).

The bookkeeping before a firing is ``hook_bookkeeping``'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from .. import wgrad_words
from . import (
    exit_callbacks,
    exit_stacks,
    hook_containers,
    hook_owners,
    hook_spellings,
    hook_words,
    patterns,
)
from .cfg import Node
from .hook_words import is_called_hook_list, is_hook_container, is_stored_hook
from .module import Unit

# Calls through which a hook may be fired without a call named after it: ``getattr(p,
# "<hook>")()``, ``map(methodcaller("<hook>"), params)``, ``partial(p.<hook>)()``,
# ``stack.callback(p.<hook>)`` (exit_callbacks).
SPELLING_CALLS = frozenset({"getattr", "map", "partial", exit_stacks.REGISTER})


@dataclass(frozen=True)
class Firing:
    subject: str  # the parameter's local name (the sequence's code, with ``over``)
    call: cst.Call
    node: Node  # the graph node evaluating the call
    # Fired for every element of this sequence (``map(methodcaller("<hook>"), params)``,
    # ``hook_spellings``): its code, "" for a firing of one named parameter.
    over: str = ""
    # A hook handed to ``stack.callback`` (``exit_callbacks``): ``call`` and ``node`` are the
    # registration, and the hook runs at these nodes, where the ``with`` block ends.
    ends: tuple[Node, ...] = ()


# ``fire = p._grad_accum_hook`` / ``fire = getattr(p, "_grad_accum_hook", None)`` /
# ``fire = p._grad_accum_hook if hasattr(p, ...) else None``: a local holding a stored hook,
# fired later under its own name.
_BOUND_HOOK = re.compile(
    r"(\w+)\s*=\s*(?:getattr\(\s*\w+\s*,\s*[\"'](\w+)[\"']|\(?\s*\w+\.(\w+)\s*(?:$|#|;|if\b))"
)


# ``h = hooks[p]`` and ``for p, h in zip(params, hooks)``: a local holding a hook taken from
# a container of hooks; ``hooks[p](...)``: one fired straight from it.
_CONTAINER_LOCAL = re.compile(r"(\w+)\s*=\s*[\w.]*?(\w+hooks)(?:\[|\.get\()")


_ZIPPED_LOCALS = re.compile(r"for\s+\(?\s*(\w+)\s*,\s*(\w+)\s*\)?\s+in\s+(?:zip\(|[\w.]*hook)")


_LISTED_LOCAL = re.compile(r"for\s+(\w+)\s+in\s+[\w.]*?(\w+(?:hooks|callbacks))\b")


_CONTAINER_FIRING = re.compile(r"(\w+hooks)\[[^\]]+\]\s*\(")


def hook_locals(source: str) -> frozenset[str]:
    """Names that some line of ``source`` binds to a stored hook, or to a hook taken from a
    container of them (a text scan of the lines that say hook: it only picks the units
    worth the walk of ``firings``). The empty name stands for a hook fired straight from a
    container (``hooks[p]()``): every unit is then worth the walk."""
    found = set()
    for line in source.splitlines():
        if "callbacks" in line or "hooks" in line:
            # ``for cb in self._grad_ready_callbacks:``: a local bound to each hook of a list
            for match in _LISTED_LOCAL.finditer(line):
                if is_hook_list(match.group(2)):
                    found.add(match.group(1))
        if "hook" in line:
            for match in _BOUND_HOOK.finditer(line):
                if is_stored_hook(match.group(2) or match.group(3)):
                    found.add(match.group(1))
            for match in _CONTAINER_LOCAL.finditer(line):
                if is_hook_container(match.group(2)) or hook_owners.is_param_hook(match.group(2)):
                    found.add(match.group(1))
            for match in _ZIPPED_LOCALS.finditer(line):
                found.update(match.groups())
            if any(
                is_hook_container(m.group(1)) or hook_owners.is_param_hook(m.group(1))
                for m in _CONTAINER_FIRING.finditer(line)
            ):
                found.add("")
    return frozenset(found)


def may_fire(unit: Unit, bound: frozenset[str]) -> bool:
    """The unit calls something named after a hook, ``getattr``, or a local bound to a
    stored hook (any unit, when the file fires a hook straight from a container)."""
    calls = unit.survey.calls
    return (
        "" in bound
        or bool(calls & bound)
        or any("hook" in name or name in SPELLING_CALLS for name in calls)
        or bool(unit.context.shared(hook_containers.file_containers).stored)
    )


def firings(unit: Unit) -> Iterator[Firing]:
    elementwise = list(hook_spellings.mapped_firings(unit))
    claimed = {id(call) for call, _, _ in elementwise} | hook_spellings.mapped_lambda_calls(unit)
    for root, node in unit.expression_roots():
        for sub in patterns.walk(root):
            if type(sub) is not cst.Call or id(sub) in claimed:
                continue
            subject = _fired_subject(unit, sub, node)
            if subject is not None:
                yield Firing(subject, sub, node)
    for call, node, sequence in elementwise:
        code = code_of(sequence)
        yield Firing(code, call, node, over=code)
    for deferred in exit_callbacks.deferred_calls(unit):
        subject = _fired_subject(unit, deferred.call, deferred.node)
        if subject is not None:
            yield Firing(subject, deferred.registration, deferred.node, ends=deferred.ends)


def unbooked(unit: Unit, firing: Firing, blocked: list[Node]) -> bool:
    """Some path reaches the firing passing none of ``blocked`` (bookkeeping nodes); for a
    hook handed to ``stack.callback``, on through the registration to where it runs."""
    return exit_callbacks.reached_avoiding(unit.graph, firing.node, firing.ends, blocked)


def _fired_subject(unit: Unit, call: cst.Call, node: Node) -> str | None:
    handed = hook_owners.handed_parameter(call, unit, node)
    if handed is not None:  # ``self._expert_reduce_hook(p)``: fired for ``p``
        return handed
    func = call.func
    if type(func) is cst.Attribute and type(func.value) is cst.Name:
        attr = func.attr.value
        return func.value.value if is_stored_hook(attr) or is_called_hook_list(attr) else None
    if type(func) in (cst.Subscript, cst.Call):
        # ``hooks[p]()`` / ``hooks[i]()``; ``getattr(p, "<hook>")()`` / ``hooks.get(p)()``
        return hook_owners.hook_owner(func, unit, node)
    if type(func) is not cst.Name:
        return None
    defs = unit.reaching.reaching(func.value, node)
    handed = _param_handed_to_listed_hook(call, defs)
    if handed is not None:
        return handed
    subjects = {
        hook_owners.paired_owner(d, unit)
        if d.kind == "for"
        else hook_owners.hook_owner(d.value, unit, d.node)
        for d in defs
    }
    if len(subjects) == 1 and None not in subjects:
        return subjects.pop()
    return None


def is_hook_list(word: str) -> bool:
    """A list of grad-ready hooks or callbacks (``_grad_ready_callbacks``,
    ``_post_accumulate_hooks``): plural, about gradients, not makers or registrars."""
    lowered = word.lower()
    return (
        lowered.endswith(("hooks", "callbacks"))
        and ("grad" in lowered or "accum" in lowered)
        and not any(w in lowered for w in hook_words.NOT_A_STORED_HOOK)
    )


def _param_handed_to_listed_hook(call: cst.Call, defs) -> str | None:
    """``p`` for ``cb(p)`` with ``cb`` each hook of a list of grad hooks or callbacks (``for
    cb in self._grad_ready_callbacks``, ``for h in self._post_accumulate_hooks[p]``): a
    hook handed its parameter is that parameter's hook."""
    args = patterns.positional_args(call)
    if len(args) != 1 or type(args[0].value) is not cst.Name or len(call.args) != 1 or not defs:
        return None
    for d in defs:
        if d.kind != "for" or d.value is None:
            return None
        container = d.value.value if type(d.value) is cst.Subscript else d.value
        if not is_hook_list(hook_words.last_word(container, lower=False)):
            return None
    return args[0].value.value


def code_of(expr: cst.CSTNode) -> str:
    """``expr`` as source text (how two loops' sequences are compared)."""
    return cst.Module(body=[]).code_for_node(expr)


# -- the converse: delayed weight-gradient work that notifies nobody ---------------------
# Words of a callee that registers or builds hooks rather than firing them.
NOT_A_FIRING = wgrad_words.NOT_A_FIRING


# Receivers whose ``.pop()`` hands out the deferred weight-gradient work (TE's wgrad_store).
WGRAD_WORDS = ("wgrad",)


REPLAY = "replay"


# Set on a weight whose delayed wgrad is announced by backward_dw, not by autograd.
SKIP_POST_HOOK = "skip_backward_post_hook"


def skips_backward_post_hook(methods: list[cst.FunctionDef]) -> bool:
    """Some method of a class marks weights ``skip_backward_post_hook`` (not to False)."""
    return any(
        isinstance(sub, cst.Assign)
        and not patterns.is_false_literal(sub.value)
        and any(patterns.is_attr(t.target, SKIP_POST_HOOK) for t in sub.targets)
        for method in methods
        for sub in patterns.walk(method.body)
    )


def fires_hooks(expr: cst.CSTNode) -> bool:
    """``expr`` calls a hook, or a method that fires hooks (``hook()``,
    ``self._trigger_wgrad_accumulation_and_reduce_hooks()``), not one that registers one."""
    for sub in patterns.walk(expr):
        name = (patterns.callee_name(sub) or "").lower()
        if "hook" in name and not any(word in name for word in NOT_A_FIRING):
            return True
    return False


def runs_delayed_wgrad(expr: cst.CSTNode) -> cst.Call | None:
    """The call in ``expr`` that runs deferred weight-gradient work itself: ``<store>.pop()``
    on a receiver whose name says wgrad, or ``<graph>.replay()`` of a captured graph."""
    # ``store.pop()()`` runs a stored callable (a layer's own backward_dw, which announces
    # itself), not the store's raw work.
    called = {id(s.func) for s in patterns.walk(expr) if type(s) is cst.Call}
    for sub in patterns.walk(expr):
        if type(sub) is not cst.Call or type(sub.func) is not cst.Attribute:
            continue
        if id(sub) in called:
            continue
        method, receiver = sub.func.attr.value, sub.func.value
        if method == REPLAY and not sub.args:
            return sub
        if method == "pop" and any(word in hook_words.last_word(receiver) for word in WGRAD_WORDS):
            return sub
    return None


def is_list_firing(firing: Firing) -> bool:
    """A tensor's own list of post hooks called as one (``self._backward_post_hooks(g)``)."""
    func = firing.call.func
    return (
        type(func) is cst.Attribute
        and is_called_hook_list(func.attr.value)
        and not is_stored_hook(func.attr.value)
    )
