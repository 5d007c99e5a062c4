"""A Transformer Engine module subclassed with wgrad fusion on, whose own fetch of
Megatron-FSDP's main_grad names some of its weights and leaves out one the base class
writes (issue #19, class 8; GMLP050).

GPT-NeoX-style wrappers subclass ``te.pytorch.LayerNormMLP`` (or ``Linear``,
``LayerNormLinear``), hand ``fuse_wgrad_accumulation=`` to the base's ``__init__`` and, in
``forward``, bind ``param.main_grad = param.get_main_grad()`` for a literal list of their
weights before calling the base. The base's backward writes the main_grad of every weight
it fuses (``WEIGHTS_OF``): one left out of the list reaches it with main_grad None (blind
corpus 18: the list named ``layer_norm_weight`` and ``fc1_weight``, not ``fc2_weight``).

Seen: a class of the file with such a base (the last name of its spelling, in a file that
names transformer_engine), a ``fuse_wgrad_accumulation=`` keyword (not the literal False) in
a call of the class, and a ``for`` over a literal tuple or list of strings (read by
``getattr(self, name)``) or of ``self.X``, whose body binds a fetched main_grad (itself or
through a binder of the file). Weights the class freezes (``requires_grad_(False)``) are not
missing; a class handing ``parameters_split=`` (named weights) is left alone. Not seen: lists
built elsewhere, fetches written one by one, bases from another file that subclass TE in
turn, fusion switched on through a ``**kwargs`` dict.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import class_model, patterns
from .fused_module_fetches import body_fetches
from .helper_facts import last_name
from .module import ModuleContext, suite_body

# The Parameters whose weight gradient each Transformer Engine module writes into main_grad
# when built with ``fuse_wgrad_accumulation=True`` (TE 2.x, transformer_engine/pytorch/module:
# the layer norm's own weight and the biases go through autograd).
WEIGHTS_OF = {
    "Linear": ("weight",),
    "LayerNormLinear": ("weight",),
    "LayerNormMLP": ("fc1_weight", "fc2_weight"),
}
FUSE_KEYWORD = "fuse_wgrad_accumulation"


@dataclass(frozen=True)
class MissedWeight:
    listed: cst.BaseExpression  # the fetch loop's list
    base: str  # the Transformer Engine class
    missing: tuple[str, ...]  # the base's fused weights the list leaves out


def missed_weights(context: ModuleContext, binders: frozenset[str]) -> Iterator[MissedWeight]:
    if "transformer_engine" not in context.source:
        return
    for cls in patterns.walk(context.module):
        if type(cls) is not cst.ClassDef:
            continue
        base = _te_base(cls)
        if base is None or not _fuses(cls):
            continue
        if _splits_parameters(cls):
            continue  # ``parameters_split``: the weights are named by the split, not ``weight``
        weights = tuple(w for w in WEIGHTS_OF[base] if w not in _frozen(cls))
        for loop in class_model.walk_all(cls.body):
            if type(loop) is not cst.For or not body_fetches(loop.body, binders):
                continue
            listed = _listed_weights(loop.iter)
            if listed and (missing := tuple(w for w in weights if w not in listed)):
                yield MissedWeight(loop.iter, base, missing)


def _te_base(cls: cst.ClassDef) -> str | None:
    """The Transformer Engine class among ``cls``'s bases (``te.pytorch.LayerNormMLP``)."""
    for arg in cls.bases:
        last = last_name(arg.value)
        if last in WEIGHTS_OF:
            return last
    return None


def _fuses(cls: cst.ClassDef) -> bool:
    """A call of the class hands ``fuse_wgrad_accumulation=`` something but False."""
    for method in suite_body(cls.body):
        if type(method) is not cst.FunctionDef:
            continue
        for node in patterns.walk(method.body):
            if type(node) is not cst.Call:
                continue
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == FUSE_KEYWORD:
                    value = arg.value
                    if not (type(value) is cst.Name and value.value == "False"):
                        return True
    return False


def _splits_parameters(cls: cst.ClassDef) -> bool:
    return any(
        type(node) is cst.Arg
        and node.keyword is not None
        and node.keyword.value == "parameters_split"
        for node in class_model.walk_all(cls.body)
    )


def _frozen(cls: cst.ClassDef) -> frozenset[str]:
    """``self.w`` of ``self.w.requires_grad_(False)`` / ``self.w.requires_grad = False``: a
    weight that takes no gradient has no main_grad to fetch."""
    found = set()
    for node in class_model.walk_all(cls.body):
        if (
            type(node) is cst.Call
            and type(node.func) is cst.Attribute
            and node.func.attr.value == "requires_grad_"
            and node.args
            and patterns.is_false_literal(node.args[0].value)
        ):
            found.add(patterns.attribute_of(node.func.value, "self"))
        elif type(node) is cst.Assign and patterns.is_false_literal(node.value):
            for target in node.targets:
                if patterns.is_attr(target.target, "requires_grad"):
                    found.add(patterns.attribute_of(target.target.value, "self"))
    return frozenset(found - {None})


def _listed_weights(expr: cst.BaseExpression) -> frozenset[str]:
    """The names a literal tuple or list of strings, or of ``self.X``, spells."""
    if type(expr) not in (cst.Tuple, cst.List) or not expr.elements:
        return frozenset()
    names = set()
    for element in expr.elements:
        value = element.value
        if type(element) is not cst.Element:
            return frozenset()
        if type(value) is cst.SimpleString:
            names.add(value.evaluated_value)
        elif (attr := patterns.attribute_of(value, "self")) is not None:
            names.add(attr)
        else:
            return frozenset()
    return frozenset(names)
