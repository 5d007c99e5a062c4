"""A small model of the classes of one file, for rules about delayed weight gradients.

For each class: its bases (by name), its methods, the weight layers its ``__init__`` builds
(``self.X = SomeLinear(...)`` or ``self.X = build_module(submodules.linear_x, ...)``), and,
resolved through the bases defined in the same file, which ``self`` attributes a method
reaches, following ``self.other_method()`` calls. A base defined elsewhere is unknown: it may
provide any method, except the few in ``BASES_WITHOUT_BACKWARD_DW``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from . import patterns
from .module import ModuleContext, suite_body

DELAY = "delay_wgrad_compute"
BACKWARD_DW = "backward_dw"
# Bases known not to define backward_dw: a class deriving only from these (and from classes
# of the same file that lack it) has none.
BASES_WITHOUT_BACKWARD_DW = frozenset(
    {"object", "Module", "ABC", "MegatronModule", "Protocol", "Generic"}
)
# A call builds a weight layer when its callee names a linear layer, or when it is a spec
# builder (``build_module``) given a submodule spec whose name says linear or projection.
SPEC_BUILDERS = frozenset({"build_module"})
LAYER_WORDS = ("linear", "proj")
# Layers that always compute their weight gradient in the ordinary backward pass (PyTorch's
# own), named by the dotted callee's last two parts.
EAGER_LAYERS = frozenset({"nn.Linear"})


@dataclass
class ClassModel:
    node: cst.ClassDef
    bases: list[str]
    methods: dict[str, cst.FunctionDef]
    layers: dict[str, cst.CSTNode] = field(default_factory=dict)  # attribute -> its assignment
    spells_delay: bool = False  # its own __init__ spells delay_wgrad_compute

    @property
    def name(self) -> str:
        return self.node.name.value


class ClassIndex:
    def __init__(self, context: ModuleContext) -> None:
        self.classes: dict[str, ClassModel] = {}
        for stmt in context.module.body:  # top-level classes: the ones a base can name
            if isinstance(stmt, cst.ClassDef):
                model = _model(stmt)
                self.classes[model.name] = model

    def lineage(self, model: ClassModel) -> list[ClassModel]:
        """The class and its bases defined in this file, nearest first (depth first)."""
        order, stack, seen = [], [model], set()
        while stack:
            current = stack.pop(0)
            if current.name in seen:
                continue
            seen.add(current.name)
            order.append(current)
            stack.extend(self.classes[b] for b in current.bases if b in self.classes)
        return order

    def method(self, model: ClassModel, name: str) -> cst.FunctionDef | None:
        for current in self.lineage(model):
            if name in current.methods:
                return current.methods[name]
        return None

    def may_inherit_unknown(self, model: ClassModel) -> bool:
        """Some base, here or further up, is defined elsewhere and may define anything."""
        return any(
            base not in self.classes and base not in BASES_WITHOUT_BACKWARD_DW
            for current in self.lineage(model)
            for base in current.bases
        )

    def reached_attributes(self, model: ClassModel, method: str) -> set[str]:
        """``self`` attributes that ``method``, resolved for ``model``, mentions, following
        ``self.m()`` calls to the methods they resolve to."""
        reached: set[str] = set()
        pending, visited = [method], set()
        while pending:
            name = pending.pop()
            if name in visited:
                continue
            visited.add(name)
            body = self.method(model, name)
            if body is None:
                continue
            for node in patterns.walk(body.body):
                if _is_self_attr(node):
                    reached.add(node.attr.value)
                    pending.append(node.attr.value)
        return reached

    def calls_super(self, model: ClassModel, method: str) -> bool:
        """``method``, resolved for ``model``, calls ``super()`` (a base's version runs too)."""
        body = self.method(model, method)
        return body is not None and "super" in {
            patterns.callee_name(n) for n in patterns.walk(body.body) if isinstance(n, cst.Call)
        }

    def spells_delay(self, model: ClassModel) -> bool:
        return any(current.spells_delay for current in self.lineage(model))


def _model(node: cst.ClassDef) -> ClassModel:
    bases = [name for arg in node.bases if (name := _last_name(arg.value))]
    methods = {
        stmt.name.value: stmt for stmt in suite_body(node.body) if isinstance(stmt, cst.FunctionDef)
    }
    model = ClassModel(node, bases, methods)
    init = methods.get("__init__")
    if init is not None:
        model.spells_delay = _spells_delay(init)
        for inner in patterns.walk(init.body):
            if isinstance(inner, cst.Assign) and _builds_layer(inner.value):
                for target in inner.targets:
                    if _is_self_attr(target.target):
                        model.layers.setdefault(target.target.attr.value, inner)
    return model


def _spells_delay(init: cst.FunctionDef) -> bool:
    if any(p.name.value == DELAY for p in init.params.params + init.params.kwonly_params):
        return True
    return any(
        (isinstance(n, cst.Attribute) and n.attr.value == DELAY)
        or (isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value == DELAY)
        for n in patterns.walk(init.body)
    )


def _builds_layer(value: cst.CSTNode) -> bool:
    if not isinstance(value, cst.Call):
        return False
    name = patterns.callee_name(value) or ""
    if name in SPEC_BUILDERS:
        spec = patterns.positional_args(value)
        target = _last_name(spec[0].value) if spec else None
        return target is not None and any(word in target.lower() for word in LAYER_WORDS)
    return "Linear" in name and _dotted_tail(value.func) not in EAGER_LAYERS


def _dotted_tail(func: cst.CSTNode) -> str | None:
    if isinstance(func, cst.Attribute) and isinstance(func.value, (cst.Name, cst.Attribute)):
        return f"{_last_name(func.value)}.{func.attr.value}"
    return None


def _is_self_attr(node: cst.CSTNode) -> bool:
    return (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    )


def _last_name(expr: cst.CSTNode) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def class_index(context: ModuleContext) -> ClassIndex:
    """For ``context.shared``: the index is built once per file."""
    return ClassIndex(context)
