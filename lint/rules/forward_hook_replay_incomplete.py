"""GMLP055: a fused implementation replays its submodules' pre-forward hooks, but not all."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
class_model = LazyModule("..analysis.class_model", __package__)
patterns = LazyModule("..analysis.patterns", __package__)

CODE = "GMLP055"
RULE = Rule(
    code=CODE,
    classes=(8,),
    name="forward-hook-replay-incomplete",
    summary=(
        "A fused implementation that replays its submodules' pre-forward hooks (the DDP / "
        "Megatron-FSDP hooks that gather parameters and make main_grad available) takes "
        "them in `__init__`, before any engine registered one, or keeps only the hooks of "
        "one module."
    ),
    flags=(
        "`self.M()` in `__init__` where `M` copies submodules' `_forward_pre_hooks` into a "
        "list and registers a hook replaying it; a hooks list rebound to those with "
        "`inspect.getmodule(hook) == X` (or `is`), or a replay loop that `continue`s past "
        "those with `!=`"
    ),
    explanation="""
        Issue #19, class 8 (Megatron-LM #5209's shape). A fused implementation built from
        TE ops (`te.ops.Sequential`) runs its submodules' weights without calling the
        submodules, so their pre-forward hooks never run on their own; code that builds
        one replays them from a hook on the fused module (Megatron-LM's `TEFusedMLP`,
        NeMo's and Megatron-Bridge's `TEFusedLoRALinear`). Those hooks are the engines':
        the distributed optimizer's parameter all-gather, Megatron-FSDP's unshard, which
        makes `param.main_grad` available through `get_main_grad()` before TE writes into
        it with `accumulate_into_main_grad`. Two ways they go missing:

        * the hooks are copied into a list when the fused module is built, and it is
          built in `__init__` (NeMo's `TEFusedLoRALinear` built it on first use; blind
          corpus 10's held-out variant builds it in `__init__`). The engines wrap the
          model after it is constructed: the list is empty, the replay runs nothing,
          and the fused ops write into main_grad buffers nobody fetched;

        * the replay keeps only the hooks of one module (`if inspect.getmodule(hook) ==
          distributed_data_parallel`), dropping Megatron-FSDP's and any other engine's
          (Megatron-LM warns about such hooks and runs them).

        Seen: in a class, a method that copies `X._forward_pre_hooks` (`.values()`,
        `.items()`, the dict) into a list outside any nested function (a loop appending,
        or a list bound from a comprehension over them) and calls
        `register_forward_pre_hook`; a call of that method (`self.M()`, as a statement or
        a value) in the class's `__init__`, or of a method of the class that calls it (not
        `forward`). And anywhere in a file that replays such
        hooks: a list of hooks rebound to those passing `inspect.getmodule(<hook>) == M`
        (or `is`, either side: `hooks = [(m, h) for m, h in hooks if ...]`), or a loop
        that calls one of its own variables (the replay) after `if inspect.getmodule(h) !=
        M: continue`. Megatron-LM reads the registries inside the replaying hook on every
        call (a construction-time snapshot can miss hooks DDP re-enables later); a
        snapshot taken on first use is left alone here, as are hooks counted or listed to
        warn about (`any(...)`, a list bound to another name) and a test keeping several
        engines' hooks (`in (ddp, fsdp)`).

        Not seen: builders of other classes or files called from `__init__`, filters
        spelled otherwise (`hook.__module__`, a set of allowed hooks).
    """,
    fix="""
        Build the fused implementation on first use (or read the submodules'
        `_forward_pre_hooks` inside the replaying hook, on every call), and replay every
        hook, warning about those that may touch inputs. No automatic fix.
    """,
    fix_summary="none (build on first use; replay every hook)",
    valid=(
        Example(
            """
            class FusedLoRA(torch.nn.Module):
                def __init__(self, to_wrap, adapter):
                    super().__init__()
                    self._fused = None

                def _make_fused(self):
                    linear = te.ops.BasicLinear(8, 8, accumulate_into_main_grad=True)
                    fused = te.ops.Sequential(linear)
                    pre_hooks = []
                    for submodule in self.modules():
                        for hook in submodule._forward_pre_hooks.values():
                            pre_hooks.append((submodule, hook))

                    def replay(module, *_):
                        for submodule, hook in pre_hooks:
                            hook(submodule, None)

                    fused.register_forward_pre_hook(replay)
                    return fused

                def forward(self, x):
                    if self._fused is None:
                        self._fused = self._make_fused()
                    return self._fused(x)
            """
        ),
        Example(
            """
            def replay_hooks(submodules):
                fused = te.ops.Sequential(te.ops.BasicLinear(8, 8, accumulate_into_main_grad=True))
                hooks = [(m, h) for m in submodules for h in m._forward_pre_hooks.values()]
                for m, h in hooks:
                    if inspect.getmodule(h) != ddp_module:
                        warnings.warn("a pre-forward hook may touch the input")

                def replay(module, *_):
                    for m, h in hooks:
                        h(m, ())

                fused.register_forward_pre_hook(replay)
                return fused
            """
        ),
    ),
    invalid=(
        Example(
            """
            class FusedLoRA(torch.nn.Module):
                def __init__(self, to_wrap, adapter):
                    super().__init__()
                    self._fused = self._make_fused()

                def _make_fused(self):
                    linear = te.ops.BasicLinear(8, 8, accumulate_into_main_grad=True)
                    fused = te.ops.Sequential(linear)
                    pre_hooks = []
                    for submodule in self.modules():
                        for hook in submodule._forward_pre_hooks.values():
                            pre_hooks.append((submodule, hook))

                    def replay(module, *_):
                        for submodule, hook in pre_hooks:
                            hook(submodule, None)

                    fused.register_forward_pre_hook(replay)
                    return fused
            """,
            line=4,
        ),
        Example(
            """
            def replay_hooks(submodules):
                fused = te.ops.Sequential(te.ops.BasicLinear(8, 8, accumulate_into_main_grad=True))
                hooks = [(m, h) for m in submodules for h in m._forward_pre_hooks.values()]
                hooks = [(m, h) for m, h in hooks if inspect.getmodule(h) == ddp_module]

                def replay(module, *_):
                    for m, h in hooks:
                        h(m, ())

                fused.register_forward_pre_hook(replay)
                return fused
            """,
            line=4,
        ),
    ),
)

EAGER = (
    "`{method}` copies the submodules' pre-forward hooks when it builds the fused module, "
    "and `__init__` calls it: the engines (DDP's parameter gather, Megatron-FSDP's "
    "main_grad fetch) register theirs after the model is built, so the replay runs none "
    "and the fused ops write into main_grad nobody made available"
)
FILTERED = (
    "the replayed pre-forward hooks are kept only when they come from one module: the "
    "others (Megatron-FSDP's unshard and main_grad fetch) never run before the fused ops "
    "write into main_grad"
)
HOOK_DICTS = frozenset({"_forward_pre_hooks"})


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if "_forward_pre_hooks" not in source or "register_forward_pre_hook" not in source:
        return
    # names of lists a loop replays (``for m, hook in hooks: hook(m, ())``)
    replayed = {
        node.iter.value
        for node in class_model.walk_all(context.module)
        if type(node) is cst.For and type(node.iter) is cst.Name and _replays(node)
    }
    for node in class_model.walk_all(context.module):
        kind = type(node)
        if kind is cst.ClassDef:
            _check_class(context, node, out)
        # in a file that replays pre-forward hooks: the hooks list rebound to those of one
        # module (``hooks = [h for h in hooks if getmodule(h) == ddp]``), or a replay loop
        # that skips the others (``if getmodule(h) != ddp: continue`` before ``h(m, ())``)
        elif kind is cst.Assign and len(node.targets) == 1:
            test = _filtering_rebind(node, replayed)
            if test is not None:
                out.report(CODE, test, FILTERED)
        elif kind is cst.For and _replays(node):
            for statement in node.body.body:
                if _skips_others(statement):
                    out.report(CODE, statement, FILTERED)


def _filtering_rebind(assign, replayed: set[str]) -> cst.BaseExpression | None:
    """The test of ``L = [... for ... in L if getmodule(h) == M]``, or of such a list taken
    from the hooks registry (``m._forward_pre_hooks.values()``) and replayed by a loop."""
    target, value = assign.targets[0].target, assign.value
    if type(target) is not cst.Name or type(value) not in (cst.ListComp, cst.GeneratorExp):
        return None
    clause = value.for_in
    rebinds = type(clause.iter) is cst.Name and clause.iter.value == target.value
    if not (rebinds or (target.value in replayed and _reads_hooks(clause.iter))):
        return None
    for test in clause.ifs:
        if _keeps_one_module(test.test, keep=True):
            return test.test
    return None


def _replays(loop) -> bool:
    """The loop calls one of its own variables (``for m, hook in hooks: ... hook(m, ())``)."""
    bound = {n.value for n in patterns.walk(loop.target) if type(n) is cst.Name}
    return any(
        type(sub) is cst.Call and type(sub.func) is cst.Name and sub.func.value in bound
        for sub in patterns.walk(loop.body)
    )


def _check_class(context: ModuleContext, cls, out: Collector) -> None:
    methods = {item.name.value: item for item in cls.body.body if type(item) is cst.FunctionDef}
    init = methods.get("__init__")
    if init is None:
        return
    snapshots = {name for name, method in methods.items() if _snapshots_hooks(method)}
    if not snapshots:
        return
    for node, name in _self_calls(init):
        # directly, or through methods of the class ``__init__`` calls (``self._setup()``)
        reached = _reaches_snapshot(name, methods, snapshots)
        if reached is not None:
            out.report(CODE, node, EAGER.format(method=reached))


def _self_calls(method):
    """(call, name) for each ``self.name(...)`` in the method (nested functions not entered)."""
    for node in patterns.walk(method.body):
        if type(node) is cst.Call and type(node.func) is cst.Attribute:
            receiver = node.func.value
            if type(receiver) is cst.Name and receiver.value == "self":
                yield node, node.func.attr.value


def _reaches_snapshot(name: str, methods, snapshots: set[str]) -> str | None:
    """The snapshotting method ``self.name()`` is or calls (through the class's methods)."""
    seen = {name}
    pending = [name]
    while pending:
        current = pending.pop()
        if current in snapshots:
            return current
        method = methods.get(current)
        if method is None or current == "forward":
            continue  # ``forward`` runs after the engines wrapped the model
        for _, callee in _self_calls(method):
            if callee not in seen:
                seen.add(callee)
                pending.append(callee)
    return None


def _snapshots_hooks(method) -> bool:
    """The method copies pre-forward hooks into a list outside any nested function (where a
    replaying hook would read them on each call) and registers a pre-forward hook."""
    copies = registers = False
    for node in patterns.walk(method.body):  # nested functions are not entered
        kind = type(node)
        if (kind is cst.For and _reads_hooks(node.iter) and _appends(node)) or (
            # a list bound or extended from the hooks (not ``any(...)`` of them, to warn)
            kind in (cst.Assign, cst.AugAssign)
            and type(node.value) in (cst.ListComp, cst.GeneratorExp)
            and _reads_hooks(node.value)
        ):
            copies = True
        elif kind is cst.Call and patterns.callee_name(node) == "register_forward_pre_hook":
            registers = True
    return copies and registers


def _reads_hooks(node) -> bool:
    return any(
        type(sub) is cst.Attribute and sub.attr.value in HOOK_DICTS for sub in patterns.walk(node)
    )


def _appends(loop) -> bool:
    return any(
        type(sub) is cst.Call and patterns.callee_name(sub) in ("append", "extend")
        for sub in patterns.walk(loop.body)
    )


def _keeps_one_module(test, keep: bool) -> bool:
    """``inspect.getmodule(h) == M`` (or ``is``; either side) when ``keep``; ``!=`` (``is
    not``) when not: the test passes for one module's hooks only (``in (ddp, fsdp)`` keeps
    several engines' and is left alone)."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    sides = (test.left, test.comparisons[0].comparator)
    if not any(patterns.callee_name(side) == "getmodule" for side in sides):
        return False
    operator = type(test.comparisons[0].operator)
    return operator in ((cst.Equal, cst.Is) if keep else (cst.NotEqual, cst.IsNot))


def _skips_others(statement) -> bool:
    """``if inspect.getmodule(h) != M: continue`` (an indented or one-line suite)."""
    if type(statement) is not cst.If or not _keeps_one_module(statement.test, keep=False):
        return False
    body = statement.body.body
    if type(statement.body) is cst.SimpleStatementSuite:
        return len(body) == 1 and type(body[0]) is cst.Continue
    return (
        len(body) == 1
        and type(body[0]) is cst.SimpleStatementLine
        and type(body[0].body[0]) is cst.Continue
    )
