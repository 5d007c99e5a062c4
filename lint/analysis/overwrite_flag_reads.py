"""``overwrite_main_grad`` read from the wrong object (GMLP007): from another weight than the
one whose main_grad a GEMM call or kwargs dict writes (``out=``), directly or through the
locals its arguments read; from a stand-in for that weight; from ``w`` where the function
names the Parameter ``origin_w``; from a quantized or gathered copy of the weight. Found
here; the rule's module (lint/rules/main_grad_flag_from_other_weight.py) words and reports
them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from . import module_provenance, patterns, provenance, stand_ins, wgrad, writing_helpers

if TYPE_CHECKING:
    from .module import Unit
    from .provenance import Provenance

# How many locals deep an argument is followed (``flag = getattr(...)``, ``acc = not flag``).
LOCAL_DEPTH = 2


@dataclass(frozen=True)
class ArgumentRead:
    """A read of ``owner.overwrite_main_grad`` deciding how ``subject.main_grad`` is
    written: ``stand_in`` when ``owner`` stands in for ``subject`` (else it is another
    weight), ``direct`` when the read is in the call's own arguments (not in a local that
    may feed other calls too)."""

    owner: cst.BaseExpression
    subject: cst.BaseExpression
    stand_in: bool
    direct: bool


@dataclass(frozen=True)
class _Flow:
    """Where a call's arguments are read: the unit, the graph node of their statement (None
    outside the graph), and the reads already reported in that unit (a read reached from
    two calls is reported once)."""

    unit: object
    node: object
    seen: set[int]


def argument_reads(unit: Unit) -> Iterator[ArgumentRead]:
    """The wrong reads of the calls and dict literals of ``unit``'s statements, each read
    once however many calls it feeds."""
    seen: set[int] = set()
    writers = unit.context.shared(writing_helpers.WritingHelpers)
    # a unit calling none of the file's writing helpers hands none of them a weight
    through_helpers = calls_a_writer(unit)
    for stmt, _ in unit.statements():
        if not isinstance(stmt, cst.BaseCompoundStatement):
            flow = _Flow(unit, unit.node_for(stmt), seen)
            for sub in patterns.walk(stmt):
                if isinstance(sub, (cst.Call, cst.Dict)):
                    yield from _arguments(sub, module_provenance.of_unit(unit), flow)
                if through_helpers and type(sub) is cst.Call:
                    yield from _helper_arguments(sub, writers, unit, flow)


def calls_a_writer(unit: Unit) -> bool:
    """``unit`` calls a helper of the file that writes main_grad of a weight it is handed."""
    writers = unit.context.shared(writing_helpers.WritingHelpers)
    return writers.calls_any(unit.survey.calls)


def _helper_arguments(call: cst.Call, writers, unit: Unit, flow) -> Iterator[ArgumentRead]:
    """A call of a helper of the file that writes the main_grad of one weight it is handed
    (``_accumulate(x, dy, p, over)``: the GEMM moved into a helper), whose other arguments
    read ``overwrite_main_grad`` from another weight."""
    written = writers.written_arguments(call)
    if len(written) != 1 or wgrad.stem(written[0]) is None:
        return
    subject = written[0]
    others = [(None, arg.value) for arg in call.args if arg.value is not subject]
    objects = module_provenance.of_unit(unit)
    yield from _reads_beside(subject, wgrad.stem(subject), others, objects, flow)


def _arguments(node, objects: Provenance, flow=None) -> Iterator[ArgumentRead]:
    """A call or dict literal whose ``out`` is one weight's main_grad, and whose other
    arguments read ``overwrite_main_grad`` from another weight, directly or through locals
    bound to such a read (``flow``: the unit, the graph node of the statement and the reads
    reported already, so a local feeding several calls is reported once)."""
    pairs = patterns.argument_pairs(node)
    targets = [value for key, value in pairs if key == "out"]
    if len(targets) != 1:
        return
    owners = wgrad.main_grad_owners(targets[0]) or _bound_owners(targets[0], flow)
    words = {wgrad.stem(owner) for owner in owners}
    if len(words) != 1 or None in words:
        return
    (word,) = words
    others = [(key, value) for key, value in pairs if key != "out"]
    yield from _reads_beside(owners[0], word, others, objects, flow)


def _reads_beside(subject, word: str, pairs, objects: Provenance, flow) -> Iterator[ArgumentRead]:
    """The reads of ``overwrite_main_grad`` from another object than ``subject`` (whose
    main_grad is written; ``word`` its stem) in the arguments ``pairs`` beside it."""
    for _key, value in pairs:
        for sub, direct in _through_locals(value, flow):
            other = _overwrite_owner(sub)
            if other is None or (flow is not None and id(other) in flow.seen):
                continue  # a local's read feeding several calls is reported once
            if wgrad.stem(other) not in (word, None):
                stand_in = False
            elif objects.differ(subject, other):
                stand_in = True
            else:
                continue
            if flow is not None:
                flow.seen.add(id(other))
            yield ArgumentRead(other, subject, stand_in, direct)


def _bound_owners(target, flow) -> list:
    """X for ``out=mg`` where every binding of the local ``mg`` reaching the call is
    ``X.main_grad`` (``mg = param.main_grad``); [] otherwise."""
    if flow is None or flow.node is None or type(target) is not cst.Name:
        return []
    defs = flow.unit.reaching.reaching(target.value, flow.node)
    if not defs or any(d.kind != "assign" or d.value is None for d in defs):
        return []
    owners = [wgrad.main_grad_owners(d.value) for d in defs]
    if not all(len(found) == 1 and _is_buffer(d.value) for found, d in zip(owners, defs)):
        return []  # only the buffer itself, not an expression computed from it
    return [found[0] for found in owners]


def _is_buffer(value) -> bool:
    """``X.main_grad`` or ``getattr(X, "main_grad"[, default])`` itself."""
    return patterns.is_attr(value, patterns.MAIN_GRAD) or (
        type(value) is cst.Call and patterns.is_getattr_of(value, patterns.MAIN_GRAD)
    )


def _through_locals(value, flow):
    """(node, direct) for the nodes of ``value`` (direct) and of the values every binding of
    a local read in it that reaches the statement was assigned (an assignment or a walrus,
    ``if (o := getattr(w, "overwrite_main_grad", False)):``), ``LOCAL_DEPTH`` locals deep."""
    yield from ((sub, True) for sub in patterns.walk(value))
    if flow is None or flow.node is None:
        return
    unit, node = flow.unit, flow.node
    visited: set[int] = set()
    names = [(n, node) for n in patterns.walk(value) if type(n) is cst.Name]
    for _ in range(LOCAL_DEPTH):
        found = []
        for name, at in names:
            for d in unit.reaching.reaching(name.value, at):
                if d.kind not in ("assign", "walrus") or d.value is None or id(d) in visited:
                    continue
                visited.add(id(d))
                for sub in patterns.walk(d.value):
                    yield sub, False
                    if type(sub) is cst.Name:
                        found.append((sub, d.node))
        names = found


def twin_reads(
    unit: Unit, objects: Provenance
) -> Iterator[tuple[cst.BaseExpression, str, cst.Name]]:
    """(owner, twin, name) for ``overwrite_main_grad`` read from ``name`` (or ``name[i]``,
    the owner) where the function also names the Parameter as ``twin``, ``origin_<name>``:
    the code keeps the two apart because ``name`` is the restored or quantized stand-in,
    which does not carry the Parameter's flag."""
    for root, _ in unit.expression_roots():
        for sub in patterns.walk(root):
            owner = _overwrite_owner(sub)
            base = owner.value if isinstance(owner, cst.Subscript) else owner
            if not isinstance(base, cst.Name) or provenance.is_origin_name(base.value):
                continue
            twin = next(
                (
                    p + base.value
                    for p in provenance.ORIGIN_PREFIXES
                    if p + base.value in objects.names
                ),
                None,
            )
            if twin is not None and not _copied_from(unit, twin, base.value):
                yield owner, twin, base


