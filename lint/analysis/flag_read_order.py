"""GMLP060's facts: a function that sets ``grad_added_to_main_grad`` only after calling a
function of the file that reads it (issue #19, classes 3 and 5).

Code that finishes the weight gradients outside the producer (a CUDA-graph replay, a
deferred ``backward_dw``) sets or restores the flag itself, and then asks a helper which
gradients to hand back as dummies; the helper decides from the flag. Called before the flag
is set, the helper sees the value a hook left (DDP resets it to False after each
accumulation) and hands back real gradients, which the hooks add into main_grad a second
time (blind corpus 14: Megatron-LM's ``_CudagraphReplayNode.backward`` collecting
``get_input_grads_with_dummy_flags()`` before restoring the recorded flags).

Facts, by name within the file: a *reader* is a function or method of the file, the only one
of its name, whose own body reads the flag (``p.grad_added_to_main_grad`` as a value,
``getattr(p, "grad_added_to_main_grad", ...)``); a *late set* is a statement of the caller,
after the call in the same block or in a block around it, that sets the flag to anything but
``False`` (``X.grad_added_to_main_grad = v`` or ``setattr``, also inside a loop statement).
Resetting the flag to False after reading it is what hooks do, and is left alone; so is a
function that also sets the flag before the call (the helper then sees that value)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from . import file_functions, patterns
from .module import ModuleContext, Unit

FLAG = patterns.GRAD_ADDED
COMPOUND = (cst.If, cst.For, cst.While, cst.With, cst.Try)
EXITS = (cst.Return, cst.Raise, cst.Continue, cst.Break)


# A reader is called by name whatever the receiver, so its name must say what it is about:
# ``wait()`` of an unrelated handle must not stand for a bucket's ``wait`` that reads the flag.
READER_WORDS = ("grad", "dummy", "dummies", "flag", "main_grad")


def readers(context: ModuleContext) -> dict[str, int]:
    """Name -> line of the first read, for the functions of the file that read the flag, are
    the only function of their name, and are named for gradients, dummies or flags."""
    found: dict[str, int] = {}
    for name, defs in file_functions.by_name(context).items():
        if len(defs) != 1 or not any(word in name.lower() for word in READER_WORDS):
            continue
        read = _first_read(defs[0])
        if read is not None:
            found[name] = context.line_of(read)
    return found


def late_sets(unit: Unit, reading: dict[str, int]) -> Iterator[tuple[cst.Call, str, cst.CSTNode]]:
    """(the call of a reader, its name, the later assignment restoring the flag) in
    ``unit``, when no statement of the unit sets the flag before the call."""
    body = getattr(unit.owner, "body", None)
    if not isinstance(body, cst.IndentedBlock):
        return
    sets = [
        node
        for node in file_functions.own_nodes(body.body)
        if patterns.attribute_set(node, FLAG) is not None
    ]
    first_set = min(sets, key=unit.context.line_of) if sets else None
    for stmts, enclosing in _blocks_with_rest(body.body, ()):
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, (*COMPOUND, cst.FunctionDef, cst.ClassDef, *EXITS)):
                continue  # a call in ``return`` leaves before any later set
            for call in _reader_calls(stmt, reading):
                later = _later_restore(stmts[i + 1 :], enclosing)
                if later is not None and not _before(first_set, stmt, unit):
                    yield call, patterns.callee_name(call), later


def _later_restore(following: Sequence[cst.CSTNode], enclosing: tuple) -> cst.CSTNode | None:
    """The first flag restore the run reaches after the call: in the statements that follow
    it in its block, up to one that leaves the block (``return``, ``raise``, ``continue``,
    ``break``: the restore after it is on another path), then after the block."""
    for stmt in following:
        if isinstance(stmt, EXITS):
            return None
        found = _restore_in(stmt)
        if found is not None:
            return found
    for stmt in enclosing:
        found = _restore_in(stmt)
        if found is not None:
            return found
    return None


def _before(first_set, stmt, unit: Unit) -> bool:
    """Whether the function sets the flag (to any value) at or before ``stmt``."""
    if first_set is None:
        return False
    line = unit.context.line_of
    return line(first_set) <= line(stmt)


def _first_read(function: cst.FunctionDef):
    stored = set()  # every node of a store or ``del`` target: ``a.flag, b = ...`` writes
    for node in file_functions.own_nodes(function.body.body):
        if type(node) is cst.Assign:
            targets = [t.target for t in node.targets]
        elif type(node) in (cst.AugAssign, cst.AnnAssign, cst.Del):
            targets = [node.target]
        else:
            continue
        stored.update(id(sub) for target in targets for sub in patterns.walk(target))
    for node in file_functions.own_nodes(function.body.body):
        if patterns.is_attr(node, FLAG) and id(node) not in stored:
            return node
        if type(node) is cst.Call and patterns.is_getattr_of(node, FLAG):
            return node
    return None


def _reader_calls(stmt: cst.CSTNode, reading: dict[str, int]) -> Iterator[cst.Call]:
    for node in patterns.walk(stmt):
        func = getattr(node, "func", None)
        if type(node) is cst.Call and type(func) is cst.Attribute and func.attr.value in reading:
            yield node


def _restore_in(stmt: cst.CSTNode) -> cst.CSTNode | None:
    """The first node of ``stmt`` that restores the flag: sets it to a value read from
    somewhere (a recorded value, ``added``), not a constant. A constant set after asking is
    how a producer marks what it has just written (``if not self.already_added(p): ...
    p.grad_added_to_main_grad = True``)."""
    for node in patterns.walk(stmt):
        found = patterns.attribute_set(node, FLAG)
        if found is None:
            continue
        value = found[1]
        if not (patterns.is_true_literal(value) or patterns.is_false_literal(value)):
            return node
    return None


def _blocks_with_rest(
    stmts: Sequence[cst.CSTNode], rest: tuple
) -> Iterator[tuple[Sequence[cst.CSTNode], tuple]]:
    """Each statement list of a body (not entering nested functions or classes), with the
    statements that follow the compound statement holding it, innermost first."""
    flat = [s for line in stmts for s in _small(line)]
    yield flat, rest
    for i, stmt in enumerate(stmts):
        if not isinstance(stmt, COMPOUND):
            continue
        after = (*stmts[i + 1 :], *rest)
        for block in _child_blocks(stmt):
            yield from _blocks_with_rest(block, after)


def _small(stmt: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """The small statements of a simple statement line; a compound statement as itself."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return stmt.body
    return (stmt,)


def _child_blocks(stmt: cst.CSTNode) -> Iterator[Sequence[cst.CSTNode]]:
    for child in stmt.children:
        if isinstance(child, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            yield child.body
        elif isinstance(child, (cst.Else, cst.If, cst.Finally, cst.ExceptHandler)):
            yield from _child_blocks(child)  # an ``elif`` is an If in its parent's orelse
