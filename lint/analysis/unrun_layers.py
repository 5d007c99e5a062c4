"""Delayed weight layers whose forward never runs but whose ``backward_dw`` is called (issue
#19, class 6, GMLP040): an "absorbed" projection.

A class builds ``self.X`` as a weight layer with delayed wgrad (handed
``delay_wgrad_compute`` or a config that carries it) and then uses only its parameters
(``self.X.weight``, viewed or multiplied in by hand), never ``self.X(...)``. The layer's
backward never runs, so it queues no weight-gradient work: its ``backward_dw()`` pops an
empty store (an error) or does nothing, while the weight's gradient flows through autograd
on ``.weight``, outside the delayed schedule and its main_grad bookkeeping. Megatron-LM
60704e19's absorbed multi-latent attention built its K/V up-projection so.

Read on the class model of ``classes.py`` (methods resolved through the bases the file, or
the run's summaries, know). A layer counts as run when any method of the class, of a base
it inherits from, or of a subclass in the file mentions ``self.X`` other than for its
parameters, its ``backward_dw`` or an assignment to it; a base of another file counts as
running it when a method ``backward_dw`` does not reach mentions it at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .class_model import walk_all
from .classes import (
    BACKWARD_DW,
    DELAY,
    LAYER_WORDS,
    SPEC_BUILDERS,
    SUPER,
    ClassIndex,
    ClassModel,
    Model,
    Outside,
    class_index,
    class_index_with_run,
    layer_test,
    self_call_closure,
)
from .walking import children

# What may be read off a layer without running it: its parameters and its sizes (and any
# attribute that is not called and does not name its forward).
PARAMETER_ATTRS = frozenset({"weight", "bias", "in_features", "out_features"})
# Arguments that carry the model's configuration, and so its delay mode.
CONFIG_WORDS = ("config", "cfg")
# Text a file must hold for a class of it to read a layer's parameters.
_PARAMETER_TEXT = ("weight", "bias")
# Calls that only inspect an object handed to them: ``self`` given to one runs no layer.
_INSPECTING = frozenset(
    {"getattr", "hasattr", "setattr", "isinstance", "super", "type", "id", "print", "repr", "str"}
)
# Uses of ``self.X.backward_dw`` that drive the layer: called where it stands, or kept (in
# a container that ``backward_dw`` walks: ``reached_attributes`` followed the store). Under
# a test that mentions the layer they are "guarded-" and drive nothing.
DRIVES = frozenset({"dw", "dw-kept"})


@dataclass(frozen=True)
class UnrunLayer:
    attr: str
    owner: str  # the class judged (its construction builds the layer, here or in a base)
    node: cst.CSTNode  # where to report: the backward_dw reference, or the build
    build: cst.CSTNode  # the assignment that builds it


def unrun_layers(context) -> list[UnrunLayer]:
    """For ``context.shared``: the delayed layers of the file's classes that no method runs
    but whose ``backward_dw`` the class's ``backward_dw`` calls."""
    source = context.source
    if BACKWARD_DW not in source and not context.class_facts:
        return []  # no backward_dw here, nor in a base of another file
    if not any(word in source for word in _PARAMETER_TEXT):
        return []
    index = context.shared(class_index_with_run if context.class_facts else class_index)
    is_layer = context.shared(layer_test)
    found: list[UnrunLayer] = []
    built: dict[str, dict[str, cst.CSTNode]] = {}  # class -> its own __init__'s builds
    for model in index.classes.values():
        if index.owner(model, BACKWARD_DW) is None:
            continue
        builds = _inherited_builds(index, model, is_layer, built)
        # Only a layer whose parameters the text reads can be consumed through them.
        builds = {a: n for a, n in builds.items() if _reads_parameters(source, a)}
        if not builds:
            continue
        reached = index.reached_attributes(model, BACKWARD_DW)
        found.extend(_judge(index, model, builds, reached))
    return found


def _reads_parameters(source: str, attr: str) -> bool:
    """``attr.weight``, ``attr, "weight"``, ``attr").bias``: the text may read the layer's
    parameters."""
    return re.search(rf"\b{re.escape(attr)}\W{{1,4}}(?:weight|bias)\b", source) is not None


def _inherited_builds(index, model, is_layer, built) -> dict[str, cst.CSTNode]:
    """The delayed layers the construction of ``model`` builds: its nearest ``__init__``
    of the file and those above it that ``super().__init__`` reaches."""
    found: dict[str, cst.CSTNode] = {}
    for current in index.lineage(model):
        if "__init__" not in current.mentions:
            continue
        if not isinstance(current, ClassModel):
            break
        if current.name not in built:
            built[current.name] = _delayed_builds(current, is_layer)
        for attr, node in built[current.name].items():
            found.setdefault(attr, node)
        if SUPER not in current.mentions["__init__"]:
            break
    return found


# The methods through which a module's layers run when it is called.
RUNNING_METHODS = frozenset({"forward", "__call__"})


