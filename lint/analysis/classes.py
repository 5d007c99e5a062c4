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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import libcst as cst

from .. import class_facts, layer_facts
from ..class_facts import ClassFact
from . import layer_builds, patterns
from .module import ModuleContext, compound_suites, suite_body

DELAY = "delay_wgrad_compute"
BACKWARD_DW = "backward_dw"
# Pseudo-attributes of a method's mentions: it calls ``super()``; its body only raises (a
# class that does not support the protocol says so loudly: nothing is dropped silently).
SUPER, RAISES = class_facts.SUPER, class_facts.RAISES
BASES_WITHOUT_BACKWARD_DW = class_facts.BASES_WITHOUT_BACKWARD_DW
# A call builds a weight layer when its callee names a linear layer, or when it is a spec
# builder (``build_module``) given a submodule spec whose name says linear or projection.
SPEC_BUILDERS = frozenset({"build_module"})
LAYER_WORDS = ("linear", "proj")
# Methods that put a value into a container attribute: ``self.fns.append(f)``.
STORING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})


@dataclass
class ClassModel:
    node: cst.ClassDef
    bases: list[str]
    methods: dict[str, cst.FunctionDef]
    layers: dict[str, cst.CSTNode] = field(default_factory=dict)  # attribute -> its assignment
    spells_delay: bool = False  # its own __init__ spells delay_wgrad_compute
    mentions: dict[str, set[str]] = field(default_factory=dict)  # method -> self attributes
    stores: dict[str, set[str]] = field(default_factory=dict)  # attribute -> what it is given
    # Whether a call builds a weight layer whose wgrad may be delayed (``layer_test``).
    is_layer: Callable[[cst.Call], bool] = field(default=lambda call: False, repr=False)

    @property
    def name(self) -> str:
        return self.node.name.value


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
                model = _model(stmt, is_layer, aliases)
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


def _model(
    node: cst.ClassDef, is_layer: Callable[[cst.Call], bool], aliases: dict[str, str]
) -> ClassModel:
    bases = [aliases.get(name, name) for arg in node.bases if (name := last_name(arg.value))]
    methods = {
        stmt.name.value: stmt for stmt in suite_body(node.body) if isinstance(stmt, cst.FunctionDef)
    }
    model = ClassModel(node, bases, methods, is_layer=is_layer)
    for name, method in methods.items():
        model.mentions[name] = _mentions(method)
        for sub in _walk_all(method.body):
            stored = _stored(sub)
            if stored is not None:
                attr, value = stored
                model.stores.setdefault(attr, set()).update(
                    n.attr.value for n in _walk_all(value) if _is_self_attr(n)
                )
    init = methods.get("__init__")
    if init is not None:
        builders = self_call_closure(init, methods)
        model.spells_delay = any(_spells_delay(builder) for builder in builders)
        # Assigned, appended one at a time, set by key or registered by name.
        model.layers.update(layer_builds.filled_layers(builders, is_layer))
        eager_only = layer_builds.parameters_only(methods.values(), set(model.layers), _walk_all)
        for attr in eager_only:
            del model.layers[attr]
    return model


def self_call_closure(
    method: cst.FunctionDef, methods: dict[str, cst.FunctionDef]
) -> list[cst.FunctionDef]:
    """``method`` and the ``methods`` of its class it calls through ``self.``, transitively:
    a layer built in ``self._build_projections(config)`` from ``__init__`` is built at
    construction too, and a piece ``backward_dw`` calls is part of its work."""
    found, pending = [], [method]
    while pending:
        current = pending.pop()
        if any(current is f for f in found):
            continue
        found.append(current)
        pending.extend(
            methods[n.func.attr.value]
            for n in patterns.walk(current.body)
            if type(n) is cst.Call and _is_self_attr(n.func) and n.func.attr.value in methods
        )
    return found


