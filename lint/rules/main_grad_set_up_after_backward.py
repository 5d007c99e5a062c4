"""GMLP058: main_grad set up after the backward that writes it, or where no run reaches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
late_main_grads = LazyModule("..analysis.late_main_grads", __package__)
filtered_setups = LazyModule("..analysis.filtered_setups", __package__)
patterns = LazyModule("..analysis.patterns", __package__)
replaced = LazyModule("..analysis.replaced_after_setup", __package__)
misdirected_setups = LazyModule("..analysis.misdirected_setups", __package__)

CODE = "GMLP058"
RULE = Rule(
    code=CODE,
    classes=(8,),
    name="main-grad-set-up-after-backward",
    summary=(
        "A function that sets up the parameters' main_grad and runs backward does so only "
        "after every backward, or under a test no run passes: the fused wgrad of the "
        "backwards finds no main_grad."
    ),
    flags=(
        "a call of a helper binding `p.main_grad` for the module it is handed (a function of "
        "the file, or one named for setting main_grad up: `init_main_grads(m)`) that no run "
        "of the function reaches before a backward of `m`'s output (`out = m(x)`; "
        "`out.backward(dy)`; reported at the set-up), "
        "or that no run reaches at all, its test repeating one that sent every run "
        "elsewhere (reported at that test); the set-up handed a name or `self.X` that the "
        "function's body then binds to a new module (`self.op = Module(...)`, a value not "
        "naming it) with no set-up on it after (reported at the set-up); in a file turning "
        "`fuse_wgrad_accumulation` / `accumulate_into_main_grad` on, `p.main_grad` bound in a "
        "loop over the parameters only `if not isinstance(p, <a quantized tensor type>)` or "
        "after `if isinstance(p, ...): continue`; "
        "two loops over a module's parameters that both skip `if p in S: continue` and hand "
        "the parameter on after it (reported at the second test); a set-up named for it on a "
        "module that a later statement hands to a sharding wrapper (`fully_shard`, `FSDP`, "
        "`FullyShardedDataParallel`, `MegatronFSDP`) with no set-up of it after; in a "
        "function building a module with `accumulate_into_main_grad=True` (or "
        "`fuse_wgrad_accumulation=True`) and running its backward, `X.main_grad` bound "
        "only on another module's parameters (reported where `X` is bound from that module)"
    ),
    explanation="""
        Issue #19, class 8 (Megatron-LM #5209's shape: main_grad not made available before
        the fused ops run). Code that drives modules built with
        `accumulate_into_main_grad` / `fuse_wgrad_accumulation` outside Megatron's DDP
        (benchmarks, tests, integration shims) gives each parameter its fp32 `main_grad`
        itself; the weight-gradient GEMMs of the backward write into it. Blind corpus 12
        found two regressions of Transformer Engine's grouped-MLP benchmark: the set-up
        moved after the steps, and guarded by `accumulate_into_main_grad and fwd_only`
        after an `if fwd_only: ... return` (never true there).

        Since blind corpus 25 (Wan2.2 trained with Megatron-FSDP): main_grad set up on a
        module (a call named with main_grad and a set-up word, anywhere in a statement of
        the function, an `if` included) that a later statement hands to a sharding wrapper
        (by exact name: `fully_shard(module=model)`, torch's or Megatron-FSDP's,
        `FullyShardedDataParallel`, `FSDP`, `MegatronFSDP`), with no set-up of that module
        after the wrap (in the wrap's own statement or later): the wrapper replaces the
        parameters with new (sharded) Parameter objects, which carry none of the
        attributes set before. Reported at the set-up. Not seen: a wrap in another
        function than the set-up, a set-up helper of the file named otherwise, and the
        set-up and the wrap in one statement (one `if` or loop). Helpers named for FSDP
        (`load_fsdp_checkpoint(model)`) are no wrappers (review 28).

        And (analysis/misdirected_setups.py, blind corpus 25's DeepGEMM wgrad test)
        main_grad given to the wrong module: a function that builds a module with
        `accumulate_into_main_grad=True` / `fuse_wgrad_accumulation=True`, runs its
        backward, and binds `X.main_grad` only where `X` comes from another module it built
        (`weight = getattr(reference, f"weight{i}")`). Not seen: modules built elsewhere,
        set-ups through a loop over `named_parameters()` of a container holding both.

        Seen: in one function, a call setting main_grad up for the module it is handed
        first (a function of the file that binds `X.main_grad` to a buffer, not `None`:
        freeing it after the steps is no set-up; or a callee named with main_grad and init
        / alloc / setup / create / prepare), and the backwards of that module's output:
        `out.backward(...)` or `out.sum().backward()` where `out` is bound from
        `module(...)` (or a method of it); a reference model's backward in the same
        function is not one. Judged over the runs `consistent_paths` allows (a test
        repeated later is taken the same way): no run reaches the set-up while some run
        reaches one of those backwards (reported at the test around the set-up), or no run
        passes the set-up and then one of them (reported at the set-up). A search that
        gives up (more than 20,000 states: many repeated switches) reports nothing.

        A set-up on a module the function then replaces is lost the same way (blind corpus
        22: a test harness calling `_attach_main_grads(self.op, cfg)` before `self.op =
        TEGroupedMLPForTest(...)` rebuilt the op it measures). Seen: over the statements of
        one function body in order, a set-up call (as above) handed a name or `self.X`
        first, then a plain assignment binding the same target to a value that does not
        name it (`model = model.cuda()` and `model = DDP(model)` keep the parameters), and
        no set-up of that target after it in the body. Not seen: the two in nested blocks
        or in different functions, a replacement through `setattr` or a container.

        Parameters left out of every set-up (blind corpus 24; analysis/filtered_setups.py).
        An FP8 training script built with `fuse_wgrad_accumulation=True` inside
        `quantized_model_init` that sets main_grad up only `if not isinstance(param,
        QuantizedTensor)` (or skips them first: `if isinstance(param, QuantizedTensor):
        continue`): the quantized parameters are exactly the weights whose GEMMs write
        main_grad (seen: a type whose name says quantized, Float8, FP8, MXFP8 or NVFP4).
        Only where that binding is the file's one binding of main_grad and the filter has
        no `else` (the review: an `else`, a second loop or a helper may set the others up).

        And a DDP that shares the parameters out between grad buffers in two loops
        over `named_parameters()` / `parameters()`, each skipping the members of one set
        the same way (`if param in weight_for_zero_bubble: continue` in both, where the
        second should read `not in`): those parameters get no buffer, so no main_grad, and
        their hook fails or adds into nothing (the zero-bubble fork's DDP, inverted). Seen:
        the skip as an `if` whose body is only `continue` anywhere in the loop's body but a
        nested loop, and the parameter handed on after it (appended, a subscript key); the
        set a local the function binds once, empty, and fills outside both loops (the
        review: a set of parameters to ignore handed in, or one each loop fills as it goes
        to skip tied parameters, is left alone).
        A function that also walks the set itself (`for p in S:`) may set its
        members up there and is left alone. Not seen: a filter by dtype, by name or by
        `dim()`; the set's members set up in another function; the sets compared by text,
        so the same set under two names is not matched.

        Not seen: the set-up and the backward in different functions (a fixture, a caller, a
        helper running the forward and backward); a set-up binding `p.main_grad` inline; a
        backward of an output not bound from the module's call; a set-up that runs before
        backwards on some runs and not others (a guard on the fusion switch is how correct
        code reads); helpers of another file under other names.
    """,
    fix="""
        Set up main_grad before the first forward-backward, on every run that accumulates
        into it. No automatic fix.
    """,
    fix_summary="none (set up main_grad before the backward)",
    valid=(
        Example(
            """
            def run_steps(module, x, dy, num_steps, accumulate_into_main_grad):
                if accumulate_into_main_grad:
                    init_main_grads(module)
                for _ in range(num_steps):
                    out = module(x)
                    out.backward(dy)
                return out
            """
        ),
        Example(
            """
            def train(module, batches):
                for x, dy in batches:
                    out = module(x)
                    out.backward(dy)
                    init_main_grads(module)
            """
        ),
        Example(
            """
            class TestTEGroupedMLP(TestMoELayer):
                def __init__(self, tf_config, hf_config):
                    super().__init__(tf_config=tf_config, hf_config=hf_config)
                    _attach_main_grads(self.op, tf_config)
                    self.op = self.op.cuda()
                    self.op = TEGroupedMLPForTest(config=tf_config, submodules=self.submodules)
                    _attach_main_grads(self.op, tf_config)


            def _attach_main_grads(module, config):
                for param in module.parameters():
                    param.main_grad = torch.zeros_like(param, dtype=torch.float32)
            """
        ),
        Example(
            """
            def main():
                model = te.TransformerLayer(256, 1024, 8, fuse_wgrad_accumulation=True)
                for param in model.parameters():
                    param.main_grad = torch.zeros(param.shape, dtype=torch.float32)
                for param in model.parameters():
                    if not isinstance(param, QuantizedTensor):
                        param.decoupled_grad = None
            """,
        ),
        Example(
            """
            class DistributedDataParallel:
                def __init__(self, module):
                    special = set()
                    for sub in module.modules():
                        if isinstance(sub, ColumnParallelLinear):
                            special.add(sub.weight)
                    grouped = []
                    for name, param in module.named_parameters():
                        if param in special:
                            continue
                        grouped.append(param)
                    self.buffer = GradBuffer(grouped)
                    for name, param in module.named_parameters():
                        if param not in special:
                            continue
                        self.param_to_buffer[param] = GradBuffer([param])

                def hook(self, param):
                    param.main_grad.add_(param.grad)
            """,
        ),
    ),
    invalid=(
        Example(
            """
            def run_steps(module, x, dy, num_steps, accumulate_into_main_grad):
                for _ in range(num_steps):
                    out = module(x)
                    out.backward(dy)
                if accumulate_into_main_grad:
                    init_main_grads(module)
                return out
            """,
            line=6,
        ),
        Example(
            """
            def run_steps(module, x, dy, num_steps, fwd_only, accumulate_into_main_grad):
                if fwd_only:
                    return module(x)
                if accumulate_into_main_grad and fwd_only:
                    init_main_grads(module)
                out = module(x)
                out.backward(dy)
                return out
            """,
            line=4,
        ),
        Example(
            """
            class TestTEGroupedMLP(TestMoELayer):
                def __init__(self, tf_config, hf_config):
                    super().__init__(tf_config=tf_config, hf_config=hf_config)
                    _attach_main_grads(self.op, tf_config)
                    self.op = TEGroupedMLPForTest(config=tf_config, submodules=self.submodules)


            def _attach_main_grads(module, config):
                for param in module.parameters():
                    param.main_grad = torch.zeros_like(param, dtype=torch.float32)
            """,
            line=4,
        ),
        Example(
            """
            def main():
                model = te.TransformerLayer(256, 1024, 8, fuse_wgrad_accumulation=True)
                for param in model.parameters():
                    if not isinstance(param, QuantizedTensor):
                        param.main_grad = torch.zeros(param.shape, dtype=torch.float32)
            """,
            line=4,
        ),
        Example(
            """
            class DistributedDataParallel:
                def __init__(self, module):
                    special = set()
                    for sub in module.modules():
                        if isinstance(sub, ColumnParallelLinear):
                            special.add(sub.weight)
                    grouped = []
                    for name, param in module.named_parameters():
                        if param in special:
                            continue
                        grouped.append(param)
                    self.buffer = GradBuffer(grouped)
                    for name, param in module.named_parameters():
                        if param in special:
                            continue
                        self.param_to_buffer[param] = self.buffer

                def hook(self, param):
                    param.main_grad.add_(param.grad)
            """,
            line=14,
        ),
        Example(
            """
            def main(args):
                model = build_model(args)
                if args.fuse_wgrad:
                    setup_main_grad_for_te_linear(model)
                optimizer = AdamW(model.parameters(), lr=args.lr)
                model, optimizer = fully_shard(module=model, optimizer=optimizer)
                train(model, optimizer)
            """,
            line=4,
        ),
        Example(
            """
            def test_main_grad_accumulation(x):
                reference = GroupedLinear(2, 64, 64, accumulate_into_main_grad=False)
                fused = GroupedLinear(2, 64, 64, accumulate_into_main_grad=True)
                for i in range(2):
                    weight = getattr(reference, f"weight{i}")
                    weight.main_grad = torch.zeros_like(weight, dtype=torch.float32)
                out = fused(x, [32, 32])
                out.sum().backward()
            """,
            line=5,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGES = {
    False: (
        "`{call}` sets up main_grad only after every backward of this function: the fused "
        "weight-gradient GEMMs of those backwards find no main_grad (AttributeError, or a "
        "stale buffer); set it up before the first backward"
    ),
    True: (
        "no run reaches `{call}` under this test (it repeats a test that already sent every "
        "run elsewhere), yet the function runs backward: the fused weight-gradient GEMMs "
        "find no main_grad"
    ),
}
REPLACED = (
    "`{call}` sets up main_grad on `{target}`, which this function then binds to a new "
    "module: the module that runs has parameters without main_grad and its fused wgrad "
    "finds none; set it up after the last assignment"
)


QUANTIZED_LEFT_OUT = (
    "main_grad is not set up for the parameters where `{test}` holds: with wgrad fusion on, "
    "the quantized parameters are the weights whose GEMMs write main_grad"
)


SKIPPED_TWICE = (
    "this loop skips `{test}` as an earlier loop over the parameters does: the parameters of "
    "`{kept}` are handed to neither, so they get no grad buffer and no main_grad"
)


MISDIRECTED = (
    "main_grad is set up here on `{other}`'s parameters, while `{module}`, built to "
    "accumulate its weight gradients into main_grad, gets none before its backward"
)
SHARDED = (
    "`{call}` sets main_grad up on `{target}`'s parameters, and line {line} then hands "
    "`{target}` to a sharding wrapper, which replaces them with new Parameter objects: the "
    "fused wgrad finds no main_grad on those; set it up after the wrap"
)


def check(context: ModuleContext, out: Collector) -> None:
    if "main_grad" not in context.source:
        return
    for test in filtered_setups.quantized_left_out(context):
        out.report(CODE, test, QUANTIZED_LEFT_OUT.format(test=out.text(test)))
    helpers = context.shared(late_main_grads.binders)
    for unit in context.units:
        if (
            type(unit.owner) is cst.FunctionDef
            and filtered_setups.PARAMETER_WALKS & unit.survey.calls
        ):
            for test in filtered_setups.skipped_twice(unit):
                kept = out.text(test.comparisons[0].comparator)
                out.report(CODE, test, SKIPPED_TWICE.format(test=out.text(test), kept=kept))
    # cheap tests of the file's text first: most files build no fused module and shard none
    builds_fused = ".backward(" in context.source and misdirected_setups.builds_fused(
        context.source
    )
    shards = any(name in context.source for name in replaced.SHARDING_WRAPPERS)
    for unit in context.units:
        if type(unit.owner) is cst.FunctionDef:
            for call, target, _ in replaced.replaced_after_setup(unit, helpers):
                name = patterns.callee_name(call)
                out.report(CODE, call, REPLACED.format(call=name, target=target))
            if builds_fused:
                for where, other, module in misdirected_setups.misdirected(unit, helpers):
                    out.report(CODE, where, MISDIRECTED.format(other=other, module=module))
            if not shards:
                continue
            for call, target, wrap in replaced.sharded_after_setup(unit):
                name = patterns.callee_name(call)
                line = context.line_of(wrap)
                out.report(CODE, call, SHARDED.format(call=name, target=target, line=line))
    if ".backward(" not in context.source:
        return
    for unit in context.units:
        if type(unit.owner) is not cst.FunctionDef or "backward" not in unit.survey.calls:
            continue
        for found in late_main_grads.late_setups(unit, helpers):
            out.report(CODE, found.anchor, MESSAGES[found.dead].format(call=found.call))
