"""A ``backward_dw`` that returns before its work on a feature switch (issue #19, class 6).

``backward_dw`` is called by the schedule once per step for every layer that deferred its
weight gradient. An exit at its top is right when it says there is nothing deferred (``if
not self.delay_wgrad_compute: return``, ``if not self.need_backward_dw(): return``, ``if
self.wgrad_store.context.empty(): return``), nothing to compute here (``if self.fc is
None``, ``if not self.local_experts``, ``if not self.post_process``, the caller asked for
nothing: ``if not (routed_experts or shared_experts)``; an arm that replays a graph before
returning is not a bare exit). An exit on a feature switch, off (``if not
self.config.moe_shared_expert_overlap: return`` in front of ``super().backward_dw()``, blind
corpus 21) or on, in front of the class's own inherited work (``if
self.config.moe_shared_expert_overlap: return`` before ``super().backward_dw()``, blind
corpus 22, where the overlap should only move the work to a side stream; before a member's
``self.shared_experts.backward_dw()`` it may say another path computes it, as Megatron's
MoE layer does), leaves every deferred weight gradient of the layer uncomputed in one
configuration: its wgrad never reaches main_grad.

Per method named ``backward_dw`` of a class: its top-level statements in order, up to the
first one that calls a piece (a call whose name ends in ``_dw`` or contains ``backward``:
``super().backward_dw()``, ``self.fc1.backward_dw()``, ``self._backward_qkv_proj()``); an
``if`` among them without ``else`` whose body is a bare ``return`` (or ``return None``,
after logging calls at most) and whose test is a switch (a name or attribute: only before a
first piece that is the class's own ``super()`` / ``Base.backward_dw(self)``), or a negation
of something (``not X``, ``X is False``, ``X == False``), that is not about the deferred
work. About the deferred work, or about whether there is any: a name or attribute (or
string, or call name) with a token starting with one of ``DEFERRED_WORDS`` or spelling one
of ``DEFERRED_PHRASES``, also through what
the class assigns to a ``self`` attribute the test reads (``self.enabled =
cfg.delay_wgrad_compute``) or the function to a local (``is_replay = ... cuda_graphs``); a
``self`` attribute the class fills with layers (``ModuleList``, ``build_module``, a
``*Linear`` / ``*MLP`` / ``*Experts``); a parameter of the method (what the caller asked
for); ``is`` / ``is not``, ``hasattr``, ``len`` and comparisons with a number; a ``self``
attribute the work after it uses too (``if not self.local_experts: return`` before a loop
over them). A class whose ``__init__`` hands ``delay_wgrad_compute`` to its base is
GMLP038's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from . import patterns
from .layer_builds import calls_base_version, is_self_attr
from .module import ModuleContext, Unit

PIECE = "backward_dw"
# Token prefixes of a test about the deferred work itself (its mode, store, queue, graph,
# training or freezing) or about whether this layer or stage has any (``num_``, a pipeline
# stage's ``post_process``).
DEFERRED_WORDS = (
    "delay", "wgrad", "dw", "store", "defer", "graph", "pending", "queue", "empty", "need",
    "skip", "train", "freeze", "frozen", "process", "stage", "pipeline", "num", "count",
    "disable", "enable",  # the layer (an adapter) switched off ran nothing, deferred nothing
)  # fmt: skip
DEFERRED_PHRASES = ("requires_grad", "backward_dw")
# A switch about where the weight gradient goes (``fuse_wgrad_accumulation``,
# ``gradient_accumulation_fusion``: into main_grad by the GEMM) says nothing about whether it
# was deferred: the seed's wrong flag. (``has_accumulated_wgrad`` is about the work.)
WHERE_IT_GOES = "accumulat"
# What a class fills an attribute with when it holds layers (``if not self.experts``: none).
LAYER_BUILDS = ("ModuleList", "ModuleDict", "Sequential", "build_module")
LAYER_WORDS = ("Linear", "MLP", "Attention", "Experts", "Layer", "Proj")
_TOKENS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def skipped_pieces(context: ModuleContext) -> list[cst.BaseExpression]:
    """For ``context.shared``: the ``return`` statements of the early exits found (where each
    is reported: the exit is the slip, the test may be right for something else)."""
    found = []
    for unit in context.units:
        owner = unit.owner
        if type(owner) is not cst.FunctionDef or owner.name.value != PIECE:
            continue
        cls = context.class_of(unit)
        if cls is None or _hands_delay_to_base(cls):
            continue  # GMLP038 judges the backward_dw of a class whose base delays for it
        found.extend(_early_exits(unit, _self_attribute_values(cls)))
    return found


def _early_exits(unit: Unit, attributes) -> Iterator[cst.BaseExpression]:
    parameters = {p.name.value for p in unit.owner.params.params} | {
        p.name.value for p in unit.owner.params.kwonly_params
    }
    parameters -= {"self", "cls"}  # what the caller asks for, not the object itself
    exits = []
    for index, stmt in enumerate(unit.body):
        if _calls_piece(stmt):
            # the work starts here: the exits before it skip all of it, unless the test asked
            # whether what the work uses is there (``if not self.experts: return``, then
            # ``for expert in self.experts: expert.backward_dw()``)
            used = _self_chains(unit.body[index:])
            own = _runs_own_work(stmt)
            # Before the layer's own store popped inline, a switch that is on is reported only
            # when it says where the gradient goes (``if self.fuse_wgrad_accumulation:
            # return``), even where the work reads it again to pick ``.grad``: another switch
            # that is on may say nothing was stored (``if self.lora_only: return``).
            popped = not own and any(
                type(n) is cst.Call and _pops_store(n) for n in patterns.walk(stmt)
            )
            yield from (
                exit_
                for exit_, chains, positive, switch in exits
                if (not positive and not chains & used)
                or (positive and own and not chains & used)
                or (positive and popped and _says_where_it_goes(switch))
            )
            return
        if type(stmt) is not cst.If or stmt.orelse is not None:
            continue
        exit_ = _bare_return(stmt.body)
        negated = _negated(stmt.test)
        switch = negated or _switch(stmt.test)
        if exit_ is None or switch is None:
            continue
        if not _about_deferred_work(switch, unit, attributes, parameters):
            exits.append((exit_, _self_chains([switch]), negated is None, switch))


def _runs_own_work(stmt) -> bool:
    """The first piece is the class's own inherited work (``super().backward_dw()``,
    ``Base.backward_dw(self)``), not a member's: a container may leave a member's flush to
    the path a feature takes (``if self.shared_expert_overlap: return`` before
    ``self.shared_experts.backward_dw()``, Megatron's MoE layer), the layer itself may not."""
    return any(
        type(sub) is cst.Call
        and type(sub.func) is cst.Attribute
        and sub.func.attr.value == PIECE
        and calls_base_version(sub)
        for sub in patterns.walk(stmt)
    )


def _self_chains(nodes) -> set[str]:
    """``self.A`` for each attribute chain on ``self`` the nodes read (``A`` its first
    attribute: ``self.config.x`` is ``self.config``)."""
    found = set()
    for node in nodes:
        found.update(sub.attr.value for sub in patterns.walk(node) if is_self_attr(sub))
    return found


def _switch(test) -> cst.BaseExpression | None:
    """X for a test that is a switch read as it stands (``self.config.overlap``, ``flag``):
    leaving when a feature is on, before the class's own inherited work, skips it as surely
    as leaving when it is off (blind corpus 22: ``if self.config.moe_shared_expert_overlap:
    return`` before ``super().backward_dw()``, where the overlap should only move the work to
    a side stream)."""
    if type(test) in (cst.Name, cst.Attribute):
        return test
    if type(test) is cst.Call:
        name = patterns.callee_name(test)
        args = patterns.positional_args(test)
        if name == "bool" and len(args) == 1:
            return _switch(args[0].value)  # ``bool(self.config.overlap)``
        if name == "getattr" and len(args) == 3 and patterns.is_false_literal(args[2].value):
            return test  # ``getattr(self.config, "overlap", False)``
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if type(target.operator) in (cst.Is, cst.Equal) and (
            type(target.comparator) is cst.Name and target.comparator.value == "True"
        ):
            return _switch(test.left)  # ``S == True``, ``S is True``
    return None


def _negated(test) -> cst.BaseExpression | None:
    """X for ``not X``, ``X is False``, ``X == False``; None for any other test."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return test.expression
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if type(target.operator) in (cst.Is, cst.Equal) and (
            type(target.comparator) is cst.Name and target.comparator.value == "False"
        ):
            return test.left
    return None


def _hands_delay_to_base(cls: cst.ClassDef) -> bool:
    """``super().__init__(..., delay_wgrad_compute=...)`` in the class's ``__init__``."""
    for stmt in cls.body.body:
        if type(stmt) is cst.FunctionDef and stmt.name.value == "__init__":
            return any(
                type(sub) is cst.Arg
                and sub.keyword is not None
                and sub.keyword.value == "delay_wgrad_compute"
                for sub in patterns.walk(stmt)
            )
    return False


def _self_attribute_values(cls: cst.ClassDef) -> dict[str, list[cst.BaseExpression]]:
    """``self.X = value`` anywhere in the class's methods: what ``self.X`` in a test holds
    (``self.enabled = cfg.delay_wgrad_compute``)."""
    found: dict[str, list[cst.BaseExpression]] = {}
    for method in cls.body.body:
        if type(method) is not cst.FunctionDef:
            continue
        for stmt in method.body.body:
            for sub in patterns.walk(stmt):
                if type(sub) is not cst.Assign:
                    continue
                for target in sub.targets:
                    if is_self_attr(target.target):
                        found.setdefault(target.target.attr.value, []).append(sub.value)
    return found


def _calls_piece(node) -> bool:
    for sub in patterns.walk(node):
        if type(sub) is cst.Call:
            name = patterns.callee_name(sub) or ""
            if name.endswith("_dw") or "backward" in name or _pops_store(sub):
                return True
    return False


def _pops_store(call: cst.Call) -> bool:
    """``self.wgrad_store.pop()``: the layer's own deferred work, taken from its store (not
    ``self._rng_restore_stack.pop()``)."""
    func = call.func
    if type(func) is not cst.Attribute or func.attr.value != "pop":
        return False
    owner = func.value.attr.value if type(func.value) is cst.Attribute else None
    words = (owner or "").lower().split("_")
    return any(w.endswith("store") and not w.endswith("restore") for w in words)


# Calls a bare exit may make first: it only says why it leaves.
LOGGING_CALLS = frozenset({"debug", "info", "warning", "warn", "print", "log", "warning_once"})


def _bare_return(body) -> cst.Return | None:
    """The ``return`` / ``return None`` ending a body that does nothing else but log (an
    indented block, or the one-line ``if S: return``)."""
    if type(body) is cst.SimpleStatementSuite:
        small = list(body.body)
    else:
        small = []
        for stmt in body.body:
            if type(stmt) is not cst.SimpleStatementLine:
                return None
            small.extend(stmt.body)
    if not small or type(small[-1]) is not cst.Return:
        return None
    if not all(
        type(s) is cst.Expr and patterns.callee_name(s.value) in LOGGING_CALLS for s in small[:-1]
    ):
        return None
    value = small[-1].value
    return small[-1] if value is None or patterns.is_none_like(value) else None


def _about_deferred_work(test, unit: Unit, attributes, parameters: set[str]) -> bool:
    """The test reads a term of the deferred work (or of whether there is any), itself or
    through what the class put in a ``self`` attribute or the function in a local."""
    if _spells_deferred_work(test) or any(
        type(n) is cst.Name and n.value in parameters for n in patterns.walk(test)
    ):
        return True
    for sub in patterns.walk(test):
        if is_self_attr(sub):
            values = attributes.get(sub.attr.value, ())
        elif type(sub) is cst.Name:
            values = [d.value for d in unit.graph.defs if d.name == sub.value and d.value]
        else:
            continue
        if any(_spells_deferred_work(v) or _builds_layers(v) for v in values):
            return True
    return False


def _builds_layers(value) -> bool:
    name = patterns.callee_name(value) or ""
    return name in LAYER_BUILDS or any(word in name for word in LAYER_WORDS)


def _spells_deferred_work(test) -> bool:
    for sub in patterns.walk(test):
        kind = type(sub)
        if kind is cst.Comparison and any(
            type(c.operator) in (cst.Is, cst.IsNot)
            or type(c.comparator) in (cst.Integer, cst.Float)
            for c in sub.comparisons
        ):
            return True
        if kind is cst.Call and patterns.callee_name(sub) in ("hasattr", "len"):
            return True
        word = _word_of(sub)
        if word and _deferred_word(word):
            return True
    return False


def _word_of(node) -> str | None:
    """The word a name, an attribute or a string (``getattr``'s) spells."""
    kind = type(node)
    if kind is cst.Name:
        return node.value
    if kind is cst.Attribute:
        return node.attr.value
    if kind is cst.SimpleString:
        return patterns.string_value(node)
    return None


def _says_where_it_goes(switch) -> bool:
    """The switch names where the weight gradient goes (``fuse_wgrad_accumulation``, also
    as ``getattr``'s string)."""
    return any(_where_it_goes(_word_of(sub) or "") for sub in (switch, *patterns.walk(switch)))


def _where_it_goes(word: str) -> bool:
    lowered = word.lower()
    return WHERE_IT_GOES in lowered and ("fuse" in lowered or "fusion" in lowered)


def _deferred_word(word: str) -> bool:
    lowered = word.lower()
    if any(phrase in lowered for phrase in DEFERRED_PHRASES):
        return True
    if _where_it_goes(word):
        return False
    return any(
        token.lower().startswith(prefix)
        for token in _TOKENS.findall(word)
        for prefix in DEFERRED_WORDS
    )
