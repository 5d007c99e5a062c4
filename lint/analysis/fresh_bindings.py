"""Bindings that make a new object out of a weight (issue #19, class 2; GMLP015): a
``Parameter(...)`` wrapper or a tensor copy (also made by a helper of the module that
returns one), a method chain on the weight itself one link of which is a copy or a view
(``w = w.t().contiguous().t()``), the weight rebound to its own quantized copy; lists of
such objects, one per weight; and which of those bindings a name read reaches. The new
object carries none of the main_grad and flags Megatron put on the Parameter. Found here;
the rule's module (lint/rules/weight_rebound_before_main_grad.py) reports the reads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from . import decided_tests, iteration, patterns, provenance
from .helper_facts import last_name

if TYPE_CHECKING:
    from .module import ModuleContext, Unit

# Calls that make a new object out of a weight: a Parameter wrapper, or a tensor copy.
FRESH_CALLS = frozenset({"Parameter", "clone", "detach", "deepcopy", "copy", "contiguous"})
# Tensor methods that always return a new Python object (a view), never the Parameter itself:
# a weight rebound through a chain holding one (``w = w.t().contiguous().t()``, ``w =
# w.view(n, -1)``) has lost its attributes even when the chain ends in a view of the
# original storage. (``to`` / ``float`` / ``type`` may return the object itself: not counted.)
VIEW_CALLS = frozenset(
    {"t", "view", "view_as", "transpose", "reshape", "permute", "flatten", "unflatten",
     "squeeze", "unsqueeze", "narrow", "expand", "expand_as", "as_strided", "split", "chunk",
     "unbind"}
)  # fmt: skip


def fresh_lists(unit: Unit, helpers, makers) -> dict:
    """Bindings of a list of new objects, one per weight, with the call that makes them:
    ``[Parameter(w.detach()) for w in weights]``, ``list(w.clone() for w in weights)``,
    ``L = []`` filled by ``L.append(Parameter(...))``."""
    found = {}
    for d in unit.graph.defs:
        if d.kind == "assign" and isinstance(d.value, cst.List) and not d.value.elements:
            given = [value for value, _ in iteration.appended_to(unit, d)]
            if given and all(makes_fresh("", v, helpers, makers) for v in given):
                found[d] = given[0]
            continue
        comprehension = _comprehension(d.value) if d.kind == "assign" else None
        if comprehension is None:
            continue
        target = comprehension.for_in.target
        if (
            comprehension.for_in.inner_for_in is None
            and isinstance(target, cst.Name)
            and makes_fresh(target.value, comprehension.elt, helpers, makers)
        ):
            found[d] = comprehension.elt
    return found


def _comprehension(value):
    if isinstance(value, cst.Call) and patterns.callee_name(value) in ("list", "tuple"):
        value = value.args[0].value if len(value.args) == 1 else None
    return value if isinstance(value, (cst.ListComp, cst.GeneratorExp)) else None


def fresh_makers(context: ModuleContext) -> frozenset[str]:
    """For ``context.shared``: the module's functions whose every return is a fresh object
    (a ``Parameter(...)`` or a tensor copy): calling one rebinds like the call it wraps."""
    found: set[str] = set()
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef) or not unit.survey.calls & FRESH_CALLS:
            continue
        values = [stmt.value for stmt, _ in unit.statements() if isinstance(stmt, cst.Return)]
        if values and all(patterns.callee_name(v) in FRESH_CALLS for v in values):
            found.add(unit.name)
    return frozenset(found)


def makes_fresh(
    name: str, value, helpers: dict[str, str], makers: frozenset[str], defined=frozenset()
) -> bool:
    """A Parameter wrapper or tensor copy (also made by a helper of the module that returns
    one), or the weight rebound to its own quantized copy (``w = quantize(w)``, or a helper
    of the module that returns one). A gathered weight is not counted: code that gathers for
    dgrad turns the main_grad path off on its own. A conditional expression keeping the
    weight in one arm and making one of those in the other (``w = w if w.dtype == dtype
    else w.astype(dtype)``) makes it on the runs that take that arm. A helper named for
    padding or aligning its operands, handed the weight, makes one too unless the file
    defines it (``defined``: the file's function names)."""
    if type(value) is cst.IfExp:
        made = made_by(name, value)
        return made is not value and makes_fresh(name, made, helpers, makers)
    if not isinstance(value, cst.Call):
        return False
    callee = patterns.callee_name(value)
    if callee in FRESH_CALLS or (callee in makers and isinstance(value.func, cst.Name)):
        return True
    rebinds = name in {n.value for n in patterns.read_names(value)}
    if rebinds and (_chain_makes_new(value) or _pads_or_aligns(callee, defined)):
        return True
    return rebinds and provenance.of_value(value, {}, helpers) == provenance.QUANTIZED


# Parts (``_``-separated) of a helper's name that say it hands back its operands padded or
# aligned for the hardware (MindSpeed's ``get_aligned_mm_inputs``): where the shape needs it,
# what comes back is a new tensor (``w.t().contiguous().t()``, a padded copy). Not
# ``alignment`` or ``padding`` (a check, a mask).
LAYOUT_COPY_PARTS = frozenset({"align", "aligned", "pad", "padded"})


def _pads_or_aligns(callee: str | None, defined) -> bool:
    """Such a helper defined elsewhere: one of this file (``defined``) is judged by what it
    returns (``fresh_makers``), not by its name."""
    if not callee or callee in defined:
        return False
    return not LAYOUT_COPY_PARTS.isdisjoint(callee.lower().split("_"))


def made_by(name: str, value):
    """The expression that makes the bound object: the value, or for ``w = w if test else
    X`` (or ``X if test else w``) the other arm X."""
    if type(value) is cst.IfExp:
        for kept, other in ((value.body, value.orelse), (value.orelse, value.body)):
            if type(kept) is cst.Name and kept.value == name:
                return other
    return value


def is_choice(value) -> bool:
    """A conditional expression (``w = w if fuse else w.astype(dt)``)."""
    return type(value) is cst.IfExp


def copy_ruled_out(name: str, value, node) -> bool:
    """For ``w = w if test else copy`` (or ``copy if test else w``): an ``if`` around the
    read at ``node`` decides the test for the arm that keeps the weight (``w = w if fuse
    else w.astype(dt)`` beside ``if fuse: w.main_grad...``), or the read is that test
    asked again (``if hasattr(w, "main_grad")`` after a choice on it)."""
    if type(value) is not cst.IfExp:
        return False
    if _asks_main_grad(value.test):
        # ``w = w if hasattr(w, "main_grad") else copy``: the copy has no main_grad either,
        # so the same question asked again (the read itself, or an ``if`` around it) finds
        # what the choice found, and what it guards runs on the kept weight
        asked = decided_tests.text_of(value.test)
        if node.test is not None and decided_tests.text_of(node.test) == asked:
            return True
        return any(
            decided_tests.text_of(stmt.test) == asked and side == "body"
            for stmt, side in node.enclosing_ifs
        )
    # the test's value on the runs that make the copy
    return decided_tests.rules_out(
        node.enclosing_ifs, value.test, made_by(name, value) is value.body
    )


def _asks_main_grad(test) -> bool:
    """``hasattr(w, "main_grad")``."""
    args = patterns.positional_args(test) if type(test) is cst.Call else []
    return (
        patterns.callee_name(test) == "hasattr"
        and len(args) == 2
        and patterns.string_value(args[1].value) == patterns.MAIN_GRAD
    )


def _chain_makes_new(value) -> bool:
    """A method chain on the weight itself (``w.t().contiguous().t()``) one link of which
    is a copy or a view: the result is a new object whatever the last link is."""
    while type(value) is cst.Call and type(value.func) is cst.Attribute:
        if value.func.attr.value in FRESH_CALLS or value.func.attr.value in VIEW_CALLS:
            return True
        value = value.func.value
    return False


def surely_new_object(name: str, value) -> bool:
    """The weight rebound through a chain on itself that surely makes a new object: a copy
    (``clone``, ``detach``, ``deepcopy``) or a view at some link, or wrapped in a
    ``Parameter``. ``w.contiguous()`` alone is not counted: on a contiguous Parameter it
    returns the Parameter itself."""
    if not isinstance(value, cst.Call):
        return False
    if patterns.callee_name(value) == "Parameter":
        return True
    if name not in {n.value for n in patterns.read_names(value)}:
        return False
    while type(value) is cst.Call and type(value.func) is cst.Attribute:
        link = value.func.attr.value
        if (link in FRESH_CALLS and link != "contiguous") or link in VIEW_CALLS:
            return True
        value = value.func.value
    return False


def bindings_read(unit: Unit, owner, node, fresh, lists):
    """The rebindings (of ``fresh``) and fresh lists (of ``lists``) that ``owner`` reads
    where ``node`` runs: the name's own binding, a list's item ``L[i]``, or a loop variable
    walking such a list (``for w in L``, ``enumerate(L)``, ``zip(W, L)``)."""
    if isinstance(owner, cst.Subscript):
        if isinstance(owner.value, cst.Name):
            yield from (d for d in unit.reaching.reaching(owner.value.value, node) if d in lists)
        return
    for d in unit.reaching.reaching(owner.value, node):
        if d in fresh:
            yield d
        elif d.kind == "for":
            sequence = iteration.element_source(d.node.owner, d.target)
            if isinstance(sequence, cst.Name):
                reaching = unit.reaching.reaching(sequence.value, d.node)
                yield from (e for e in reaching if e in lists)


# What a weakref is kept for: getting the Parameter object itself back in backward.
COPYING_LINKS = frozenset({"detach", "clone", "data"})


def dereferenced_copies(stmt) -> Iterator[cst.BaseExpression]:
    """``w = ref().detach()`` / ``.clone()`` / ``.data`` (also an element of a list built by
    a comprehension, or an arm of a conditional there), where ``ref`` is named for a weak
    reference (``ref``, ``origin_weight_ref``, ``self._weight_ref``) and the name bound is a
    weight's (``weight``, ``param``): the Parameter the reference gives back, replaced at
    once by a new object without its main_grad, flags or hooks. A copy taken on into a
    longer chain (``ref().detach().float()``: values for a norm) is no weight."""
    if type(stmt) is not cst.Assign or len(stmt.targets) != 1:
        return
    target = stmt.targets[0].target
    if type(target) is not cst.Name or not any(w in target.value.lower() for w in WEIGHT_WORDS):
        return
    value = stmt.value
    if type(value) in (cst.ListComp, cst.GeneratorExp):
        value = value.elt
    for arm in (value.body, value.orelse) if type(value) is cst.IfExp else (value,):
        if _dereferenced_copy(arm):
            yield arm


WEIGHT_WORDS = ("weight", "param")


def _dereferenced_copy(sub) -> bool:
    if type(sub) is cst.Call and type(sub.func) is cst.Attribute:
        link, receiver = sub.func.attr.value, sub.func.value
    elif type(sub) is cst.Attribute:
        link, receiver = sub.attr.value, sub.value
    else:
        return False
    if link not in COPYING_LINKS or type(receiver) is not cst.Call or receiver.args:
        return False
    return last_name(receiver.func).lower().rstrip("_").endswith("ref")
