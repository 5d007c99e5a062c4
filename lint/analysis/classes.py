"""A small model of the classes of one file, for rules about delayed weight gradients.

For each class: its bases (by name), its methods, the weight layers its ``__init__`` builds
(``self.X = SomeLinear(...)``, ``self.X = build_module(submodules.linear_x, ...)``, or a
container of such layers), which ``self`` attributes each method mentions, and what each
``self`` attribute is given (``self.fns = [self.fc1.backward_dw]``, ``self.fns.append(f)``):
an attribute that holds delayed-wgrad callables reaches whatever they mention.

Bases are resolved in this file and, when the run found them (``lint/class_facts.py``), in
the other files of the run: a class summarised there is an ``Outside`` class with the same
facts (no syntax tree). A base defined elsewhere and not summarised is unknown: it may
provide any method, except the few in ``BASES_WITHOUT_BACKWARD_DW``.

Reading one class into its model is ``class_model``'s; this module resolves the bases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import libcst as cst

from .. import class_facts, layer_facts
from ..class_facts import ClassFact
from . import patterns
from .class_model import DELAY, RAISES, SUPER, ClassModel, last_name, read_class

# Re-exported: analysis/overrides.py imports it from here.
from .class_model import self_call_closure as self_call_closure
from .module import ModuleContext

BACKWARD_DW = "backward_dw"
BASES_WITHOUT_BACKWARD_DW = class_facts.BASES_WITHOUT_BACKWARD_DW
# A call builds a weight layer when its callee names a linear layer, or when it is a spec
# builder (``build_module``) given a submodule spec whose name says linear or projection.
SPEC_BUILDERS = frozenset({"build_module"})
LAYER_WORDS = ("linear", "proj")


@dataclass
class Outside:
    """A class of another file of the run, known by its summary."""

    fact: ClassFact
    name: str = ""
    bases: list[str] = field(default_factory=list)
    mentions: dict[str, set[str]] = field(default_factory=dict)
    stores: dict[str, set[str]] = field(default_factory=dict)
    layers: tuple[str, ...] = ()
    spells_delay: bool = False

    def __post_init__(self) -> None:
        self.name, self.bases = self.fact.name, list(self.fact.bases)
        self.mentions = {name: set(attrs) for name, attrs in self.fact.methods}
        self.stores = {name: set(attrs) for name, attrs in self.fact.stores}
        self.layers, self.spells_delay = self.fact.layers, self.fact.spells_delay


Model = ClassModel | Outside


class ClassIndex:
    def __init__(self, context: ModuleContext, outside: Iterable[ClassFact] = ()) -> None:
        self.classes: dict[str, ClassModel] = {}
        is_layer = context.shared(layer_test)
        aliases = layer_facts.aliases(context.source)  # ``Base as _Base``: bases by name
        for stmt in context.module.body:  # top-level classes: the ones a base can name
            if isinstance(stmt, cst.ClassDef):
                model = read_class(stmt, is_layer, aliases)
                self.classes[model.name] = model
        # Classes of other files, by name; a name two files define differently is unknown.
        by_name: dict[str, dict[ClassFact, ClassFact]] = {}
        for fact in sorted(outside):
            if fact.path != context.path and fact.name not in self.classes:
                by_name.setdefault(fact.name, {}).setdefault(_without_path(fact), fact)
        self.outside = {
            name: Outside(*facts.values()) for name, facts in by_name.items() if len(facts) == 1
        }

    def resolve(self, name: str) -> Model | None:
        return self.classes.get(name) or self.outside.get(name)

    def lineage(self, model: Model) -> list[Model]:
        """The class and its known bases, nearest first (depth first)."""
        order: list[Model] = []
        stack, seen = [model], set()
        while stack:
            current = stack.pop(0)
            if current.name in seen:
                continue
            seen.add(current.name)
            order.append(current)
            stack.extend(base for b in current.bases if (base := self.resolve(b)) is not None)
        return order

    def crosses_files(self, model: Model) -> bool:
        return any(isinstance(current, Outside) for current in self.lineage(model))

    def method(self, model: Model, name: str) -> cst.FunctionDef | None:
        """The syntax of ``name`` as resolved for ``model``, when it is defined in this file
        (None when it is not defined, or defined in another file)."""
        owner = self.owner(model, name)
        return owner.methods[name] if isinstance(owner, ClassModel) else None

    def owner(self, model: Model, name: str) -> Model | None:
        """The nearest class of ``model``'s lineage that defines ``name``."""
        return next((c for c in self.lineage(model) if name in c.mentions), None)

    def may_inherit_unknown(self, model: Model) -> bool:
        """Some base, here or further up, is defined in no file we know and may define
        anything."""
        return any(
            self.resolve(base) is None and base not in BASES_WITHOUT_BACKWARD_DW
            for current in self.lineage(model)
            for base in current.bases
        )

    def reached_attributes(self, model: Model, method: str) -> set[str]:
        """``self`` attributes that ``method``, resolved for ``model``, mentions, following
        ``self.m()`` calls to the methods they resolve to, ``super()`` calls to the next
        definition up the lineage, and attributes to what they were given."""
        reached: set[str] = set()
        lineage = self.lineage(model)
        pending = [(method, 0)]
        visited: set[tuple[str, int]] = set()
        while pending:
            name, start = pending.pop()
            if (name, start) in visited:
                continue
            visited.add((name, start))
            level = next(
                (i for i in range(start, len(lineage)) if name in lineage[i].mentions), None
            )
            if level is not None:
                mentions = lineage[level].mentions[name]
                if SUPER in mentions:
                    pending.append((name, level + 1))
                for attr in mentions - {SUPER, RAISES}:
                    reached.add(attr)
                    pending.append((attr, 0))
            for current in lineage:  # what an attribute holds, wherever it was given
                for attr in current.stores.get(name, ()):
                    if attr not in reached:
                        reached.add(attr)
                        pending.append((attr, 0))
        return reached

    def calls_super(self, model: Model, method: str) -> bool:
        """``method``, resolved for ``model``, calls ``super()`` (a base's version runs too)."""
        owner = self.owner(model, method)
        return owner is not None and SUPER in owner.mentions[method]

    def only_raises(self, model: Model, method: str) -> bool:
        owner = self.owner(model, method)
        return owner is not None and RAISES in owner.mentions[method]

    def spells_delay(self, model: Model) -> bool:
        return any(current.spells_delay for current in self.lineage(model))


