"""What crosses autograd's saved-tensor boundary: main_grad buffers put into
``ctx.save_for_backward`` / ``prepare_for_saving`` in forward and the names backward unpacks
them into (issue #19, class 1: which object).

A tensor given to ``save_for_backward`` comes back through ``ctx.saved_tensors`` as a
stand-in, not as the buffer: autograd checks it against in-place changes made between
forward and backward (another microbatch's accumulation into main_grad fails that check),
saved-tensor hooks (activation offloading, swapping) hand back a copy, and a position saved
under one condition (``w.main_grad if cpu_offloading else None``) is ``None`` under the
other. Code that needs main_grad in backward keeps it on ``ctx`` as a plain attribute, or
keeps the Parameter (or a weakref of it) and reads main_grad from that.

A restored name holds main_grad when it is named for it (``main_grad``,
``fc1_weight_main_grad``; switch names such as ``accumulate_into_main_grad`` excluded), or
when it sits at the position where a save call of the file put a main_grad expression (an
``X.main_grad`` attribute, a conditional with one as an arm, or a local bound to one), the
unpacking and the save having the same number of plain items. "Restored" means bound by
unpacking or indexing ``ctx.saved_tensors``, a local bound to it, or the result of a
``restore_from_saved`` call.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from . import patterns
from .module import ModuleContext, Unit

SAVE_CALLS = frozenset({"save_for_backward", "prepare_for_saving"})
RESTORE_CALLS = ("restore_from_saved", "restore_from_func_ctx")
SAVED_ATTR = "saved_tensors"


def named_for_main_grad(name: str) -> bool:
    return patterns.holds_main_grad_by_name(name)


@dataclass(frozen=True)
class SavedLayouts:
    """For each save call of the file: its number of plain items (None when a starred item
    makes positions unknowable) and the positions holding a main_grad expression."""

    layouts: tuple[tuple[int | None, frozenset[int]], ...]

    def main_grad_positions(self, count: int | None) -> frozenset[int]:
        """Positions holding main_grad in the save calls an unpacking of ``count`` items
        matches (``count`` None: an index, which matches every save call)."""
        found: set[int] = set()
        for size, positions in self.layouts:
            if count is None or size == count:
                found |= positions
        return frozenset(found)


def saved_layouts(context: ModuleContext) -> SavedLayouts:
    """For ``context.shared``: the file's save calls, as ``SavedLayouts``."""
    layouts = []
    if patterns.MAIN_GRAD in context.source:
        for unit in context.units:
            if not unit.survey.calls & SAVE_CALLS:
                continue
            bound = _main_grad_locals(unit)
            for root, _ in unit.expression_roots():
                for node in patterns.walk(root):
                    if type(node) is cst.Call and patterns.callee_name(node) in SAVE_CALLS:
                        layouts.append(_layout(node, bound))
    return SavedLayouts(tuple(layouts))


def _layout(call: cst.Call, bound: frozenset[str]) -> tuple[int | None, frozenset[int]]:
    args = [a for a in call.args if a.keyword is None]
    plain = next((i for i, a in enumerate(args) if a.star), len(args))
    positions = frozenset(i for i, a in enumerate(args[:plain]) if holds_main_grad(a.value, bound))
    return (len(args) if plain == len(args) else None), positions


def _main_grad_locals(unit: Unit) -> frozenset[str]:
    """Locals of the unit assigned a main_grad expression somewhere (forward's
    ``wbuf = weight.main_grad if fuse else None``)."""
    return frozenset(
        d.name
        for d in unit.graph.defs
        if d.kind == "assign" and d.value is not None and holds_main_grad(d.value, frozenset())
    )


def holds_main_grad(expr: cst.CSTNode, bound: frozenset[str]) -> bool:
    """``X.main_grad``, a main_grad fetch, a local named for or bound to it, or a
    conditional with one of those as an arm."""
    if isinstance(expr, cst.IfExp):
        return holds_main_grad(expr.body, bound) or holds_main_grad(expr.orelse, bound)
    if isinstance(expr, cst.Name):
        return expr.value in bound or named_for_main_grad(expr.value)
    return patterns.is_main_grad_direct(expr)


def is_restored(value: cst.CSTNode, unit: Unit, node, depth: int = 0) -> bool:
    """``value`` comes from autograd's saved tensors: ``ctx.saved_tensors`` (or an index or
    slice of it), a ``restore_from_saved`` call, or a local every reaching binding of which
    is one of those (``saved_tensors = ctx.saved_tensors`` first, unpacked later)."""
    if isinstance(value, cst.Subscript):
        return is_restored(value.value, unit, node, depth)
    if isinstance(value, cst.Attribute):
        return value.attr.value == SAVED_ATTR
    if isinstance(value, cst.Call):
        return (patterns.callee_name(value) or "").lstrip("_").startswith(RESTORE_CALLS)
    if isinstance(value, cst.Name) and depth < 4:
        defs = unit.reaching.reaching(value.value, node)
        return bool(defs) and all(
            d.kind == "assign"
            and d.value is not None
            and is_restored(d.value, unit, d.node, depth + 1)
            for d in defs
        )
    return False


@dataclass(frozen=True)
class Restored:
    """A local bound to a main_grad buffer restored from the saved tensors."""

    name: str
    binding: cst.CSTNode  # the target element, for the message's line


