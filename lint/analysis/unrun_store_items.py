"""Stored weight-gradient work taken and never run (issue #19, class 6; GMLP038), two shapes
from blind corpus 24: a ``backward_dw`` that takes the item straight off its store's queue
(``dequeued_unrun``: an op-fuser grouped linear), and a weight-gradient store's taking
method that takes a work item off its queue and does nothing with it (``unrun_items``: the
zero-bubble ``WeightGradStore.pop`` binding ``stored_grads = cls.weight_grad_queue[chunk]
.get()`` and never running the ``func(total_input, grad_output, weight.main_grad)`` each
entry holds). The W pass then computes no weight gradient, and nothing says so."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from ..wgrad_words import STORE_PUT_METHODS, names_weight_grad_store, says_deferred_wgrad
from . import patterns, provenance, wgrad
from .class_model import walk_all
from .module import suite_body
from .store_calls import QUEUE_TAKES, TAKE_METHODS

if TYPE_CHECKING:
    from .module import ModuleContext

# What takes an item out of a container (``queue.Queue.get``, ``list.pop``, ``deque.popleft``).
CONTAINER_TAKES = QUEUE_TAKES | {"pop"}


def unrun_items(context: ModuleContext) -> Iterator[tuple[str, str, cst.Assign]]:
    """(the store class, its taking method, the assignment) for each item taken into a local
    that the method never reads again, in a class named for a weight-gradient store that
    also has a method putting work in."""
    for stmt in context.module.body:
        if type(stmt) is not cst.ClassDef or not names_weight_grad_store(stmt.name.value):
            continue
        methods = {m.name.value: m for m in suite_body(stmt.body) if type(m) is cst.FunctionDef}
        if not STORE_PUT_METHODS & set(methods):
            continue
        for name in sorted(TAKE_METHODS & set(methods)):
            for assign in _unread_takes(methods[name]):
                yield stmt.name.value, name, assign


def _unread_takes(method: cst.FunctionDef) -> Iterator[cst.Assign]:
    reads: dict[str, int] = {}
    takes = []
    for node in patterns.walk(method.body):
        if type(node) is cst.Name:
            reads[node.value] = reads.get(node.value, 0) + 1
        if (
            type(node) is cst.Assign
            and len(node.targets) == 1
            and type(node.targets[0].target) is cst.Name
            and type(node.value) is cst.Call
            and type(node.value.func) is cst.Attribute
            and node.value.func.attr.value in CONTAINER_TAKES
        ):
            takes.append(node)
    for assign in takes:
        if reads.get(assign.targets[0].target.value, 0) == 1:  # the target itself only
            yield assign


def dequeued_unrun(method: cst.FunctionDef) -> cst.Call | None:
    """``tensors, _ = self.wgrad_store.context.get()``: the override takes a stored work item
    straight out of the store's queue (an attribute of the store, not the store itself),
    and neither the store's ``pop()``, nor a product, nor a callable unpacked from the item
    (``tensors, gemm = ...get(); gemm(*tensors)``) runs anywhere in it, so the weight
    gradients the item would compute are never computed (blind corpus 24, an op-fuser
    grouped linear). The call that takes the item, or None."""
    taken = None
    unpacked: set[str] = set()
    for node in patterns.walk(method.body):
        if type(node) is cst.Assign and type(node.value) is cst.Call:
            unpacked |= provenance.bound_names(node)
        if type(node) is not cst.Call:
            continue
        if wgrad.has_product(node):
            return None
        func = node.func
        if type(func) is cst.Name and func.value in unpacked:
            return None  # a callable taken from somewhere, run here
        if type(func) is not cst.Attribute:
            continue
        receiver = patterns.last_word(func.value) or ""
        if func.attr.value == "pop" and says_deferred_wgrad(receiver):
            return None
        queue = func.value
        if (
            func.attr.value in QUEUE_TAKES
            and type(queue) is cst.Attribute
            and says_deferred_wgrad(patterns.last_word(queue.value) or "")
        ):
            taken = taken or node
    return taken


# Switches saying the weight gradient may go into main_grad inside the stored work (then the
# pop computes it) or come back as the pop's result to be handed to ``.grad`` (when off).
FUSION_SWITCHES = (
    "fuse_wgrad_accumulation",
    "accumulate_into_main_grad",
    "gradient_accumulation_fusion",
)


def dropped_pop_results(cls: cst.ClassDef, method: cst.FunctionDef) -> cst.CSTNode | None:
    """``wgrad_list, _ = self.wgrad_store.pop()`` in a ``backward_dw`` that never reads what
    it bound (at most ``del``s it), in a class that reads a fusion switch: with the switch
    off the popped work hands its weight gradients back, and they go nowhere (blind corpus
    25, a DeepGEMM grouped linear). The ``del`` that drops them, else the pop."""
    source_words = {n.attr.value for n in walk_all(cls) if type(n) is cst.Attribute}
    if not source_words & set(FUSION_SWITCHES) or _refuses_unfused_delay(cls):
        return None
    if any(
        patterns.is_attr(t.target, "grad")
        for m in suite_body(cls.body)
        if type(m) is cst.FunctionDef and m is not method
        for n in walk_all(m)
        if type(n) is cst.Assign
        for t in n.targets
    ):
        return None  # another method hands `.grad` over (the stored work itself, review 28)
    popped: dict[str, cst.CSTNode] = {}
    for node in patterns.walk(method.body):
        if (
            type(node) is cst.Assign
            and type(node.value) is cst.Call
            and type(node.value.func) is cst.Attribute
            and node.value.func.attr.value == "pop"
            and says_deferred_wgrad(patterns.last_word(node.value.func.value) or "")
        ):
            for name in provenance.bound_names(node) - {"_"}:
                popped.setdefault(name, node)
    if not popped:
        return None
    deleted: dict[str, cst.CSTNode] = {}
    for node in patterns.walk(method.body):
        if type(node) is cst.Del:
            for name in patterns.walk(node.target):
                if type(name) is cst.Name:
                    deleted[name.value] = node
    reads = [
        n.value for n in patterns.walk(method.body) if type(n) is cst.Name and n.value in popped
    ]
    # each popped name appears once where it is bound and once more where it is deleted
    if any(reads.count(name) > 1 + (name in deleted) for name in popped):
        return None
    name = sorted(popped)[0]
    return deleted.get(name, popped[name])


def _refuses_unfused_delay(cls: cst.ClassDef) -> bool:
    """The class raises (or asserts) on a test naming a fusion switch: delay without fusion
    is refused, so what the pop hands back is scratch (review 28)."""
    for node in walk_all(cls):
        raising_if = type(node) is cst.If and any(
            type(s) is cst.SimpleStatementLine and any(type(x) is cst.Raise for x in s.body)
            for s in suite_body(node.body)
        )
        if type(node) is not cst.Assert and not raising_if:
            continue
        text = cst.Module([]).code_for_node(node.test)
        if any(word in text for word in FUSION_SWITCHES):
            return True
    return False
