"""GMLP011: `backward_dw()` leaves without firing the wgrad accumulation-and-reduce hooks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..model import UNSAFE, Edit, Fix
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.cfg import Node
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
paths = LazyModule("..analysis.paths", __package__)
hook_model = LazyModule("..analysis.hooks", __package__)
delayed_work = LazyModule("..analysis.delayed_work", __package__)
exit_callbacks = LazyModule("..analysis.exit_callbacks", __package__)
hook_containers = LazyModule("..analysis.hook_containers", __package__)
file_functions = LazyModule("..analysis.file_functions", __package__)

CODE = "GMLP011"
RULE = Rule(
    code=CODE,
    classes=(5,),
    name="backward-dw-without-hooks",
    summary=(
        "`backward_dw()` of an op whose weights skip the backward post-hook returns, after "
        "computing the delayed wgrads, without calling the registered wgrad hooks."
    ),
    flags=(
        "a `backward_dw()` exit, after the wgrad store is popped, that calls no wgrad "
        "accumulation-and-reduce hook, in a class that sets `skip_backward_post_hook`"
    ),
    explanation="""
        With `delay_wgrad_compute` the weight gradients are computed later, in
        `backward_dw()`, so the op marks its weights `skip_backward_post_hook = True` and
        Megatron's DDP does not run its hook in the main backward. Instead Megatron
        registers a wgrad accumulation-and-reduce hook with the op, and `backward_dw()` must
        call it once the delayed GEMMs are done - on every way out, including the early
        return of the main_grad path. Otherwise nothing ever reduces these gradients
        (Transformer Engine #2886 in the grouped-linear op; Megatron-LM #4311 in its fused
        grouped MLP).

        Checked: in a class that sets `skip_backward_post_hook`, every path from the
        `wgrad_store.pop()` of its `backward_dw` method to a way out must pass a call whose
        name contains `hook` (a `_trigger_*_hooks()` helper, or `hook()` in a loop over the
        registered hooks), or a call of a top-level function of another file of the run
        that fires a gradient hook, by the name it is imported under (`from m import f as
        g`: `g(self)`; `import m`: `m.f(self)`; lint/delayed_helpers.py). Since the probes
        of branch h-probes: a call of an element of a container the file fills with hooks,
        whatever its name (`self._pending[i]()`, a loop over it; the protocol's
        `register_wgrad_accumulation_and_reduce_hooks(self, hook)` storing `hook` there:
        `analysis/hook_containers.py`), and a trigger handed to `stack.callback(...)` in
        `with ExitStack() as stack:`, which runs where the block ends and at each `return`
        in it that comes after the registration (`analysis/exit_callbacks.py`).

        Not seen: a class whose weights are marked elsewhere (by a base class, even one of the
        same file, by `setattr(w, "skip_backward_post_hook", True)`, or by code outside the class);
        a `backward_dw` inherited rather than defined in the marking class; a store not spelled
        `wgrad_store` (`self._delayed_queue.pop()`); a pop done in a helper method that
        `backward_dw` calls. Any call whose name contains `hook` counts as firing them, a
        registration included (`self.register_wgrad_hook(fn)`); a helper that fires them under
        another name (`self._finish()`) is not seen, and such code is reported (suppress it with a
        reason); nor a helper of another file that fires the hooks only through a helper of
        its own, or under names that say no gradient hook, or a method of another class; a
        callback of a stack that is no `with` item, or whose callbacks `pop_all()` moves out.
    """,
    fix="""
        Call the class's `_trigger_*hook*` method before each such exit (unsafe: check that
        the hooks may run on that path; offered only when the class has one).
    """,
    fix_summary="call the class's hook trigger before the exit (unsafe)",
    valid=(
        Example(
            """
            class GroupedOp:
                def __init__(self, weights):
                    for w in weights:
                        w.skip_backward_post_hook = True
                    self.hooks = []

                def backward_dw(self):
                    _, tensors = self.wgrad_store.pop()
                    run_wgrad(tensors)
                    for hook in self.hooks:
                        hook()
            """
        ),
    ),
    invalid=(
        Example(
            """
            class GroupedOp:
                def __init__(self, weights):
                    for w in weights:
                        w.skip_backward_post_hook = True
                    self.hooks = []

                def _trigger_wgrad_hooks(self):
                    for hook in self.hooks:
                        hook()

                def backward_dw(self):
                    _, tensors = self.wgrad_store.pop()
                    run_wgrad(tensors)
                    if self._accumulate_into_main_grad:
                        return
                    accumulate_grad(self.weight, tensors[2])
                    self._trigger_wgrad_hooks()
            """,
            line=15,
            fixed="""
            class GroupedOp:
                def __init__(self, weights):
                    for w in weights:
                        w.skip_backward_post_hook = True
                    self.hooks = []

                def _trigger_wgrad_hooks(self):
                    for hook in self.hooks:
                        hook()

                def backward_dw(self):
                    _, tensors = self.wgrad_store.pop()
                    run_wgrad(tensors)
                    if self._accumulate_into_main_grad:
                        self._trigger_wgrad_hooks()
                        return
                    accumulate_grad(self.weight, tensors[2])
                    self._trigger_wgrad_hooks()
            """,
            applicability="unsafe",
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "backward_dw() leaves here after computing the delayed wgrads without calling the "
    "registered wgrad accumulation-and-reduce hooks: the weights skip the backward post-hook, "
    "so DDP never reduces these gradients"
)
SKIP = "skip_backward_post_hook"


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if SKIP not in source or "backward_dw" not in source:
        return
    for unit in context.units:
        if isinstance(unit.owner, cst.ClassDef) and any(
            isinstance(s, cst.FunctionDef) and s.name.value == "backward_dw" for s in unit.body
        ):
            _check_class(unit, out)


def _check_class(cls: Unit, out: Collector) -> None:
    methods = [s for s in cls.body if isinstance(s, cst.FunctionDef)]
    if not hook_model.skips_backward_post_hook(methods):
        return
    trigger = next(
        (m.name.value for m in methods if "trigger" in m.name.value and "hook" in m.name.value),
        None,
    )
    mine = {id(m) for m in methods if m.name.value == "backward_dw"}
    for unit in cls.context.units:
        if id(unit.owner) in mine:
            _check_method(unit, out, trigger)


def _check_method(unit: Unit, out: Collector, trigger: str | None) -> None:
    start: Node | None = None
    hooks: list[Node] = []
    facts = out.context.shared(delayed_work.file_facts)
    for root, node in unit.expression_roots():
        text = out.context.code(root)
        if start is None and "wgrad_store" in text and ".pop(" in text:
            start = node
        calls_hook = (
            any("hook" in (patterns.callee_name(s) or "") for s in patterns.walk(root))
            or delayed_work.calls_imported_firing(root, facts)
            or _calls_kept_hook(root, facts)
        )
        if calls_hook or (node.kind == "for" and _walks_hooks(root, text, facts)):
            hooks.append(node)
    if start is None:
        return
    # A hook trigger handed to ``stack.callback`` in ``with ExitStack() as stack:`` runs
    # where the block ends, on each way out of it.
    for deferred in exit_callbacks.deferred_calls(unit):
        if "hook" in (patterns.callee_name(deferred.call) or ""):
            hooks.extend(deferred.sure)
    falls_off = False
    for node in paths.exits_avoiding(unit.graph, start, hooks):
        if isinstance(node.owner, cst.Return):
            fix = _fix(out, node.owner, trigger, _receiver(unit), before=True)
            out.report(CODE, node.owner, MESSAGE, fix)
        else:
            falls_off = True
    if falls_off and unit.body:
        last = unit.body[-1]
        if isinstance(last, cst.SimpleStatementLine):
            last = last.body[-1]
        out.report(CODE, last, MESSAGE, _fix(out, last, trigger, _receiver(unit), before=False))


def _calls_kept_hook(root, facts) -> bool:
    """``self._pending[i]()``: a call of an element of a container the file fills with hooks
    (``analysis/hook_containers.py``), whatever its name."""
    return any(
        type(s) is cst.Call and hook_containers.element_container(s.func) in facts.containers
        for s in patterns.walk(root)
    )


def _walks_hooks(root, text: str, facts) -> bool:
    """A loop header over the hooks: its text says hook, or it names a container the file
    fills with hooks (``for fire in self._pending:``, ``for i in range(len(self._pending))``)."""
    return "hook" in text or any(
        type(s) in (cst.Name, cst.Attribute) and hook_containers.last_word(s) in facts.containers
        for s in patterns.walk(root)
    )


def _receiver(unit: Unit) -> str | None:
    """The name the method calls its instance by (its first parameter: ``self`` or not);
    None for a static, class-level or argument-less one (``cls._trigger_wgrad_hooks()``
    would call the function unbound, without an instance)."""
    owner = unit.owner
    if not isinstance(owner, cst.FunctionDef):
        return None
    if file_functions.is_static(owner) or file_functions.is_classmethod(owner):
        return None
    positional = (*owner.params.posonly_params, *owner.params.params)
    return positional[0].name.value if positional else None


def _fix(out: Collector, stmt, trigger: str | None, receiver: str | None, before: bool):
    if trigger is None or receiver is None:
        return None
    start, indent = out.line_start(stmt)
    if indent.strip():
        return None
    text = f"{indent}{receiver}.{trigger}()\n"
    edit = Edit(start, start, text) if before else out.insert_line_after(stmt, text)
    return Fix(f"Call {receiver}.{trigger}()", (edit,), UNSAFE)
