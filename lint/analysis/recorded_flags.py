"""GMLP061's facts: a record of each parameter's ``grad_added_to_main_grad`` walked by its
keys, every parameter given one constant (issue #19, class 3: flags without writes).

Code that runs the weight gradients where the producer's bookkeeping cannot (a CUDA-graph
replay) records each parameter's flag when it captures (``record[param] =
param.grad_added_to_main_grad``: True only where the captured backward wrote main_grad) and
puts the recorded values back after each replay. Walking the record by its keys and setting
``True`` flags the parameters whose captured gradient was a real one too: they get a dummy,
and the DDP hook, told the gradient is in main_grad already, never adds it (blind corpus
14's Megatron-LM ``_CudagraphReplayNode.backward``).

A record is a mapping from parameters to flag values: an expression ``R`` (as written) that
the file fills with ``R[k] = <a read of the flag>`` or binds to a dict comprehension whose
values read the flag; or one whose own name says it holds the flag
(``groundtruth_grad_added_to_main_grad``). A loop ``for p in R`` (or ``R.keys()``) whose
body sets ``p.grad_added_to_main_grad = True`` is reported. Setting False for every key is
left alone: resetting every flag is what a new step does (DDP's ``zero_grad``)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import patterns
from .module import ModuleContext

FLAG = patterns.GRAD_ADDED


def records(context: ModuleContext) -> frozenset[str]:
    """The expressions (as written) the file treats as a record of the flag per parameter."""
    code = context.code
    found: set[str] = set()
    for node in _nodes(context):
        kind = type(node)
        if kind is cst.Assign:
            for target in node.targets:
                t = target.target
                if type(t) is cst.Subscript and _reads_flag(node.value):
                    found.add(code(t.value).strip())  # record[param] = param.<flag>
                elif type(node.value) is cst.DictComp and _reads_flag(node.value.value):
                    found.add(code(t).strip())
    return frozenset(found)


def constant_restores(
    context: ModuleContext, known: frozenset[str]
) -> Iterator[tuple[cst.For, cst.BaseExpression, cst.CSTNode]]:
    """(loop, the record, the flag's assignment) for each loop over a record's keys whose
    body sets the loop variable's flag to True."""
    code = context.code
    for loop in _nodes(context):
        if type(loop) is not cst.For or type(loop.target) is not cst.Name:
            continue
        record = _keys_of(loop.iter)
        if record is None:
            continue
        text = code(record).strip()
        named = FLAG in (text.rsplit(".", 1)[-1])
        if text not in known and not named:
            continue
        variable = loop.target.value
        for node in patterns.walk(loop.body):
            found = patterns.attribute_set(node, FLAG)
            if found is None:
                continue
            subject, value = found
            if (
                type(subject) is cst.Name
                and subject.value == variable
                and patterns.is_true_literal(value)
            ):
                yield loop, record, node
                break


def _nodes(context: ModuleContext) -> Iterator[cst.CSTNode]:
    """Every node of the file, each function and class body walked once (``walk`` does not
    enter them)."""
    for unit in context.units:
        for stmt in unit.body:
            yield from patterns.walk(stmt)


def _keys_of(sequence: cst.BaseExpression) -> cst.BaseExpression | None:
    """R for ``R`` and ``R.keys()``; None for other iterables."""
    if type(sequence) is cst.Call and type(sequence.func) is cst.Attribute:
        if sequence.func.attr.value == "keys" and not sequence.args:
            return sequence.func.value
        return None
    if type(sequence) in (cst.Name, cst.Attribute):
        return sequence
    return None


def _reads_flag(value: cst.CSTNode) -> bool:
    return any(
        patterns.is_attr(n, FLAG) or (type(n) is cst.Call and patterns.is_getattr_of(n, FLAG))
        for n in patterns.walk(value)
    )
