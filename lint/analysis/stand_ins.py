"""The stand-in an expression surely is where one graph node runs: flow-sensitive, over the
bindings that reach it (``provenance`` holds what names and values are, by spelling and by
the last assignment; this asks every path). A weight gathered only under ``if gtp:`` is the
Parameter on the other path; a loop variable is a copy only when the list it walks holds
nothing but copies (``for wq in weights_fp8``), never by its spelling."""

from __future__ import annotations

import libcst as cst

from . import holders, iteration, patterns
from .module import Unit
from .provenance import (
    COPIES,
    ORIGIN_PREFIXES,
    QUANTIZED,
    SAVED,
    Provenance,
    by_name,
    is_saved_tensors,
    of_value,
    on_ctx,
    origin_sibling,
    target_names,
)

# The other tensor of a pair unpacked beside the Parameter's origin-named sibling.
PAIRED = "paired"


def surely_stand_in(
    objects: Provenance, unit: Unit, expr: cst.CSTNode, node, seen: frozenset[str] = frozenset()
) -> str | None:
    """The stand-in ``expr`` surely is where graph node ``node`` of ``unit`` runs. For a
    name, every binding reaching there must make it one (a weight gathered only under
    ``if gtp:`` is the Parameter on the other path; a loop variable or a parameter is never
    assumed a copy by its spelling, ``w_fp8`` over an FP8 model's parameters being the
    Parameter); a ``ctx`` attribute is one by what the file stores in it; a call by its
    producer."""
    if isinstance(expr, cst.Name):
        if expr.value in seen:
            return None
        defs = unit.reaching.reaching(expr.value, node)
        if not defs:
            return None
        kinds = set()
        for d in defs:
            if d.kind == "for":  # an element of a list of copies is a copy
                kinds.add(_element_kind(objects, unit, d, seen | {expr.value}))
            elif d.kind not in ("assign", "walrus") or d.value is None:
                return None
            else:
                kinds.add(_binding_kind(objects, unit, d, seen | {expr.value}))
        return kinds.pop() if len(kinds) == 1 else None
    if isinstance(expr, cst.Subscript):
        return surely_stand_in(objects, unit, expr.value, node, seen)
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.DictComp)):
        kind = objects.of(expr)
        return kind if kind in COPIES else None
    if isinstance(expr, cst.Attribute):
        if on_ctx(expr):
            return objects.ctx.attrs.get(expr.attr.value)
        return holders.HELD if holders.held_stand_in(unit, expr, node) else None
    if isinstance(expr, cst.Call):
        kind = objects.of(expr)
        return kind if kind in COPIES else None
    return None


def _element_kind(objects: Provenance, unit: Unit, d, seen: frozenset[str]) -> str | None:
    """The copy a loop variable surely is: its loop walks a sequence (plainly, through
    ``enumerate`` or ``zip``) every element of which is that copy where the loop starts."""
    sequence = iteration.element_source(d.node.owner, d.target)
    if sequence is None:
        return None
    kind = surely_stand_in(objects, unit, sequence, d.node, seen)
    return kind if kind in COPIES else None


def _appended_kind(objects: Provenance, unit: Unit, d, seen: frozenset[str]) -> str | None:
    """``L = []`` filled by ``L.append(<copy>)`` (one per expert): the copy, when every value
    appended to this binding of L is one of the same kind."""
    kinds = {
        surely_stand_in(objects, unit, value, at, seen)
        for value, at in iteration.appended_to(unit, d)
    }
    kind = kinds.pop() if len(kinds) == 1 else None
    return kind if kind in COPIES else None


