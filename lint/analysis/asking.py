"""Whether code asks how main_grad is to be written (GMLP016): the words of the overwrite
flag and the sharding strategy in a file, in a function's own code, or in a test, and which arm
of such a test must accumulate. Kept apart from ``producer_overwrites``, which judges the
writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import patterns

if TYPE_CHECKING:
    from .module import ModuleContext, Unit

# Words that show the code asks how main_grad is to be written: the per-parameter flag, or
# the sharding strategy that decides it (Megatron-FSDP overwrites for ZeRO-2/3 only).
ASKING_WORDS = ("overwrite", "sharding", "fsdp", "zero_stage", "optim_grads")


def file_asks(context: ModuleContext) -> bool:
    """Whether the file spells a word of the overwrite-or-accumulate choice anywhere
    (comments too): module-level code asks with it, and a function can ask only if it does,
    so most files need no look at their functions' words."""
    text = context.source.lower()
    return any(word in text for word in ASKING_WORDS)


def asked_at(root, node, unit: Unit) -> bool:
    """The write runs under a test that asks (not on the arm where main_grad must
    accumulate), or its expression chooses on one (``gemm(..., out=mg) if overwrite else
    ...``)."""
    if any(
        asks_in(test, unit) and not accumulating_arm(test, arm, unit)
        for test, arm in node.enclosing_ifs
    ):
        return True
    return any(type(sub) is cst.IfExp and asks_in(sub.test, unit) for sub in patterns.walk(root))


# A test that asks how main_grad is written: the asking words, or whether the buffer is
# sharded (Megatron-FSDP's ``gbuf.is_data_distributed``).
TEST_ASKING_WORDS = (*ASKING_WORDS, "shard", "distributed")


def code_asks(unit: Unit) -> bool:
    """The function's own code (its names, attributes and strings: not its comments, not the
    rest of the file) asks overwrite, FSDP or the sharding strategy."""
    words = []
    stack: list[cst.CSTNode] = [unit.owner]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.Expr and isinstance(node.value, (cst.SimpleString, cst.ConcatenatedString)):
            continue  # a docstring says nothing the code asks
        if kind is cst.Name or kind is cst.SimpleString:
            words.append(node.value)
        elif kind is cst.Attribute:
            words.append(node.attr.value)  # ``w.overwrite_main_grad`` (a walk skips ``attr``)
        elif kind is cst.Arg and node.keyword is not None:
            words.append(node.keyword.value)  # ``overwrite_main_grad=...`` (and ``keyword``)
        stack.extend(patterns.children(node))  # nested functions too
    text = " ".join(words).lower()
    return any(word in text for word in ASKING_WORDS)


def asks_in(node, unit: Unit) -> bool:
    """The test asks, in its own words or through a local it reads whose one binding in
    the function does (``accumulate = fuse and not getattr(w, "overwrite_main_grad",
    False)``, then ``if not accumulate:``: blind corpus 21's Megatron linears)."""
    test = node.test if type(node) is cst.If else node
    text = unit.context.code(test).lower()
    if any(word in text for word in TEST_ASKING_WORDS):
        return True
    for name in patterns.read_names(test):
        value = unit.single_value(name.value)
        if value is not None and any(
            word in unit.context.code(value).lower() for word in TEST_ASKING_WORDS
        ):
            return True
    return False


# The words of a test whose true side is the overwriting one (Megatron-FSDP's parameter,
# overwrite_main_grad): on its other side main_grad accumulates across microbatches.
OVERWRITE_SIDE_WORDS = ("overwrite", "fsdp")


def accumulating_arm(test_owner, arm: str, unit: Unit) -> bool:
    """``arm`` of ``if <test>:`` runs where main_grad must accumulate: the ``else`` of a
    plain test that asks for the overwriting side (``if hasattr(w, "__fsdp_param__"):``,
    ``if w.overwrite_main_grad:``), or the body of its negation; a compound test decides
    nothing here."""
    test = test_owner.test if type(test_owner) is cst.If else test_owner
    negated = False
    while True:
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, negated = test.expression, not negated
        elif type(test) is cst.Name and (value := unit.single_value(test.value)) is not None:
            test = value  # ``accumulate = not w.overwrite_main_grad``: its test, read through
        else:
            break
    if type(test) is cst.BooleanOperation:
        return False
    text = unit.context.code(test).lower()
    if not any(word in text for word in OVERWRITE_SIDE_WORDS):
        return False
    return (arm == "orelse") != negated