def _mentions(method: cst.FunctionDef) -> set[str]:
    live = [n for stmt in _live_statements(method.body) for n in patterns.walk(stmt)]
    found = {n.attr.value for n in live if _is_self_attr(n)}
    if "super" in {patterns.callee_name(n) for n in live}:
        found.add(SUPER)
    if _only_raises(method):
        found.add(RAISES)
    return found


# Statements after which the rest of their block never runs.
_ENDS_BLOCK = (cst.Return, cst.Raise, cst.Continue, cst.Break)


def _live_statements(block) -> list[cst.CSTNode]:
    """The statements of a block that may run and do something, nested blocks opened up:
    none after a ``return`` / ``raise`` / ``continue`` / ``break`` of the same block, and no
    statement that only names something (``self.fc2.backward_dw`` without the call)."""
    found: list[cst.CSTNode] = []
    for stmt in suite_body(block):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if type(small) is cst.Expr and type(small.value) in (cst.Attribute, cst.Name):
                    continue
                found.append(small)
                if type(small) in _ENDS_BLOCK:
                    return found
            continue
        found.extend(_live_compound(stmt))
    return found


def _live_compound(stmt) -> list[cst.CSTNode]:
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return [stmt]  # walked as a whole, as before
    if type(stmt) is cst.If:
        found = [stmt.test, *_live_statements(stmt.body)]
        orelse = stmt.orelse
        if type(orelse) is cst.If:
            found += _live_compound(orelse)
        elif orelse is not None:
            found += _live_statements(orelse.body)
        return found
    header = [getattr(stmt, field, None) for field in ("test", "iter", "target", "subject")]
    found = [part for part in header if isinstance(part, cst.CSTNode)]
    found += list(getattr(stmt, "items", ()))  # a ``with``'s context managers
    for suite in compound_suites(stmt):
        found += _live_statements(suite)
    return found


def _only_raises(method: cst.FunctionDef) -> bool:
    """The body is a ``raise`` (after a docstring, if any)."""
    body = [
        s
        for s in suite_body(method.body)
        if not (
            isinstance(s, cst.SimpleStatementLine)
            and all(
                isinstance(x, cst.Expr) and isinstance(x.value, cst.SimpleString) for x in s.body
            )
        )
    ]
    return (
        len(body) == 1
        and isinstance(body[0], cst.SimpleStatementLine)
        and isinstance(body[0].body[0], cst.Raise)
    )


def _walk_all(node: cst.CSTNode):
    """Every node, nested functions and lambdas included (a closure stored in an attribute
    runs with the class's ``self``)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(patterns.children(current))


def _stored(node: cst.CSTNode) -> tuple[str, cst.CSTNode] | None:
    """(attribute, value) for ``self.a = v``, ``self.a[k] = v``, ``self.a += v`` and
    ``self.a.append(v)``."""
    kind = type(node)  # exact types: isinstance on libcst's ABC node classes is slow
    if (kind is cst.Assign or kind is cst.AugAssign or kind is cst.AnnAssign) and (
        node.value is not None
    ):
        for target in patterns.assignment_targets(node):
            while type(target) is cst.Subscript:
                target = target.value
            if _is_self_attr(target):
                return target.attr.value, node.value
    if (
        type(node) is cst.Call
        and type(node.func) is cst.Attribute
        and node.func.attr.value in STORING_METHODS
        and _is_self_attr(node.func.value)
    ):
        return node.func.value.attr.value, node
    return None


def _spells_delay(init: cst.FunctionDef) -> bool:
    if any(p.name.value == DELAY for p in init.params.params + init.params.kwonly_params):
        return True
    return any(
        (isinstance(n, cst.Attribute) and n.attr.value == DELAY)
        or (isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value == DELAY)
        for n in patterns.walk(init.body)
    )


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


def _is_self_attr(node: cst.CSTNode) -> bool:
    return (
        type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self"
    )


def last_name(expr: cst.CSTNode) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
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