def _judge(index: ClassIndex, model: ClassModel, builds, reached) -> list[UnrunLayer]:
    closure = reached | {BACKWARD_DW}
    effective = _effective_methods(index, model)
    # With no forward of the class or of a base the run holds, its layers run through code
    # not seen (a base of another package, a class shown without its forward): judged only
    # are layers that some method of its lineage, overridden or not, is seen to run (a base's
    # projection the class overrides with a bare matmul on the weight).
    seen_run = None
    if not any(name in RUNNING_METHODS for _owner, name in effective):
        seen_run = {
            attr
            for current in index.lineage(model)
            if isinstance(current, ClassModel)
            for method in current.methods.values()
            for attr, _ref, use in _references(method)
            if use == "run"
        }
    subclasses = [
        c
        for c in index.classes.values()
        if c is not model and any(b is model for b in index.lineage(c))
    ]
    syntax = [owner.methods[m] for owner, m in effective if isinstance(owner, ClassModel)]
    syntax += [m for c in subclasses for m in c.methods.values()]
    runs: set[str] = set()
    drives: dict[str, cst.CSTNode] = {}  # attr -> its first unguarded dw reference
    for method in syntax:
        in_closure = method.name.value in closure
        for attr, ref, use in _references(method):
            if attr == "*":
                return []  # ``getattr(self, name)``: any layer may run
            if use == "run":
                runs.add(attr)
            elif use in DRIVES and (in_closure or (use == "dw-kept" and attr in reached)):
                drives.setdefault(attr, ref)
    for owner, name in effective:
        if isinstance(owner, Outside):
            mentioned = owner.mentions.get(name, set()) & builds.keys()
            if name in closure:
                for attr in mentioned:
                    drives.setdefault(attr, builds[attr])
            else:
                runs |= mentioned
    out = []
    for attr in sorted(builds.keys() - runs):
        if attr in drives and (seen_run is None or attr in seen_run):
            out.append(UnrunLayer(attr, model.name, drives[attr], builds[attr]))
    return out


def _effective_methods(index: ClassIndex, model: ClassModel) -> list[tuple[Model, str]]:
    """(class, method) for each definition that runs for ``model``: the nearest one of each
    name, and those above it that a ``super()`` call reaches."""
    lineage = index.lineage(model)
    names = {name for current in lineage for name in current.mentions}
    found = []
    for name in names:
        for current in lineage:
            if name not in current.mentions:
                continue
            found.append((current, name))
            if SUPER not in current.mentions[name]:
                break
    return found


def _delayed_builds(model: ClassModel, is_layer) -> dict[str, cst.CSTNode]:
    """attribute -> its assignment, for ``self.X = <call>`` in ``__init__`` (and the
    methods it calls through ``self.``) building a weight layer whose wgrad is delayed."""
    builders = self_call_closure(model.methods["__init__"], model.methods)
    switched_off = _configs_switched_off(builders)
    found: dict[str, cst.CSTNode] = {}
    for builder in builders:
        for node in patterns.walk(builder.body):
            if type(node) is not cst.Assign or type(node.value) is not cst.Call:
                continue
            call = node.value
            if not (is_layer(call) or _spec_names_layer(call)):
                continue
            if not _delays(call, switched_off):
                continue
            for target in node.targets:
                attr = patterns.attribute_of(target.target, "self")
                if attr is not None:
                    found.setdefault(attr, node)
    return found


def _spec_names_layer(call: cst.Call) -> bool:
    """``build_module(specs["linear_kv"], ...)``: a spec looked up under a layer's name."""
    if patterns.callee_name(call) not in SPEC_BUILDERS:
        return False
    spec = patterns.positional_args(call)
    if not spec or type(spec[0].value) is not cst.Subscript:
        return False
    for element in spec[0].value.slice:
        key = getattr(element.slice, "value", None)
        name = patterns.string_value(key) if key is not None else None
        if name and any(word in name.lower() for word in LAYER_WORDS):
            return True
    return False


def _delays(call: cst.Call, switched_off: set[str]) -> bool:
    """The build is handed a delay mode that is not a literal False, or (none given) a
    configuration that has not been switched off here."""
    delay = patterns.keyword_arg(call, DELAY)
    if delay is not None:
        return not patterns.is_false_literal(delay.value)
    for arg in call.args:
        spelled = _spelled(arg.value)
        if spelled is None:
            continue
        word = (arg.keyword.value if arg.keyword is not None else spelled).lower()
        if any(w in word.rsplit(".", 1)[-1] for w in CONFIG_WORDS):
            return spelled not in switched_off
    return False


