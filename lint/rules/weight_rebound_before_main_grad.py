"""GMLP015: a weight rebound to a fresh Parameter or a copy, then asked for main_grad."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

# The parser and the analyses load on the first check, not with the documentation.
module_provenance = LazyModule("..analysis.module_provenance", __package__)
fresh_flags = LazyModule("..analysis.fresh_flags", __package__)
forward_rebinds = LazyModule("..analysis.forward_rebinds", __package__)
fresh_aliases = LazyModule("..analysis.fresh_aliases", __package__)
fresh_bindings = LazyModule("..analysis.fresh_bindings", __package__)
file_functions = LazyModule("..analysis.file_functions", __package__)
parameter_attributes = LazyModule("..analysis.parameter_attributes", __package__)
saved_rebinds = LazyModule("..analysis.saved_rebinds", __package__)
reading_helpers = LazyModule("..analysis.reading_helpers", __package__)
stored_fresh = LazyModule("..analysis.stored_fresh_parameters", __package__)

CODE = "GMLP015"
RULE = Rule(
    code=CODE,
    classes=(2,),
    name="weight-rebound-before-main-grad",
    summary=(
        "A weight name is rebound to a fresh `Parameter(...)` or a tensor copy, and main_grad "
        "or its flags are then read from the new object, which carries none of them."
    ),
    flags=(
        "`w = Parameter(w, ...)` / `w = w.clone()` / `w.detach()` / a chain on `w` holding a "
        "copy or a view (`w.t().contiguous().t()`, `w.view(...)`) followed by a read of "
        "`w.main_grad`, `grad_added_to_main_grad`, `overwrite_main_grad` or `zero_out_wgrad` "
        "that this binding reaches; or an attribute of `self` bound to a fresh `Parameter(...)` "
        "or of a submodule it owns (assignment, `setattr`, `register_parameter`) by a method the "
        "module's forward runs; or `w.detach()` / `w.data` / `Parameter(w.data)` kept on ctx "
        "as the weight by a function taking the fused-wgrad switch, or put in another "
        "module's parameter slot from an existing module's weight; `w = w.clone()` (a copy or "
        "view chain, not `.contiguous()` alone) in `forward` saved for backward (or kept on "
        "`ctx`) where the `backward` beside it reads main_grad or a flag from it; "
        "`ref().detach()` / `.clone()` / `.data` of a weak reference; `L[i] = Parameter(...)` "
        "followed by a flag read or set on an item of `L`; a fresh `Parameter(...)` given to "
        "an op built with `accumulate_into_main_grad`; `x, w = <pad or align helper>(x, w)` "
        "followed by such a read; reads through `get_main_grad_from_param(w)` / "
        "`get_accumulate_flag_in_param(w)`"
    ),
    explanation="""
        Issue #19, class 2. main_grad, `grad_added_to_main_grad`, `overwrite_main_grad` and
        `zero_out_wgrad` are attributes Megatron puts on the Parameter object. Wrapping the
        weight in a new `Parameter(...)` (Transformer Engine's CPU-offloading path before
        #1026 did `weight = torch.nn.Parameter(weight, False)` in backward) or replacing it
        by a copy makes a new object: `hasattr(w, "main_grad")` is then False, a getattr
        default silently answers, or the wgrad is written into a buffer Megatron never sees.

        Seen: within one function, a binding `w = Parameter(...)` or `w = <...>.clone()` /
        `.detach()` / `copy.deepcopy(...)` / `.contiguous()`, or `w = <quantized copy of w>`
        (a quantize / cast call, or a helper of the module whose returns are quantized:
        analysis/provenance.py), that reaches (reaching
        definitions over the function's control-flow graph) a read of one of the attributes
        on `w`, or a `getattr` / `hasattr` of them.

        main_grad put back on the new object after the rebinding (`w.main_grad =
        main_grad`, as Transformer Engine's offloading path did) answers later reads of
        main_grad, which are then not reported; the flags are still missing (Transformer
        Engine #1573 kept the weight object itself for that reason).

        The weight rebound to a method chain on itself one link of which is a copy or a
        view (`w = w.t().contiguous().t()`, MindSpeed's SoC-friendly operand before !1534;
        `w = w.view(n, -1)`; `w = w.transpose(0, 1).reshape(...)`) is a new object too,
        even when the chain ends in a view of the Parameter's storage. `.to(...)`,
        `.float()` and `.type(...)` may hand back the object itself and are not counted.

        A helper of the module whose every `return` is such a call counts as one
        (`weight = _as_param(weight)`). So does a helper named for padding or aligning its
        operands for the hardware, handed the weight and bound back to it (`grad_output,
        weight = get_aligned_mm_inputs(grad_output, weight, ...)`, blind corpus 24 and
        MindSpeed's CoC linears at its head: for unaligned shapes it hands back
        `weight.t().contiguous().t()` or a padded copy; a `_`-separated part of its name
        starting with `align` or `pad`). Reads include Transformer Engine's state helpers
        (`get_main_grad_from_param(w)`, `get_accumulate_flag_in_param(w)`), so a list of
        `maybe_dequantize(w, dtype)` copies (an FP8 weight dequantized is a new tensor)
        read through them is reported too.

        Per expert: a list of such new objects, one per weight (`weights =
        [Parameter(w.detach()) for w in weights]`, `list(w.clone() for w in ws)`, `L = []`
        filled only by `L.append(Parameter(...))`), read
        through its items (`weights[i].main_grad`) or a loop variable walking it (`for w in
        weights`, `enumerate`, `zip`; analysis/iteration.py).

        Also reported: `grad_added_to_main_grad` set on such a fresh object, or on an item
        of a list the fresh object was stored into (`weights[i] = w` then
        `weights[i].grad_added_to_main_grad = ...`, Transformer Engine #2265): the hooks
        read the Parameter's flag, which stays unset (the buffer put back on the copy is
        not reported, the flag is).

        The flag may be set by a helper of the file the copy is handed to, one that sets
        `grad_added_to_main_grad` on the parameter it gets (analysis/marking_helpers.py):
        the copy handed by name, or the item of a container it was stored into, handed by
        subscript or by a loop or comprehension variable walking the container (blind corpus
        14: a grouped backward re-wrapping `origin_weights[i]` under CPU offload, then
        `[handle_custom_ddp_from_mcore(w, g) for w, g in zip(origin_weights, wgrads)]`).
        Reported at the store into the container (or at the argument). The store counts
        while the container name is bound as it was there, and an item read by a constant
        key only under that key; a Parameter over newly allocated storage
        (`Parameter(torch.randn(...))`) is no copy here; a helper that rebinds its parameter
        before marking (`weight = getattr(weight, "_origin_param", weight)`) is not taken to
        mark what it was handed. Not seen: a container walked through `reversed(...)` or a
        slice, a nested function
        that marks the copy it closes over. Reported wrongly: a helper whose mark sits under
        a test of another argument (`_finish(probe, g, fused=False)`) is taken to mark
        whatever it is handed.

        A copy stored without a name (blind corpus 23, Transformer Engine's grouped backward
        under CPU offload: `origin_weights[i] = torch.nn.Parameter(origin_weights[i],
        ...)`) is reported at the store when a path from it reaches a read or a set of
        `grad_added_to_main_grad`, `overwrite_main_grad` or `zero_out_wgrad` on an item of
        the same list, by any key (`getattr(origin_weights[0], "overwrite_main_grad",
        False)`); main_grad put back on the item is no such use
        (analysis/stored_fresh_parameters.py). Not seen there: the list walked by a loop
        or handed to a helper after the store. Likewise an op built with
        `accumulate_into_main_grad` (not a literal False) given a fresh Parameter in the
        same function (`op.weight = nn.Parameter(w.detach().clone())`, blind corpus 23's
        fused LoRA branch, which must share the adapter's Parameter): the op writes the
        main_grad of an object Megatron never gave one.

        Also reported: a module's weight rebound to a fresh `Parameter(...)` on the way
        into each forward (`forward`, the class's methods it calls, forward pre-hooks of
        the class: `setattr(self, f"weight{i}", Parameter(host.to("cuda")))` in an onload
        step, `self.weight = nn.Parameter(...)`, `register_parameter`), also a weight of a
        submodule the module owns (`self.fc1.weight = ...`, `self.experts[i].weight = ...`,
        `expert.weight = ...` for `expert` bound to or walking `self.experts`, and through
        `expert._parameters[...]` or `vars(expert)[...]`), in a file that names
        main_grad: Megatron gave the Parameter its main_grad once, at wrapping, and the
        fresh one has none (analysis/forward_rebinds.py). A module-level function of the
        file that the forward path hands an owned submodule (`onload(self.fc1, device)`)
        is read the same way, its parameter standing for the submodule (one call deep).
        Lazy creation under a test of `None` / `hasattr` / `init` is not reported, nor a
        method that puts main_grad back.

        Not seen: a rebinding in a helper of another file (MindSpeed !1534's rebinding
        helper returns the copy to a caller whose matmul reads main_grad elsewhere), an
        attribute of an object the module does not own rebound (a module handed in by a
        caller outside the class: `module.weight = Parameter(...)`, Automodel #2986's
        re-tie), or of `self` or
        its submodules outside the forward path,
        attributes copied over by a helper, whether a put-back runs on every path, lists
        filled by `extend` or holding new objects for some weights only, copies
        kept under another name (that
        is class 1, GMLP007), and weights rebound to their all-gathered form (Megatron's
        GTP does that for dgrad and turns the fused main_grad path off itself).

        Also reported (since blind corpus 7; analysis/fresh_aliases.py): a new object over a
        weight's storage (`w.detach()`, `w.data`, `Parameter(w)`, `Parameter(w.data)`)
        kept as the weight's handle where the main-grad path will look for the Parameter:
        on `ctx` in a function that takes the fused-wgrad switch
        (`gradient_accumulation_fusion`, `fuse_wgrad_accumulation`,
        `accumulate_into_main_grad`) and keeps the weight itself nowhere else (not on
        `ctx`, in a weakref or in `save_for_backward`), also per expert (`[w.detach() for w in
        weights]`); or put as a new `Parameter` in another module's parameter slot
        (`register_parameter`, `setattr`, attribute assignment, directly or through a local)
        from an existing module's weight (`linear.get_parameter("weight").data`,
        `getattr(linear, f"weight{i}").detach()`), as a module shell meant to share a
        GroupedLinear's Parameters would (Megatron's fused-ops shell).

        The slot's weight may be read off its module into a local first (`w =
        self.adapter.linear_in.weight`, then `op.weight = Parameter(w.data)`: Megatron-Bridge's
        LoRA branch, blind corpus 8). And on one path only: a local put in the slot that
        every path binds to the module's weight except one, which makes a new Parameter of
        its values (`if is_float8tensor(weight): weight = Parameter(weight.dequantize())`;
        also through `.to()`, `.float()`, `.clone()`): the other path says the slot is meant
        to hold the Parameter itself; reported where the new one is made.

        Since blind corpus 12 (analysis/saved_rebinds.py): a weight rebound in an autograd
        Function's `forward` to an object that is surely new (a chain on it with a copy or
        view link, or `Parameter(...)`; `w.contiguous()` alone may return the Parameter)
        and handed to `save_for_backward` (or kept as `ctx.X`), where the `backward` of the
        same class (or beside it) reads main_grad or a flag from the name it unpacks at that
        position (same number of plain items; an indexed read matches any) or from `ctx.X`:
        MindSpeed-LLM's fused MLP with `weight_down = weight_down.contiguous().clone()`.
        Reported at the rebinding. And a weak reference's Parameter replaced by a copy as
        it is dereferenced (`ref().detach()`, `ref().clone()`, `ref().data`, the callee named
        for a reference: `ref`, `origin_weight_ref`): the reference was kept to reach the
        Parameter itself (a Transformer Engine fork's grouped linear).

        Since blind corpus 16: the rebinding may keep the weight on one arm of a
        conditional expression and copy it on the other (`weight = weight if weight.dtype
        == x.dtype else weight.astype(x.dtype)`: PaddleFleet's linear), reported for the
        runs that take the copy, unless the read sits under an `if` deciding the choice's
        test for the kept arm (`w = w if fuse else w.astype(dt)` beside `if fuse:`), or the
        choice asked `hasattr(w, "main_grad")` and the read is that question again (or under
        it); a flag set on such a one-arm copy is not reported. `astype` / `cast` (Paddle's
        and NumPy's casts, new tensors whatever the dtype) are copies. Not seen: a copy in
        a nested conditional expression; a cast copy made in `forward` and saved for
        backward (the saved-rebinding path takes only chains with a copy or view link).

        A read moved into a helper function of the file handed the rebound name
        (`_accumulate(dy, weight)` whose body writes `weight.main_grad`) counts as a read at
        the call (`analysis/reading_helpers.py`: the helper reads the attribute from that
        very parameter, never rebinds it and never asks whether it has main_grad at all, a
        helper with a `.grad` fallback being written for copies too, or hands it on to a
        helper that does; `assert hasattr(p, "main_grad")` is no fallback: it insists on
        the Parameter). Since the twenty-fourth session, also a call of any file handed the
        rebound name whose result is bound to a name spelling main_grad (`fuse, main_grad
        = setup_fused_grad_accum(b, pattern)`: Primus-Turbo's setup lives in another file
        and hands back `b.main_grad`); a tensor factory (`zeros_like(b)`) is no fetch, nor a
        call handed the Parameter too (`origin_weight`, `orig_w`: its main_grad is fetched). A
        dtype cast (`w = w.to(dtype)`, `cast_if_needed(w, dt)`) is still not counted: it
        hands back the Parameter itself whenever the dtypes agree, as they do wherever
        Megatron gives the weight a main_grad (counting it raised five false alarms in
        ROCm's Transformer Engine fork and five in mdy_triton's copies of it). Not
        seen: such a helper handed a copy made in `forward` and restored from the saved
        tensors (the saved-rebinding path reads the attributes written in `backward`
        itself); helpers of another file; a detached weight kept on `ctx` by a
        function that does not take the fused-wgrad switch itself; a slot filled from a
        weight held in a list rather than read off its module.
    """,
    fix="""
        Keep the Parameter: save the original object (or a weakref) and read main_grad and
        its flags from it, or copy the attributes onto the new object before any read. No
        automatic fix.
    """,
    fix_summary="none (read main_grad from the original Parameter)",
    valid=(
        Example(
            """
            def backward(ctx, grad_output):
                weight = ctx.weight
                if ctx.cpu_offloading:
                    weight_copy = torch.nn.Parameter(weight, False)
                    use(weight_copy)
                wgrad_gemm(grad_output, out=weight.main_grad)
            """
        ),
        Example(
            """
            def backward(ctx, grad_output, main_grad):
                weight = ctx.weight
                if ctx.cpu_offloading:
                    weight = torch.nn.Parameter(weight.requires_grad)
                    weight.main_grad = main_grad
                wgrad_gemm(grad_output, out=weight.main_grad)
            """
        ),
        Example(
            """
            def make_op(module):
                weight = module.weight
                op = BasicLinear(accumulate_into_main_grad=module.fuse_wgrad_accumulation)
                op.weight = weight
                return op
            """
        ),
        Example(
            """
            def backward(ctx, dy):
                weights, origin_weights = list(ctx.weights), list(ctx.origin_weights)
                for i in range(ctx.num_gemms):
                    w = torch.nn.Parameter(weights[i], weights[i].requires_grad)
                    w.main_grad = ctx.main_grads[i]
                    weights[i] = w

                main_grads = [w.main_grad for w in weights]
                general_grouped_gemm(ctx.inputs, dy, main_grads, accumulate=True)

                def mark(weight):
                    weight.grad_added_to_main_grad = True
                    return make_dummy_wgrad(weight)

                return [mark(weight) for weight in origin_weights]
            """
        ),
        Example(
            """
            class GemmFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b, pattern=None):
                    fuse, main_grad = setup_fused_grad_accum(b, pattern)
                    b = b.detach()
                    main_grad_copy = torch.zeros_like(b)
                    ctx.main_grad = main_grad
                    return gemm(a, b)
            """
        ),
        Example(
            """
            class COCRowSeqParallelFunction(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    weight = ctx.weight
                    grad_output, mm_weight = get_aligned_mm_inputs(grad_output, weight, 4)
                    grad_input = grad_output.matmul(mm_weight)
                    total_input = ctx.saved_tensors[0]
                    npu_matmul_add_fp32(total_input, grad_output, weight.main_grad)
                    if hasattr(weight, "grad_added_to_main_grad"):
                        zero = getattr(weight, "zero_out_wgrad", False)
                        grad_weight = get_dummy_wgrad(weight.main_grad.shape, x.dtype, zero=zero)
                        weight.grad_added_to_main_grad = True
                    return grad_input, grad_weight
            """,
        ),
        Example(
            """
            def compute_grad_params(fc_op, dtype):
                weights = fc_op._get_weight_tensors()
                w_list = [get_main_grad_from_param(w) for w in weights]
                accumulate = get_accumulate_flag_in_param(weights[0])
                return w_list, accumulate
            """,
        ),
    ),
    invalid=(
        Example(
            """
            def backward(ctx, grad_output):
                weights = list(ctx.saved_weights)
                for i in range(ctx.num_gemms):
                    w = torch.nn.Parameter(weights[i], weights[i].requires_grad)
                    weights[i] = w
                    weights[i].main_grad = ctx.main_grads[i]
                    weights[i].grad_added_to_main_grad = ctx.flags[i]
                return None
            """,
            line=7,
        ),
        Example(
            """
            def backward(ctx, grad_output):
                weight = ctx.weight
                if ctx.cpu_offloading:
                    weight = torch.nn.Parameter(weight, False)
                if ctx.fuse_wgrad_accumulation:
                    wgrad_gemm(grad_output, out=weight.main_grad)
            """,
            line=4,
        ),
        Example(
            """
            def _cast(weight):
                return quantize(weight, fp8_dtype)


            def wgrad(ctx, weight, x, dy):
                weight = _cast(weight)
                general_gemm(x, dy, out=weight.main_grad, accumulate=True)
            """,
            line=6,
        ),
        Example(
            """
            def finish(weight, wgrad):
                weight = weight.detach()
                if hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                return wgrad
            """,
            line=2,
        ),
        Example(
            """
            def matmul_add(x, weight, dy, aligned):
                if not aligned:
                    weight = weight.t().contiguous().t()
                weight.main_grad.add_(dy.t() @ x)
                return x @ weight
            """,
            line=3,
        ),
        Example(
            """
            def onload(module, device):
                for name, p in list(module.named_parameters(recurse=False)):
                    module.register_parameter(name, nn.Parameter(p.to(device)))


            class OffloadedMLP(nn.Module):
                def forward(self, x):
                    onload(self.fc1, x.device)
                    return self.fc1(x)  # fc1 writes main_grad in its backward
            """,
            line=3,
        ),
        Example(
            """
            def make_op(module):
                weight = module.weight
                if is_float8tensor(weight):
                    weight = torch.nn.Parameter(weight.dequantize())
                op = BasicLinear(accumulate_into_main_grad=module.fuse_wgrad_accumulation)
                op.weight = weight
                return op
            """,
            line=4,
        ),
        Example(
            """
            def make_branch(self):
                w = self.adapter.linear_in.weight
                op = te.ops.Linear(accumulate_into_main_grad=True)
                op.weight = torch.nn.Parameter(w.data)
                return op
            """,
            line=4,
        ),
        Example(
            """
            class FusedMLP(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight, gradient_accumulation_fusion):
                    weight = weight.contiguous().clone()
                    ctx.save_for_backward(x, weight)
                    return x.matmul(weight.t())

                @staticmethod
                def backward(ctx, dy):
                    x, weight = ctx.saved_tensors
                    wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
                    return dy.matmul(weight), None, None
            """,
            line=4,
        ),
        Example(
            """
            def restore_weights(ctx):
                refs = ctx.origin_weight_refs
                weights = [ref().detach() for ref in refs]
                for weight, main_grad in zip(weights, ctx.main_grads):
                    weight.main_grad = main_grad
                return weights
            """,
            line=3,
        ),
        Example(
            """
            def backward(ctx, dy):
                weights, origin_weights = list(ctx.weights), list(ctx.origin_weights)
                for i in range(ctx.num_gemms):
                    w = torch.nn.Parameter(origin_weights[i], origin_weights[i].requires_grad)
                    w.main_grad = ctx.main_grads[i]
                    origin_weights[i] = w

                main_grads = [w.main_grad for w in weights]
                general_grouped_gemm(ctx.inputs, dy, main_grads, accumulate=True)

                def mark(weight):
                    weight.grad_added_to_main_grad = True
                    return make_dummy_wgrad(weight)

                return [mark(weight) for weight in origin_weights]
            """,
            line=6,
        ),
        Example(
            """
            class GemmFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b, pattern=None):
                    b = b.detach()
                    fuse, main_grad = setup_fused_grad_accum(b, pattern)
                    ctx.main_grad = main_grad
                    return gemm(a, b)
            """,
            line=4,
        ),
        Example(
            """
            def _setup(b, pattern):
                assert hasattr(b, "main_grad"), "wrap the model for fused accumulation first"
                b.grad_added_to_main_grad = True
                return b.main_grad


            def forward(ctx, a, b, pattern):
                b = b.view(b.shape)
                ctx.main_grad = _setup(b, pattern)
                return gemm(a, b)
            """,
            line=8,
        ),
        Example(
            """
            class _GroupedLinear(torch.autograd.Function):
                @staticmethod
                def backward(ctx, dy):
                    origin_weights = list(ctx.saved_tensors[ctx.num_gemms :])
                    main_grads = [fetch() for fetch in ctx.main_grad_funcs]
                    for i in range(ctx.num_gemms):
                        origin_weights[i] = torch.nn.Parameter(origin_weights[i], False)
                        origin_weights[i].main_grad = main_grads[i]
                    accumulate = not getattr(origin_weights[0], "overwrite_main_grad", False)
                    return _wgrads(dy, main_grads, accumulate)
            """,
            line=7,
        ),
        Example(
            """
            def make_lora_branch(adapter, accumulate):
                branch = te.ops.Sequential()
                op = te.ops.Linear(
                    adapter.in_features, adapter.dim, accumulate_into_main_grad=accumulate
                )
                op.weight = nn.Parameter(adapter.linear_in.weight.detach().clone())
                branch.append(op)
                return branch
            """,
            line=6,
        ),
        Example(
            """
            class COCRowSeqParallelFunction(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    weight = ctx.weight
                    grad_output, weight = get_aligned_mm_inputs(grad_output, weight, 4)
                    grad_input = grad_output.matmul(weight)
                    total_input = ctx.saved_tensors[0]
                    npu_matmul_add_fp32(total_input, grad_output, weight.main_grad)
                    if hasattr(weight, "grad_added_to_main_grad"):
                        zero = getattr(weight, "zero_out_wgrad", False)
                        grad_weight = get_dummy_wgrad(weight.main_grad.shape, x.dtype, zero=zero)
                        weight.grad_added_to_main_grad = True
                    return grad_input, grad_weight
            """,
            line=5,
        ),
        Example(
            """
            def compute_grad_params(fc_op, dtype):
                weights = [maybe_dequantize(w, dtype) for w in fc_op._get_weight_tensors()]
                w_list = [get_main_grad_from_param(w) for w in weights]
                accumulate = get_accumulate_flag_in_param(weights[0])
                return w_list, accumulate
            """,
            line=2,
        ),
    ),
)


# -- the check: what makes a new object is in analysis/fresh_bindings.py, the reads and
# put-backs of main_grad and its flags in analysis/parameter_attributes.py ----------------
MESSAGE = (
    "`{name}` is rebound here to a new object ({how}), and `{name}.{attr}` is read from it at "
    "line {line}: the new object carries no main_grad or flags of the Parameter"
)


LIST_MESSAGE = (
    "`{name}` is bound here to new objects ({how}, one per weight), and `{attr}` is read from "
    "one of them at line {line}: the new objects carry no main_grad or flags of the Parameters"
)


SAVED_MESSAGE = (
    "`{name}` is rebound here to a new object ({how}) and handed to backward, which reads "
    "`{attr}` from it at line {line}: the copy carries no main_grad or flags of the "
    "Parameter; save the Parameter itself"
)


DEREF_MESSAGE = (
    "`{copy}` replaces the Parameter the weak reference gives back with a new object at "
    "once: it has none of the main_grad, flags or hooks the reference was kept to reach; "
    "use the dereferenced Parameter itself"
)


FLAG_MESSAGE = (
    "`grad_added_to_main_grad` is set here on a fresh copy of the weight (made by `{how}` at "
    "line {line}): Megatron's hooks read the flag from the Parameter, which stays unmarked; "
    "set it on the original Parameter (`origin_weight`)"
)


HELPER_FLAG_MESSAGE = (
    "`{what}` holds a fresh copy of the weight (made by `{how}` at line {line}), and "
    "`{helper}` sets `grad_added_to_main_grad` on it at line {call_line}: Megatron's hooks "
    "read the flag from the Parameter, which stays unmarked; keep the original Parameter "
    "where the bookkeeping reaches it"
)


ALIAS_MESSAGES = {
    "ctx": (
        "`{value}` is a new object over `{weight}`'s storage, kept on ctx in a function that "
        "fuses the wgrad into main_grad, and the weight itself is kept nowhere: backward "
        "reads main_grad and the flags from an object that has none; keep `{weight}` itself"
    ),
    "module": (
        "`{value}` is a new Parameter over `{weight}`'s storage, not `{weight}`: main_grad, "
        "its flags and the grad-accumulation hook stay on the original, and the module "
        "trains an object Megatron never wrapped; register `{weight}` itself"
    ),
    "module-path": (
        "`{value}` is a new Parameter made from `{weight}`'s values on this path, while the "
        "other path puts `{weight}` itself in the same slot: here the module trains an object "
        "Megatron never wrapped (no main_grad, flags or grad-accumulation hook); keep "
        "`{weight}` in the slot"
    ),
}


FORWARD_MESSAGE = (
    "`{attribute}` is rebound to a fresh Parameter in `{method}`, which runs on every forward: "
    "the new object has none of the main_grad, hooks or flags Megatron gave the Parameter "
    "when it wrapped the model; copy into the Parameter instead (`.data = ...`, `.copy_()`)"
)


STORED_MESSAGE = (
    "`{target}` is replaced here by a fresh Parameter, which carries none of the flags "
    "Megatron put on the weight: `{flag}` on the list's items (line {line}) is then the new "
    "object's, which Megatron's hooks never see; keep the weight object itself in the list"
)


OP_MESSAGE = (
    "`{target}` is given a fresh Parameter, but its op accumulates into main_grad: it writes "
    "the main_grad of an object Megatron never gave one, and the weight it copies gets no "
    "gradient; hand the op the weight Parameter itself"
)


def check(context: ModuleContext, out: Collector) -> None:
    for found in context.shared(forward_rebinds.rebindings):
        message = FORWARD_MESSAGE.format(attribute=found.attribute, method=found.method)
        out.report(CODE, found.site, message)
    aliased: set[int] = set()  # values the alias check reports: not again as an op's weight
    for alias in context.shared(fresh_aliases.fresh_aliases):
        aliased.add(id(alias.value))
        message = ALIAS_MESSAGES[alias.holder].format(
            value=_one_line(out.text(alias.value)), weight=alias.weight
        )
        out.report(CODE, alias.value, message)
    for unit in context.units:
        reported: set[int] = set()
        if (
            unit.survey.spells_main_grad
            or unit.survey.spells_grad_added
            or _calls_a_reader(unit)
            or _fetches_main_grad(unit)
        ):
            reported = _check_unit(unit, out)
        # The flag may be set by a helper of the file the copy is handed to.
        if unit.survey.spells_grad_added or (
            unit.survey.spells_main_grad and "grad_added_to_main_grad" in context.source
        ):
            _check_flags(unit, out, reported)
        if unit.name == saved_rebinds.FORWARD and "main_grad" in context.source:
            _check_saved(unit, out)
        if "Parameter(" in context.source and "main_grad" in context.source:
            for store, flag, where in stored_fresh.stored_fresh_parameters(unit):
                line = context.line_of(where)  # a pass over the file: only to report
                target = _one_line(out.text(store.targets[0].target))
                out.report(CODE, store, STORED_MESSAGE.format(target=target, flag=flag, line=line))
            for assignment in stored_fresh.fresh_op_weights(unit):
                if id(assignment.value) in aliased:
                    continue
                target = _one_line(out.text(assignment.targets[0].target))
                out.report(CODE, assignment, OP_MESSAGE.format(target=target))
    if "main_grad" in context.source and "ref()." in context.source:
        for unit in context.units:
            for stmt, _ in unit.statements():
                for copy in fresh_bindings.dereferenced_copies(stmt):
                    out.report(CODE, copy, DEREF_MESSAGE.format(copy=_one_line(out.text(copy))))


def _calls_a_reader(unit: Unit) -> bool:
    """``unit`` calls a helper of the file that reads main_grad or a flag from a weight it is
    handed (the helpers are read only for files spelling main_grad, units calling some)."""
    context = unit.context
    if "main_grad" not in context.source or not unit.survey.calls:
        return False
    readers = context.shared(reading_helpers.ReadingHelpers)
    return readers.calls_any(unit.survey.calls)


def _fetches_main_grad(unit: Unit) -> bool:
    """``unit`` binds a name spelling main_grad to what a call hands back for the weights it
    was given (``fuse, main_grad = setup(b, pattern)``), in a file spelling main_grad."""
    if "main_grad" not in unit.context.source:
        return False
    return any(reading_helpers.fetching_arguments(stmt) for stmt, _ in unit.statements())


def _check_saved(unit: Unit, out: Collector) -> None:
    """A copy made in ``forward`` and read as the weight by the ``backward`` beside it."""
    fresh = {
        d
        for d in unit.graph.defs
        if d.kind == "assign" and fresh_bindings.surely_new_object(d.name, d.value)
    }
    done: set[int] = set()
    for found in saved_rebinds.saved_copy_reads(unit, fresh):
        if found.fresh.index in done:
            continue
        done.add(found.fresh.index)
        message = SAVED_MESSAGE.format(
            name=found.fresh.name,
            how=unit.context.code(found.fresh.value.func).strip(),
            attr=found.attribute,
            line=unit.context.line_of(found.read),
        )
        out.report(CODE, found.fresh.node.owner, message)


def _one_line(text: str) -> str:
    """A value as the message quotes it: its first line, the rest elided (a call spread over
    lines would carry its comments into the message)."""
    first, _, rest = text.partition("\n")
    if not rest:
        return text
    code, _, _comment = first.partition("  #")  # a trailing comment, as ruff formats one
    return f"{code.rstrip()} ...)"


def _check_flags(unit: Unit, out: Collector, reported: set[int]) -> None:
    """The flag set on a fresh object whose binding was not reported already (a read of the
    flag from the same copy is one bug, reported once at the rebinding)."""
    helpers = unit.context.shared(module_provenance.returned_provenance)
    makers = unit.context.shared(fresh_bindings.fresh_makers)
    defined = unit.context.shared(file_functions.by_name)
    # A copy made on one arm of a choice only (``w = w if fuse else w.astype(dt)``) is left
    # to the reads: a flag set under the choice's own test is set on the kept weight.
    for found in fresh_flags.flags_on_copies(
        unit,
        lambda d: (
            not fresh_bindings.is_choice(d.value)
            and fresh_bindings.makes_fresh(d.name, d.value, helpers, makers, defined)
        ),
    ):
        if found.fresh.index in reported:
            continue
        made = fresh_bindings.made_by(found.fresh.name, found.fresh.value)
        how = unit.context.code(made.func).strip()
        line = unit.context.line_of(found.fresh.node.owner)
        if found.helper is None:
            out.report(CODE, found.target, FLAG_MESSAGE.format(how=how, line=line))
            continue
        message = HELPER_FLAG_MESSAGE.format(
            what=_one_line(out.text(found.target)),
            helper=unit.context.code(found.helper.func).strip(),
            call_line=unit.context.line_of(found.helper),
            how=how,
            line=line,
        )
        out.report(CODE, found.target, message)


def _check_unit(unit: Unit, out: Collector) -> set[int]:
    """Reports the rebindings read from; returns their definitions' indices."""
    helpers = unit.context.shared(module_provenance.returned_provenance)
    makers = unit.context.shared(fresh_bindings.fresh_makers)
    defined = unit.context.shared(file_functions.by_name)
    fresh = {
        d
        for d in unit.graph.defs
        if d.kind == "assign"
        and fresh_bindings.makes_fresh(d.name, d.value, helpers, makers, defined)
    }
    lists = fresh_bindings.fresh_lists(unit, helpers, makers)
    reported: set[int] = set()
    if not fresh and not lists:
        return reported
    # Attributes put back on the new object (``w.main_grad = main_grad``) by a statement
    # that the rebinding reaches: reads of those are answered by the copy put there.
    restored: set[tuple[int, str]] = set()
    for root, node in unit.expression_roots():
        for owner, attr in parameter_attributes.put_backs(root):
            for d in fresh_bindings.bindings_read(unit, owner, node, fresh, lists):
                restored.add((d.index, attr))
    readers = unit.context.shared(reading_helpers.ReadingHelpers)
    through = _calls_a_reader(unit)
    for root, node in unit.expression_roots():
        # read here, or by a helper of the file the name is handed to
        handed = [(arg, "main_grad") for arg in readers.read_arguments(root)] if through else []
        handed += [(arg, "main_grad") for arg in reading_helpers.fetching_arguments(root)]
        for owner, attr in [*parameter_attributes.reads(root), *handed]:
            for d in fresh_bindings.bindings_read(unit, owner, node, fresh, lists):
                if (d.index, attr) in restored:
                    continue
                if d in fresh and fresh_bindings.copy_ruled_out(d.name, d.value, node):
                    continue  # the read runs only where the weight was kept
                template = MESSAGE if d in fresh else LIST_MESSAGE
                message = template.format(
                    name=d.name,
                    how=unit.context.code(
                        (lists.get(d) or fresh_bindings.made_by(d.name, d.value)).func
                    ).strip(),
                    attr=attr,
                    line=unit.context.line_of(owner),
                )
                out.report(CODE, d.node.owner, message)
                reported.add(d.index)
    return reported