def restored_main_grads(unit: Unit) -> list[tuple[Restored, object]]:
    """(restored buffer, its graph definition) for each binding of the unit that takes a
    main_grad buffer out of the saved tensors."""
    layouts = unit.context.shared(saved_layouts)
    found = []
    for d in unit.graph.defs:
        if d.kind != "assign" or d.value is None:
            continue
        owner = d.node.owner
        if not isinstance(owner, cst.Assign) or not is_restored(owner.value, unit, d.node):
            continue
        target = target_of(owner, d.name)
        if target is None:
            continue
        element, position, count = target
        if named_for_main_grad(d.name) or (
            position is not None and position in layouts.main_grad_positions(count)
        ):
            found.append((Restored(d.name, element), d))
    return found


def target_of(assign: cst.Assign, name: str):
    """(the element naming ``name``, its position, the number of items) in the
    assignment's targets; position None for a plain ``name = ...`` of an indexed value
    whose index is not a literal."""
    for target in assign.targets:
        node = target.target
        if isinstance(node, cst.Name) and node.value == name:
            index = _literal_index(assign.value)
            return node, index, None
        if isinstance(node, (cst.Tuple, cst.List)):
            elements = node.elements
            if any(isinstance(e, cst.StarredElement) for e in elements):
                return None
            for i, e in enumerate(elements):
                if isinstance(e.value, cst.Name) and e.value.value == name:
                    return e.value, i, len(elements)
    return None


def _literal_index(value: cst.CSTNode) -> int | None:
    if isinstance(value, cst.Subscript) and len(value.slice) == 1:
        index = value.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
            # evaluated as Python reads it: ``0x1`` and ``1_0`` are indices too
            return index.value.evaluated_value
    return None


def uses_as_buffer(unit: Unit, restored: Restored, d) -> list[cst.Name]:
    """The reads of ``restored`` reached by its binding ``d`` that use it as the buffer:
    anything but putting it back on a weight (``w.main_grad = mg``), testing it (``mg is
    None``, ``if mg``) or reading its metadata (``mg.dtype``)."""
    found = []
    for root, node in unit.expression_roots():
        if d not in unit.reaching.reaching(restored.name, node):
            continue
        if _puts_back(root, restored.name):
            continue
        for read in _buffer_reads(root, restored.name):
            found.append(read)
    for closure in _closures_seeing(unit, restored.name, d):
        for root, _ in closure.expression_roots():
            if not _puts_back(root, restored.name):
                found.extend(_buffer_reads(root, restored.name))
    return found


def _closures_seeing(unit: Unit, name: str, d) -> list[Unit]:
    """Functions nested in ``unit`` (TE's wgrad closures, handed to a store or called
    later) that read ``name`` from it, defined where the binding ``d`` reaches."""
    found = []
    for other in unit.context.units:
        if other.parent is not unit or not isinstance(other.owner, cst.FunctionDef):
            continue
        if other.reaching.defines(name):
            continue  # its own local of that name
        node = unit.node_for(other.owner)
        if node is not None and d in unit.reaching.reaching(name, node):
            found.append(other)
    return found


def _puts_back(root: cst.CSTNode, name: str) -> bool:
    """``w.main_grad = mg`` or ``w.main_grad = main_grads[i]``: re-attaching the restored
    buffer to a weight (the CPU-offloading path), not writing into it; also spelled
    ``setattr(w, "main_grad", mg)``."""
    if isinstance(root, cst.Expr):
        found = patterns.attribute_set(root, patterns.MAIN_GRAD)
        if found is None:
            return False
        value = found[1]
    elif isinstance(root, cst.Assign):
        if not all(patterns.is_attr(t.target, patterns.MAIN_GRAD) for t in root.targets):
            return False
        value = root.value
    else:
        return False
    while isinstance(value, cst.Subscript):
        value = value.value
    return isinstance(value, cst.Name) and value.value == name


def _buffer_reads(root: cst.CSTNode, name: str) -> list[cst.Name]:
    if isinstance(root, cst.Name):
        return []  # ``if mg:``, a compound statement's header
    skipped: set[int] = set()
    for node in patterns.walk(root):
        kind = type(node)
        if kind is cst.Comparison:
            skipped.update(id(n) for n in patterns.walk(node))
        elif kind is cst.Attribute and node.attr.value in patterns.METADATA_ATTRS:
            skipped.update(id(n) for n in patterns.walk(node.value))
        elif kind is cst.IfExp:
            skipped.update(id(n) for n in patterns.walk(node.test))
        elif kind is cst.BooleanOperation or (
            kind is cst.UnaryOperation and isinstance(node.operator, cst.Not)
        ):
            skipped.update(id(n) for n in patterns.children(node) if type(n) is cst.Name)
    if isinstance(root, (cst.Assign, cst.AnnAssign)):
        # a plain target is a rebinding, not a use; ``mg[...] = g`` writes into it
        targets = [t for t in patterns.assignment_targets(root) if not isinstance(t, cst.Name)]
        reads = [*patterns.read_names(root.value)] if root.value is not None else []
        for target in targets:
            reads.extend(patterns.read_names(target))
    else:
        reads = patterns.read_names(root)
    return [n for n in reads if n.value == name and id(n) not in skipped]