def _configs_switched_off(builders) -> set[str]:
    """Names (``cfg``, ``self.cfg``) given ``X.delay_wgrad_compute = False`` or bound to a
    call handed ``delay_wgrad_compute=False`` (``dataclasses.replace``)."""
    off: set[str | None] = set()
    for builder in builders:
        for node in patterns.walk(builder.body):
            if type(node) is cst.Assign:
                for target in node.targets:
                    inner = target.target
                    if patterns.is_attr(inner, DELAY) and patterns.is_false_literal(node.value):
                        off.add(_spelled(inner.value))
                if type(node.value) is cst.Call:
                    delay = patterns.keyword_arg(node.value, DELAY)
                    if delay is not None and patterns.is_false_literal(delay.value):
                        off.update(_spelled(t.target) for t in node.targets)
            elif type(node) is cst.Expr:
                setting = patterns.attribute_set(node, DELAY)
                if setting is not None and patterns.is_false_literal(setting[1]):
                    off.add(_spelled(setting[0]))
    off.discard(None)
    return off  # type: ignore[return-value]


def _spelled(expr: cst.CSTNode) -> str | None:
    """``name`` or ``self.name``."""
    if type(expr) is cst.Name:
        return expr.value
    attr = patterns.attribute_of(expr, "self")
    return f"self.{attr}" if attr is not None else None


def _references(method: cst.FunctionDef) -> Iterator[tuple[str, cst.CSTNode, str]]:
    """(attribute, node, use) for each ``self.X`` (or ``getattr(self, "X")``) of the method,
    nested functions included; use is "param" (its parameters or sizes read), "dw" (its
    ``backward_dw`` called; "dw-kept" when not called there), "guarded-" before either
    (under a test that mentions the layer), "set" (an
    assignment to it) or "run" (anything else). ``getattr(self, <not a literal>)`` and
    ``self`` handed to a function (``fused_forward(self, x)``: it may run any layer) yield
    attribute "*"."""
    parents: dict[int, cst.CSTNode] = {}
    for node in walk_all(method.body):
        for child in children(node):
            parents[id(child)] = node
    for node in walk_all(method.body):
        if type(node) is cst.Name and node.value == "self" and _handed_on(node, parents):
            yield "*", node, "run"
            continue
        attr = _self_attr(node)
        if attr is None:
            continue
        parent = parents.get(id(node))
        yield attr, node, _use(node, parent, parents, attr)


def _handed_on(name: cst.Name, parents) -> bool:
    """``self`` is an argument of a call that may use its layers (not ``getattr``,
    ``isinstance``, ``super`` and the like)."""
    arg = parents.get(id(name))
    call = parents.get(id(arg))
    return (
        type(arg) is cst.Arg
        and type(call) is cst.Call
        and patterns.callee_name(call) not in _INSPECTING
    )


def _self_attr(node: cst.CSTNode) -> str | None:
    if type(node) is cst.Attribute:
        return patterns.attribute_of(node, "self")
    if type(node) is cst.Call and patterns.callee_name(node) == "getattr":
        args = patterns.positional_args(node)
        if len(args) >= 2 and type(args[0].value) is cst.Name and args[0].value.value == "self":
            return patterns.string_value(args[1].value) or "*"
    return None


def _use(node, parent, parents, attr) -> str:
    kind = type(parent)
    if kind is cst.AssignTarget or (kind is cst.AnnAssign and parent.target is node):
        return "set"
    if kind is cst.Attribute and parent.value is node:
        name = parent.attr.value
        grand = parents.get(id(parent))
        called = type(grand) is cst.Call and grand.func is parent
        if name == BACKWARD_DW:
            use = "dw" if called else "dw-kept"
            return f"guarded-{use}" if _guarded(parent, parents, attr) else use
        if name in PARAMETER_ATTRS:
            return "param"  # ``self.X.weight.view(...)``: a parameter, however used
        if "forward" in name or "call" in name or _chain_called(parent, parents):
            return "run"  # its forward, a method, or its machinery (``wgrad_store.put``)
        return "param"  # state read off the layer (``self.X.tp_size``): it does not run it
    if kind is cst.Arg:
        call = parents.get(id(parent))
        if patterns.callee_name(call) == "getattr":
            args = patterns.positional_args(call)
            if len(args) >= 2 and args[0].value is node:
                name = patterns.string_value(args[1].value)
                if name in PARAMETER_ATTRS:
                    return "param"
    return "run"


def _chain_called(node, parents) -> bool:
    """``node`` (``self.X.a``) starts a chain of attributes and subscripts that is called:
    ``self.X.a(...)``, ``self.X.a.b[0].c(...)``."""
    current = node
    while True:
        parent = parents.get(id(current))
        kind = type(parent)
        if (kind is cst.Attribute or kind is cst.Subscript) and parent.value is current:
            current = parent
            continue
        return kind is cst.Call and parent.func is current


def _guarded(node, parents, attr) -> bool:
    """Under an ``if`` (or ``and`` / conditional expression) whose test mentions ``self.X``."""
    current = node
    while (parent := parents.get(id(current))) is not None:
        kind = type(parent)
        test = None
        if kind is cst.If or kind is cst.IfExp or kind is cst.While:
            test = parent.test if parent.test is not current else None
        elif kind is cst.BooleanOperation and parent.right is current:
            test = parent.left
        if test is not None and any(_self_attr(n) == attr for n in walk_all(test)):
            return True
        current = parent
    return False
