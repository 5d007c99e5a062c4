"""Calls on a store named for weight-gradient work (``WeightGradStore``,
``self.wgrad_store``): those that put work in (a split backward's hand-off), and those that
take it out (the W pass that runs it). One place for GMLP023 / GMLP036's hand-offs,
GMLP030's weights handed to a store, GMLP038's skipped W passes and GMLP065's gated ones."""

from __future__ import annotations

import libcst as cst

from ..wgrad_words import STORE_PUT_METHODS, WEIGHT_GRAD_STORE_WORDS, names_weight_grad_store
from . import patterns

# Taking work out (the W pass), and what a B pass does with it (closes the step's batch of
# it, or queues it).
TAKE_METHODS = frozenset({"pop", "popleft", "flush"})
# Taking an item out of the queue a store keeps its work in (``queue.Queue.get``,
# ``deque.popleft``), as opposed to the store's own ``pop()``, which runs the work.
QUEUE_TAKES = frozenset({"get", "get_nowait", "popleft"})
QUEUE_METHODS = STORE_PUT_METHODS | {"flush"}


def names_a_store(source: str) -> bool:
    """The file spells a store named for weight gradients (a cheap text test)."""
    folded = source.lower().replace("_", "")
    return any(word in folded for word in WEIGHT_GRAD_STORE_WORDS)


def store_method(node: cst.CSTNode) -> str | None:
    """``m`` for a call ``S.m(...)`` on a store named for weight gradients."""
    if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
        return None
    word = patterns.last_word(node.func.value)
    return node.func.attr.value if word is not None and names_weight_grad_store(word) else None


def puts(node: cst.CSTNode) -> bool:
    """``WeightGradStore.put(x, dy, weight, work)``: work handed in, whether or not the
    callable's body can be read (ColossalAI imports it)."""
    return store_method(node) in STORE_PUT_METHODS and bool(node.args)


def takes(node: cst.CSTNode) -> bool:
    return store_method(node) in TAKE_METHODS


def queues(node: cst.CSTNode) -> bool:
    return store_method(node) in QUEUE_METHODS