def _binding_kind(objects: Provenance, unit: Unit, d, seen: frozenset[str]) -> str | None:
    """The stand-in one binding makes of its name, flow-sensitively."""
    if _unpacked(d):
        value = d.node.owner.value
        kind = by_name(d.name)
        targets = [t.target for t in d.node.owner.targets]
        names = target_names(targets[0]) if len(targets) == 1 else []  # the unpacked names
        if is_saved_tensors(value):
            saved = objects.ctx.saved
            if len(saved) == len(names) and d.name in names:
                kind = saved[names.index(d.name)] or kind or SAVED
            kind = kind or SAVED
        elif of_value(value, {}, objects.helpers, objects.ctx) == SAVED:
            kind = kind or SAVED
        elif objects.of(value) in COPIES:
            # ``wm, workspace = quantize_weight(w)``: what a copying producer hands back,
            # unpacked, is that copy and its companions, whatever the names.
            kind = kind or objects.of(value)
        if kind is None and origin_sibling(d.name, names) is not None:
            # ``weight_cal, weight_origin = weight``: unpacked beside the Parameter's
            # origin-named sibling, it is the other tensor of the pair
            return PAIRED
        return _as_stand_in(objects, d.name, kind)
    value = d.value
    if type(value) is cst.List and not value.elements:
        return _appended_kind(objects, unit, d, seen)
    restored = _item_of_saved(objects, unit, value, d.node)
    if restored is not None:
        # ``saved = ctx.saved_tensors; w = saved[0]``: as ``w, ... = ctx.saved_tensors``
        return _as_stand_in(objects, d.name, restored or by_name(d.name) or SAVED)
    if isinstance(value, (cst.Name, cst.Subscript)):
        return surely_stand_in(objects, unit, value, d.node, seen)
    if isinstance(value, cst.Attribute):
        if on_ctx(value):
            kind = objects.ctx.attrs.get(value.attr.value) or SAVED
            return _as_stand_in(objects, d.name, kind)
        return surely_stand_in(objects, unit, value, d.node, seen)  # ``buf = slot.full``
    return _as_stand_in(objects, d.name, objects.of(value))


def _item_of_saved(objects: Provenance, unit: Unit, value, node) -> str | None:
    """For ``X[i]`` where every binding of X reaching ``node`` restores the saved tensors
    (``ctx.saved_tensors``, ``restore_from_saved(...)``): what forward saved at position i
    (``""`` when unknown); None for anything else."""
    if not (isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name)):
        return None
    defs = unit.reaching.reaching(value.value.value, node)
    if not defs or not all(
        d.kind == "assign"
        and d.value is not None
        and (
            is_saved_tensors(d.value)
            or (
                isinstance(d.value, cst.Call)
                and of_value(d.value, {}, objects.helpers, objects.ctx) == SAVED
            )
        )
        for d in defs
    ):
        return None
    if not all(is_saved_tensors(d.value) for d in defs):
        return ""
    index = value.slice[0].slice if len(value.slice) == 1 else None
    if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
        position = index.value.evaluated_value
        if position < len(objects.ctx.saved):
            return objects.ctx.saved[position] or ""
    return ""


def _as_stand_in(objects: Provenance, name: str, kind: str | None) -> str | None:
    """Copies are stand-ins; a saved tensor only when the Parameter has its own
    ``origin_`` name beside it."""
    if kind in COPIES:
        return kind
    if kind == SAVED and any(p + name in objects.names for p in ORIGIN_PREFIXES):
        return SAVED
    return None


def rebound_to_itself(unit: Unit, name: str, node) -> bool:
    """A binding of ``name`` reaching ``node`` computes it from itself (``w = quantize(w)``):
    the weight name rebound to its own copy, GMLP015's finding."""
    return any(
        d.value is not None and name in {n.value for n in patterns.read_names(d.value)}
        for d in unit.reaching.reaching(name, node)
    )


def _unpacked(d) -> bool:
    """``a, w = <one value>``: the binding's value is the whole right-hand side, so the
    name's own classification (saved-tensor positions, its ``origin_`` twin) decides."""
    owner = d.node.owner
    return (
        isinstance(owner, cst.Assign)
        and d.value is owner.value
        and any(isinstance(t.target, (cst.Tuple, cst.List)) for t in owner.targets)
    )


# A weight-shaped allocation (the dummy handed back for a Parameter whose gradient went into
# main_grad) takes its shape from one tensor: the receiver of ``X.new_zeros()`` with no shape,
# the model of ``torch.zeros_like(X)``, or the tensor whose ``.shape`` / ``.size()`` it is
# given (``get_dummy_wgrad(list(X.shape), ...)``, ``torch.zeros(X.size())``,
# ``Y.new_zeros(X.shape)``).
LIKE_ALLOCATORS = frozenset({"zeros_like", "empty_like", "ones_like", "full_like"})
NEW_ALLOCATORS = frozenset({"new_zeros", "new_empty", "new_ones", "new_full"})
DUMMY_HELPERS = frozenset({"get_dummy_wgrad"})
SIZED_ALLOCATORS = frozenset({"zeros", "empty", "ones", "full", *DUMMY_HELPERS})


def shape_source(call: cst.Call) -> cst.BaseExpression | None:
    """The tensor a weight-shaped allocation takes its shape from, or None."""
    name = patterns.callee_name(call)
    args = [a for a in call.args if a.keyword is None]
    if name in LIKE_ALLOCATORS:
        return args[0].value if args and not args[0].star else None
    # torch's allocators take dimensions only as positionals; the dummy helper's shape is
    # its first argument (then dtype)
    sized = _sized_by(args[:1] if name in DUMMY_HELPERS else args)
    if name in NEW_ALLOCATORS and type(call.func) is cst.Attribute:
        return sized if sized is not None else (None if args else call.func.value)
    return sized if name in SIZED_ALLOCATORS else None