def _without_path(fact: ClassFact) -> ClassFact:
    """Two files that hold the same class (a vendored copy) describe one class."""
    return replace(fact, path="")


def layer_test(context: ModuleContext) -> Callable[[cst.Call], bool]:
    """For ``context.shared``: whether a call builds a weight layer whose wgrad may be
    delayed. Its callee names a linear layer that the run does not show to be eager
    (``layer_facts``: PyTorch's ``nn.Linear``, Megatron's own parallel linears, classes of
    the run with no delayed-wgrad protocol), or it is a spec builder given a submodule spec
    whose name says linear or projection."""
    imports = layer_facts.imported_from(context.source)
    aliases = layer_facts.aliases(context.source)  # ``GroupedLinear as GL``: still a Linear
    eager = context.eager_layers

    def is_layer(call: cst.Call) -> bool:
        # Handed ``delay_wgrad_compute`` (not a literal False): whatever it builds delays
        # its weight gradient, whatever its name.
        delay = patterns.keyword_arg(call, DELAY)
        if delay is not None and not patterns.is_false_literal(delay.value):
            return True
        name = patterns.callee_name(call) or ""
        if name in SPEC_BUILDERS:
            spec = patterns.positional_args(call)
            target = last_name(spec[0].value) if spec else None
            return target is not None and any(word in target.lower() for word in LAYER_WORDS)
        if "Linear" not in aliases.get(name, name):
            return False
        spelled = _dotted_tail(call.func) or name
        return not layer_facts.is_eager(spelled, imports.get(spelled), eager)

    return is_layer


def _dotted_tail(func: cst.CSTNode) -> str | None:
    if isinstance(func, cst.Attribute) and isinstance(func.value, (cst.Name, cst.Attribute)):
        return f"{last_name(func.value)}.{func.attr.value}"
    return None


def class_index(context: ModuleContext) -> ClassIndex:
    """For ``context.shared``: the index of this file's classes alone, built once."""
    return ClassIndex(context)


def class_index_with_run(context: ModuleContext) -> ClassIndex:
    """For ``context.shared``: the index with the classes of the run's other files."""
    return ClassIndex(context, context.class_facts)


def super_chain_open(index: ClassIndex, model: Model, method: str) -> bool:
    """``method``, resolved for ``model``, hands on to ``super()`` up to a definition that
    still calls ``super()`` with no known class above it: a base we do not know runs too."""
    lineage = index.lineage(model)
    level = 0
    while True:
        level = next((i for i in range(level, len(lineage)) if method in lineage[i].mentions), -1)
        if level < 0:
            return True  # handed on to a base nobody summarised
        if SUPER not in lineage[level].mentions[method]:
            return False
        level += 1