def copy_reads(unit: Unit, objects: Provenance) -> Iterator[cst.BaseExpression]:
    """The owners of ``overwrite_main_grad`` reads from a quantized or gathered copy of the
    weight (by its producer, a helper of the module, a ``ctx`` attribute or its spelling),
    anywhere: the copy never carries the flag, so the read answers its default. Also from a
    name that is a quantized copy on some path only (``wm = weight; if fp8: wm =
    quantize(weight)``): the flag belongs to the Parameter whatever the path, and on the FP8
    path the read answers the default (``stand_ins.quantized_on_some_path``, which leaves
    gathered copies alone). A name rebound to a copy made from itself by a chain of its own
    (``w = w.detach()``, ``w = Parameter(w)``) is GMLP015's."""
    for root, node in unit.expression_roots():
        for sub in patterns.walk(root):
            owner = _overwrite_owner(sub)
            if owner is None:
                continue
            base = owner.value if isinstance(owner, cst.Subscript) else owner
            if stand_ins.surely_stand_in(objects, unit, base, node) in provenance.COPIES:
                if isinstance(base, cst.Name) and stand_ins.rebound_to_itself(
                    unit, base.value, node
                ):
                    continue
            elif _cast_of_another(unit, base, node):
                pass  # a cast copy on the runs whose dtype differs (blind corpus 26)
            elif not stand_ins.quantized_on_some_path(objects, unit, base, node) or (
                isinstance(base, cst.Name) and _rebound_by_own_chain(unit, base.value, node)
            ):
                continue
            yield owner