def _sized_by(args) -> cst.BaseExpression | None:
    """The one tensor whose sizes the shape arguments are: ``X.shape`` / ``X.size()`` (also
    in ``list(...)`` / ``tuple(...)`` or starred), or each dimension taken from it
    (``X.shape[0], X.size(1)``)."""
    roots = [_dimension_of(a.value) for a in args]
    if not roots or any(r is None for r in roots):
        return None
    texts = {cst.Module([]).code_for_node(r) for r in roots}
    return roots[0] if len(texts) == 1 else None


def _dimension_of(shape) -> cst.BaseExpression | None:
    if type(shape) is cst.Call and patterns.callee_name(shape) in ("list", "tuple"):
        inner = patterns.positional_args(shape)
        shape = inner[0].value if len(inner) == 1 else None
    if type(shape) is cst.Subscript:
        shape = shape.value  # ``X.shape[0]``
    if type(shape) is cst.Attribute and shape.attr.value == "shape":
        return shape.value
    if type(shape) is cst.Call and patterns.is_attr(shape.func, "size") and len(shape.args) < 2:
        return shape.func.value  # ``X.size()``, ``X.size(0)``
    return None


def element_reads(root: cst.CSTNode) -> dict[int, cst.BaseExpression]:
    """id(name node) -> the sequence it is an element of, for each read of a comprehension's
    variable (bound plainly to a sequence's elements) in that comprehension's element:
    ``w`` in ``[weakref.ref(w) for w in weights_fp8]`` is an element of ``weights_fp8``."""
    found: dict[int, cst.BaseExpression] = {}
    for comprehension in patterns.walk(root):
        kind = type(comprehension)
        if kind not in (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp):
            continue
        bound: dict[str, cst.BaseExpression] = {}
        loop = comprehension.for_in
        while loop is not None:
            bound.update((n.value, seq) for n, seq in iteration.element_sequences(loop))
            loop = loop.inner_for_in
        element = comprehension.value if kind is cst.DictComp else comprehension.elt
        for name in patterns.read_names(element):
            found.setdefault(id(name), bound.get(name.value))
    return {k: v for k, v in found.items() if v is not None}


def quantized_on_some_path(objects: Provenance, unit: Unit, expr: cst.CSTNode, node) -> bool:
    """``expr`` is a quantized copy on at least one path reaching graph node ``node`` (a
    binding reaching it, an arm of a conditional expression, the list a value walks). Where
    the Parameter is wanted whatever the path (a weakref kept for backward to reach it), the
    FP8 path's copy is already wrong there: ``w = quantize(weight) if fp8 else weight``. A
    copy gathered on one path is not counted: code that materializes distributed weights
    handles their bookkeeping on that path itself (Transformer Engine's GroupedLinear keeps
    the weakrefs of gathered weights but reads the saved weights back when distributed)."""
    return _copy_on_some_path(objects, unit, expr, node) == QUANTIZED


def _copy_on_some_path(
    objects: Provenance, unit: Unit, expr: cst.CSTNode, node, seen: frozenset[str] = frozenset()
) -> str | None:
    if isinstance(expr, cst.IfExp):
        for arm in (expr.body, expr.orelse):
            kind = _copy_on_some_path(objects, unit, arm, node, seen)
            if kind is not None:
                return kind
        return None
    if isinstance(expr, cst.Subscript):
        return _copy_on_some_path(objects, unit, expr.value, node, seen)
    if not isinstance(expr, cst.Name):
        return surely_stand_in(objects, unit, expr, node, seen)
    if expr.value in seen:
        return None
    inner = seen | {expr.value}
    for d in unit.reaching.reaching(expr.value, node):
        if d.kind == "for":
            sequence = iteration.element_source(d.node.owner, d.target)
            kind = sequence and _copy_on_some_path(objects, unit, sequence, d.node, inner)
        elif d.kind in ("assign", "walrus") and d.value is not None:
            kind = _binding_kind(objects, unit, d, inner)
            if kind is None and isinstance(d.value, (cst.IfExp, cst.Name, cst.Subscript)):
                kind = _copy_on_some_path(objects, unit, d.value, d.node, inner)
        else:
            kind = None
        if kind in COPIES:
            return kind
    return None
