"""Overrides that keep a class's own delayed weight gradients from being computed (issue
#19, class 6): ``backward_dw`` overridden in a class whose base was built with
``delay_wgrad_compute``, without running the base's version or doing its work; and a piece
that an inherited ``backward_dw`` calls to compute the class's own weights (it uses what it
pops, writes a ``.grad`` or main_grad), overridden with an empty body.

A base built with delayed wgrad (``super().__init__(..., delay_wgrad_compute=X)``, X not a
literal False) stores its own weights' wgrad work in backward and computes it in its
``backward_dw`` (Transformer Engine's ``TransformerEngineBaseModule.backward_dw`` pops the
store and hands the result on). An override *does the work* when it (or a method of the
class it calls through ``self.``) calls ``super().backward_dw()`` / ``Base.backward_dw(self)``,
uses what it pops (``x = store.pop()``, not a bare ``store.pop()``), writes main_grad or a
``.grad``, or only raises (the class refuses the schedule loudly).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from . import patterns, positional_delay, unrun_store_items
from .assigned_methods import assigned_methods
from .classes import BACKWARD_DW, DELAY, ClassModel, class_index, self_call_closure
from .module import ModuleContext, suite_body
from .override_gates import bindings_of, ends_in_return, unrelated_gate
from .positional_delay import calls_base as _calls_base
from .skipped_pieces import LOGGING_CALLS
from .wgrad_pieces import is_abstract, is_empty

# The predicate Transformer Engine's ``backward_dw`` asks first (``if not
# self.need_backward_dw(): return``). Its backward stores the work by the store's own switch
# (``ctx.wgrad_store.delay_wgrad_compute()``), not by this predicate: a subclass that makes
# it say no keeps the stored work from ever being computed.
TE_PREDICATES = frozenset({"need_backward_dw"})
# Words of a predicate about the delay itself (``is_wgrad_delayed``, ``_delay_wgrad``).
DELAY_WORDS = ("delay", "backward_dw", "defer")


@dataclass(frozen=True)
class DroppedWork:
    class_name: str
    method: cst.FunctionDef  # the override
    base: str  # the class whose work it no longer runs ("" for a base built with the delay)
    # Where the class binds the override: the ``def``'s name, or the target of a class-level
    # assignment (``backward_dw = lambda self: None``).
    at: cst.CSTNode | None = None
    predicate: bool = False  # a predicate ``backward_dw`` asks, made to always say no
    # The override runs the base's version only under this ``if``, whose test is not about
    # the delay (``if self.fuse_wgrad_accumulation: super().backward_dw()``).
    gate: cst.If | None = None
    gate_false: bool = False  # the base's version runs when the gate's test is false
    # The override takes the stored work out of the store's queue without running it (``at``:
    # the call that takes it).
    dequeued: bool = False
    # The override pops the store and never reads what the pop hands back (``at``: the
    # ``del`` that drops it, or the pop).
    dropped: bool = False


def dropped_work(context: ModuleContext) -> list[DroppedWork]:
    """For ``context.shared``: every override of the file that drops delayed wgrad work."""
    index = context.shared(class_index)
    found: list[DroppedWork] = []
    for model in index.classes.values():
        assigned = assigned_methods(model.node, context)
        # a ``def`` and an assignment of one name: the ``def`` is what the rules read
        methods = {name: a.method for name, a in assigned.items()} | model.methods
        where = {name: a.target for name, a in assigned.items()}
        found.extend(_predicates_said_no(index, model, methods, where))
        own = methods.get(BACKWARD_DW)
        if own is not None:
            dequeued = (
                unrun_store_items.dequeued_unrun(own) if _builds_delayed_store(model) else None
            )
            if dequeued is not None:
                found.append(DroppedWork(model.name, own, "", dequeued, dequeued=True))
                continue
            if _builds_delayed_store(model):
                at = unrun_store_items.dropped_pop_results(model.node, own)
                if at is not None:
                    found.append(DroppedWork(model.name, own, "", at, dropped=True))
                    continue
            own_store = _builds_delayed_store(model) and _only_fires_hooks(own)
            built = _base_built_delayed(model) or positional_delay.delay_to_known_base(index, model)
            if not is_abstract(own) and (built or own_store):
                if not _does_work(model, own):
                    found.append(DroppedWork(model.name, own, "", where.get(BACKWARD_DW)))
                elif (gated := _gated_base_call(model, own)) is not None:
                    gate, false = gated
                    found.append(
                        DroppedWork(model.name, own, "", gate.test, gate=gate, gate_false=false)
                    )
            continue
        owner = index.owner(model, BACKWARD_DW)
        if not isinstance(owner, ClassModel) or owner is model:
            continue
        for name in sorted(_pieces(owner, owner.methods[BACKWARD_DW])):
            override = methods.get(name)
            original = owner.methods.get(name)
            if (
                override is not None
                and original is not None
                and is_empty(override)
                and not is_abstract(override)
                and _computes_own(owner, original)
            ):
                found.append(DroppedWork(model.name, override, owner.name, where.get(name)))
    return found


def _predicates_said_no(index, model: ClassModel, methods, where) -> list[DroppedWork]:
    """Overrides that make a predicate the inherited ``backward_dw`` asks before computing
    always say no (``def need_backward_dw(self): return False``), in a class whose base was
    built with the delay or whose in-file base asks that predicate only there."""
    own = methods.get(BACKWARD_DW)
    if own is not None and not any(
        type(n) is cst.Call and _calls_base(n, BACKWARD_DW) for n in patterns.walk(own.body)
    ):
        return []  # its own backward_dw does not run the base's: the base's asks nothing
    # the nearest base's backward_dw (the class's own one runs it, or is inherited)
    owner = next((c for c in index.lineage(model)[1:] if BACKWARD_DW in c.mentions), None)
    if isinstance(owner, ClassModel):
        base_dw = owner.methods[BACKWARD_DW]
        if not (_base_built_delayed(model) or _stored_elsewhere(owner, base_dw)):
            return []  # nothing shows work stored for backward_dw to compute
        asked = {
            n
            for n in _pieces(owner, base_dw)
            if _about_delay(n) and _no_skips_work(base_dw, n) and not _base_says_no(owner, n)
        }
        asked -= _asked_elsewhere(owner)
    elif owner is None and _base_built_delayed(model):
        asked = set(TE_PREDICATES)
    else:
        return []
    return [
        DroppedWork(model.name, methods[name], "", where.get(name), predicate=True)
        for name in sorted(asked)
        if name in methods and _always_no(methods[name])
    ]


def _no_skips_work(backward_dw: cst.FunctionDef, name: str) -> bool:
    """The base's ``backward_dw`` skips its work when ``self.name()`` says no: ``if not
    self.name(): return`` or ``if self.name(): <work>``. (``if self.name(): return`` skips
    it when the answer is yes: saying no there is the default, not a dropped work.)"""
    for node in patterns.walk(backward_dw.body):
        if type(node) is not cst.If:
            continue
        test, negated = node.test, False
        while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, negated = test.expression, not negated
        asks = (
            type(test) is cst.Call and _is_self_call(test) and test.func.attr.value == name  # type: ignore[union-attr]
        )
        if asks and negated == ends_in_return(suite_body(node.body)):
            return True
    return False


STORING_METHODS = frozenset({"append", "extend", "put", "push", "insert", "appendleft"})


def _stored_elsewhere(owner: ClassModel, backward_dw: cst.FunctionDef) -> bool:
    """Another method of the base fills what its ``backward_dw`` pops (``self._store``):
    work is stored whatever the predicate says."""
    popped = {
        a
        for n in patterns.walk(backward_dw.body)
        if type(n) is cst.Call
        and type(n.func) is cst.Attribute
        and n.func.attr.value == "pop"
        and (a := patterns.attribute_of(n.func.value, "self")) is not None
    }
    return bool(popped) and any(
        type(n) is cst.Call
        and type(n.func) is cst.Attribute
        and n.func.attr.value in STORING_METHODS
        and patterns.attribute_of(n.func.value, "self") in popped
        for name, method in owner.methods.items()
        if method is not backward_dw
        for n in patterns.walk(method.body)
    )


def _base_says_no(owner: ClassModel, name: str) -> bool:
    """The base's own version of the predicate already always says no: the override
    changes nothing."""
    original = owner.methods.get(name)
    return original is not None and _always_no(original)


def _is_self_call(call: cst.Call) -> bool:
    func = call.func
    return type(func) is cst.Attribute and patterns.attribute_of(func, "self") is not None


def _about_delay(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in DELAY_WORDS)


def _asked_elsewhere(owner: ClassModel) -> set[str]:
    """Predicates the base also asks outside ``backward_dw`` (when it stores the work, say):
    made to say no, they keep the work from being delayed at all, which is consistent."""
    pieces = _pieces(owner, owner.methods[BACKWARD_DW]) | {BACKWARD_DW}
    return {
        n.func.attr.value
        for name, method in owner.methods.items()
        if name not in pieces
        for n in patterns.walk(method.body)
        if type(n) is cst.Call and _is_self_call(n)
    }


def _always_no(method: cst.FunctionDef) -> bool:
    """The body returns a false literal (``False``, ``0``, ``None``) and nothing else: no
    test, no call, only a docstring besides."""
    returned = False
    for stmt in suite_body(method.body):
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for small in stmt.body:
            if isinstance(small, cst.Return) and small.value is not None:
                if not patterns.is_false_literal(small.value):
                    return False
                returned = True
            elif not (isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString)):
                return False
    return returned


def _base_built_delayed(model: ClassModel) -> bool:
    """``__init__`` hands its base a ``delay_wgrad_compute`` that may be true."""
    init = model.methods.get("__init__")
    if init is None:
        return False
    for node in patterns.walk(init.body):
        if type(node) is not cst.Call or not _calls_base(node, "__init__"):
            continue
        arg = patterns.keyword_arg(node, DELAY)
        if arg is not None and not patterns.is_false_literal(arg.value):
            return True
    return False


def _builds_delayed_store(model: ClassModel) -> bool:
    """``__init__`` takes ``delay_wgrad_compute`` and builds the class's own store with it
    (``self.wgrad_store = WeightGradStore(delay_wgrad_compute, ...)``, Transformer Engine's
    modules): its ``backward_dw`` is the one that must pop it."""
    init = model.methods.get("__init__")
    if init is None or DELAY not in {
        p.name.value for p in (*init.params.params, *init.params.kwonly_params)
    }:
        return False
    if any(
        type(n) is cst.Assert and DELAY in cst.Module([]).code_for_node(n)
        for n in patterns.walk(init.body)
    ):
        return False  # ``assert not delay_wgrad_compute``: the delay is refused, nothing stored
    for node in patterns.walk(init.body):
        if type(node) is not cst.Call or "store" not in (patterns.callee_name(node) or "").lower():
            continue
        if any(type(a.value) is cst.Name and a.value.value == DELAY for a in node.args):
            return True
    return False


def _only_fires_hooks(method: cst.FunctionDef) -> bool:
    """Every call of the method fires a hook (``hook()`` for ``hook`` walking an attribute
    named for hooks, or a callee named for one) or logs: it hands the store, ``self`` or
    anything else to nobody who could compute the work (a helper, the store's own flush, a
    fused op: the review's correct overrides)."""
    hooks = {
        target.value
        for loop in patterns.walk(method.body)
        if type(loop) is cst.For and type(target := loop.target) is cst.Name
        and "hook" in cst.Module([]).code_for_node(loop.iter).lower()
    }  # fmt: skip
    calls = [n for n in patterns.walk(method.body) if type(n) is cst.Call]
    if not calls:
        return False  # an empty override is judged as before (no work at all)
    for call in calls:
        name = (patterns.callee_name(call) or "").lower()
        if type(call.func) is cst.Name and call.func.value in hooks:
            continue
        if (
            name.endswith("hook")
            or name in LOGGING_CALLS
            or "nvtx" in name
            or name.startswith("range_")
        ):
            continue
        return False
    return True


def _does_work(model: ClassModel, method: cst.FunctionDef) -> bool:
    for current in _with_helpers(model, method):
        if _only_raises(current):
            return True
        if any(
            type(n) is cst.Call and _calls_base(n, BACKWARD_DW) for n in patterns.walk(current.body)
        ):
            return True
    return _computes_own(model, method)


def _gated_base_call(model: ClassModel, method: cst.FunctionDef) -> tuple[cst.If, bool] | None:
    """The unrelated ``if`` the override's every call of the base's version sits under,
    when it does no other work (nothing popped or written, no helper of the class that
    calls the base): the other path may compute the work its own way."""
    helpers = _with_helpers(model, method)[1:]
    if _computes_own(model, method):
        return None
    if any(
        type(n) is cst.Call and _calls_base(n, BACKWARD_DW)
        for h in helpers
        for n in patterns.walk(h.body)
    ):
        return None
    bindings = bindings_of(list(model.methods.values()), method)
    return unrelated_gate(method, lambda call: _calls_base(call, BACKWARD_DW), bindings)


def _computes_own(model: ClassModel, method: cst.FunctionDef) -> bool:
    """``method`` (or a method of the class it calls) computes the class's own weights'
    delayed gradients: it uses what it pops, writes a ``.grad`` or main_grad. Calling
    member layers' ``backward_dw`` is not this (GMLP014 and GMLP020 follow layers)."""
    for current in _with_helpers(model, method):
        for node in patterns.walk(current.body):
            if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and (
                _uses_pop(node)
                or any(patterns.is_attr(t, "grad") for t in patterns.assignment_targets(node))
            ):
                return True
            if type(node) is cst.Attribute and node.attr.value == "main_grad":
                return True
    return False


def _uses_pop(assign: cst.CSTNode) -> bool:
    value = getattr(assign, "value", None)
    return value is not None and any(
        type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value == "pop"
        for n in patterns.walk(value)
    )


def _only_raises(method: cst.FunctionDef) -> bool:
    body = suite_body(method.body)
    return any(
        isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Raise)
        for stmt in body
    ) and all(
        isinstance(stmt, cst.SimpleStatementLine)
        and isinstance(stmt.body[0], (cst.Raise, cst.Expr))
        for stmt in body
    )


def _with_helpers(model: ClassModel, method: cst.FunctionDef) -> list[cst.FunctionDef]:
    return self_call_closure(method, model.methods)


def _pieces(owner: ClassModel, method: cst.FunctionDef) -> set[str]:
    """Methods of ``owner`` that its ``backward_dw`` calls through ``self.``, transitively."""
    return {f.name.value for f in _with_helpers(owner, method)} - {BACKWARD_DW}