# Casts that hand back the tensor itself when nothing changes and a new tensor, without the
# Parameter's attributes, when the dtype (or device) does: ``w.to(accum_dtype)``,
# ``w.float()``, Transformer Engine's ``cast_if_needed(w, dtype)``.
CAST_METHODS = frozenset({"to", "float", "half", "bfloat16", "type"})
CAST_FUNCTIONS = frozenset({"cast_if_needed"})


def _cast_of_another(unit, base: cst.CSTNode, node) -> bool:
    """``base`` is a local every binding of which, reaching ``node``, casts another name
    (``weight_c = weight.to(accum_dtype)``): where the dtype differs it is a copy, and the
    flag read from it answers its default. A name cast into itself (``w = w.float()``) is
    GMLP015's rebinding."""
    if type(base) is not cst.Name:
        return False
    defs = unit.reaching.reaching(base.value, node)
    if not defs or not all(_casts_other(d.value, base.value) for d in defs):
        return False
    # the function copies the flag onto the cast (``w32.overwrite_main_grad = ...``): the
    # read answers the Parameter's setting (review 29)
    return not any(
        (found := patterns.attribute_set(stmt, patterns.OVERWRITE)) is not None
        and type(found[0]) is cst.Name
        and found[0].value == base.value
        for stmt, _ in unit.statements()
    )


def _casts_other(value, name: str) -> bool:
    if type(value) is not cst.Call:
        return False
    func = value.func
    if type(func) is cst.Attribute and func.attr.value in CAST_METHODS:
        source = func.value
    elif type(func) is cst.Name and func.value in CAST_FUNCTIONS and value.args:
        source = value.args[0].value
    else:
        return False
    return type(source) in (cst.Name, cst.Attribute) and patterns.last_word(source) != name


def _rebound_by_own_chain(unit, name: str, node) -> bool:
    """A binding of ``name`` reaching ``node`` is a chain on ``name`` itself or wraps it in
    ``Parameter(...)`` (``w = w.to(torch.float8_e4m3fn)``): GMLP015 reports the rebinding."""
    for d in unit.reaching.reaching(name, node):
        value = d.value
        if type(value) is cst.Call and patterns.callee_name(value) == "Parameter":
            return True
        while isinstance(value, (cst.Call, cst.Attribute, cst.Subscript)):
            value = value.func if type(value) is cst.Call else value.value
        if type(value) is cst.Name and value.value == name and d.value is not value:
            return True
    return False


def _copied_from(unit, twin: str, name: str) -> bool:
    """``twin = name`` somewhere in the function: ``name`` is the Parameter itself until it
    is rebound (Transformer Engine's forward keeps ``origin_weight = weight`` before it
    quantizes), so reading from ``name`` may be reading from the Parameter."""
    return any(
        d.name == twin and isinstance(d.value, cst.Name) and d.value.value == name
        for d in unit.graph.defs
    )


def _overwrite_owner(node) -> cst.BaseExpression | None:
    if patterns.is_attr(node, patterns.OVERWRITE):
        return node.value
    if patterns.is_getattr_of(node, patterns.OVERWRITE):
        return patterns.getattr_owner(node, patterns.OVERWRITE)
    return None
