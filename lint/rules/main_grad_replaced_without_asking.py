"""GMLP016: main_grad's contents replaced by code that never asks whether to overwrite."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
patterns = LazyModule("..analysis.patterns", __package__)
other_accumulators = LazyModule("..analysis.other_accumulators", __package__)
producer_overwrites = LazyModule("..analysis.producer_overwrites", __package__)
fsdp_resets = LazyModule("..analysis.fsdp_resets", __package__)

CODE = "GMLP016"
RULE = Rule(
    code=CODE,
    classes=(4,),
    name="main-grad-replaced-without-asking",
    summary=(
        "A write replaces main_grad's contents (a GEMM with `accumulate=False`, "
        "`matmul(out=main_grad)`, `main_grad.copy_(...)`) in code that reads neither "
        "`overwrite_main_grad` nor the sharding strategy."
    ),
    flags=(
        "a GEMM into `p.main_grad` (or a local bound to it, or through a `**kwargs` dict or a "
        "`functools.partial`) with `accumulate=False` / `beta=0` (a literal, a local that is "
        "always one, or a class constant `self.X` the file never sets otherwise), "
        "`torch.matmul` / `mm` with such an `out=`, `torch.addmm` & co. with "
        "`beta=0` into main_grad (`out=` its own input, or `main_grad.addmm_`) or with `out=` "
        "main_grad over another input, `copy_` into it (or `index_copy_`, `masked_scatter_`, "
        "`index_put_` / `put_` / `scatter_` not asked to add), or `p.main_grad[...] = "
        "...`, in a producer function (and the functions around it) that never mentions "
        "overwrite or sharding; and, in FSDP code that never sets `overwrite_main_grad`, "
        "a hook resetting `grad_added_to_main_grad = False` for a new backward; a "
        "per-backward consumer (it reads `grad_added_to_main_grad` or a microbatch switch) "
        "that copies into main_grad and never adds into it; a write that replaces a "
        "destination on a path no test of the function's own overwrite-or-add choice for "
        "that destination decides, or in a function with an `overwrite*` / `accumulate*` "
        "parameter it never reads; on accumulators under other names (a grad shard, an "
        "output buffer, an FP32 partition's `.grad`), in files that never spell main_grad: "
        "the same choice on a switch the caller hands in (also kernels written as functions: "
        "`copy(src, dst)`, `add(a, b, out=a)`), and a function reading the micro-step "
        "accumulation state that `copy_`s into `.grad` storage and adds into nothing"
    ),
    explanation="""
        Issue #19, class 4. main_grad accumulates the weight gradient over microbatches;
        only Megatron-FSDP with sharded gradients (ZeRO-2/3) wants it overwritten, and says
        so with `param.overwrite_main_grad`. A write that replaces the contents in code that
        never consults that flag (or the sharding strategy) keeps only the last
        microbatch's gradient in accumulate mode.

        Seen: in one function, a call whose `out=` is `X.main_grad` (or a `getattr` of it,
        or a local every binding of which reaching the call is main_grad storage, or is
        main_grad on some and the weight's `.grad` on the others, Megatron-LLaMA's `grad =
        weight.main_grad if hasattr(weight, "main_grad") else weight.grad`; without
        `out=`, the one such buffer handed positionally to a kernel with an accumulate
        switch, `_dw_kernel[grid](x, dy, mg, ACCUMULATE=False)`: a switch is matched in
        any case, and the finding is on the switch when the call spells it) with
        `accumulate=False` or `beta=0` (literals, a local every reaching binding of which is such a
        literal, or `self.X` / `cls.X` where X is a class constant of the class or a base of
        the file, `wgrad_accumulate = False` in a mixin, that the file binds to nothing
        else: analysis/class_constants.py), the same arguments passed as `**kwargs` where
        `kwargs` is one dict literal or pinned by a `functools.partial` the call's name is
        bound to (`_wgrad_gemm = partial(general_gemm, accumulate=False)` at module level,
        or in the function: analysis/partials.py; the call's own keywords win), a `matmul` / `mm` /
        `bmm` with such an `out=` and no accumulate switch, torch's `beta * input + a @ b`
        kernels (`addmm`, `baddbmm`, `addbmm`, `addmv`, `addr`) with `beta=0` writing into
        their own input (`torch.addmm(mg, a, b, beta=0.0, out=mg)`, `mg.addmm_(a, b,
        beta=0)`: beta zero discards what main_grad held) or with `out=` main_grad over
        another input, `copy_` into main_grad or a local bound to it (and the other methods
        that copy values in: `index_copy_` and `masked_scatter_` replace the rows or
        elements they select, `index_put_` / `put_` unless `accumulate=` is given and not
        literally off, `scatter_` unless given a `reduce=`), a kernel handed main_grad as
        its destination (`triton_copy(g, p.main_grad)`; per expert, a list of main_grads
        given to `torch._foreach_copy_` or `torch._foreach_zero_`), and `X.main_grad[...] =
        value`; the function and the functions it is nested in are searched for a mention
        of overwrite, sharding, FSDP or the ZeRO stage (in their names and strings, not their
        comments or docstrings; until 2026-12-07 any mention anywhere in the file silenced
        the check for every function of it: a config reader or a log line beside the
        producer decided for it). In a file that asks elsewhere, a write under a test of
        the sharding strategy (`if gbuf.is_data_distributed:`) is that test's choice, as on
        the asking producer's paths below; not seen there: a producer's write moved into a
        helper (the helper is left alone, its callers' tests may ask for it). Likewise the
        per-backward consumer check asks the module only for its top-level statements.
        Only producer code is judged: a
        function, or one it is nested in, named `backward*`, `*wgrad*`, `*grad_weight*`,
        `*weight_grad*`, `*_dw` or with a `bwd` part and no `fwd` part (`fp8_mlp_bwd`, blind
        corpus 22; not `step_after_fwd_bwd`), or one that marks `grad_added_to_main_grad`
        (it delivers a weight gradient whatever its name); grad buffers, optimizers and
        scripts that consolidate `.grad` into main_grad once per step copy on purpose. A
        product computed into main_grad (a call named for a product, `gemm`, `matmul`,
        `gmm` or `...mm`, with `out=` main_grad or its accumulate switch off) is judged in
        any function, whatever its name (blind corpus 23: a wgrad store's drain,
        `overlap_matmul`, running `torch.matmul(dy.t(), x, out=weight.main_grad.data)`): no
        consumer computes a product into main_grad. In a file that asks somewhere, such a
        function that the file names elsewhere (called, or handed on as in `(_replace if r
        else _add)(w, x, dy)`) is left to its callers, one of which may ask (the review). A
        product whose `out=` is a main_grad returns that buffer: `weight.main_grad = wgrad`
        after `wgrad, _ = gemm(..., out=weight.main_grad if fuse else None)` (Transformer
        Engine's Paddle linear) keeps it.

        A reset then an add (blind corpus 7, MindSpeed's MXFP8 grouped `gmm_add_impl`):
        main_grad zeroed (`zero_()`, `fill_()`, `torch._foreach_zero_`) on a path to an add of
        a product computed there into the same storage (`add_(dy.t() @ x)`, an `out=` GEMM
        that accumulates, a kernel named for adding a product, `npu_add_quant_gmm_(mg, ...)`,
        `wgrad_gemm_accum_fp32(x, dy, mg)`), in a function that never asks: the pair replaces
        main_grad whatever the function is named (analysis/zeroed_accumulation.py). A reset
        alone (`zero_grad_buffer`) and an add of a gradient computed elsewhere
        (`main_grad.add_(p.grad)`) are left alone. Not seen: `main_grad.mul_(0)`, and a reset
        in another function than the add.

        A producer whose own code asks (its names and strings, not comments or docstrings)
        but replaces on a path no asking test guards (blind corpus 8, HYGON's backward with
        `te_general_gemm(out=weight.main_grad)` moved out of `if hasattr(weight,
        "__fsdp_param__"):`): a replacing write with no switch or one hard-coded off
        (`te_general_gemm` is Megatron's wrapper that always replaces), not inside an `if`
        or a conditional expression whose test names overwrite, FSDP, sharding (`shard*`) or
        distribution (`gbuf.is_data_distributed`), in a function that neither leaves early
        on such a test, matches on one, nor allocates main_grad itself.

        Whatever the function's name (since 2026-12-05): a `copy_` into main_grad of a
        value named for the weight gradient (`wgrad*`, `grad_weight`, a `dw` part: blind
        corpus 8's GTP drain of reduce-scattered wgrads), unless the value is made from
        main_grad itself (all-reduced, upcast) or the function or value says restore
        (`saved`, `backup`, `snapshot`, `checkpoint`, `load`; a binding that computes a
        product is no restore, whatever it calls on the way: MindSpeed's
        `GMMFunction.builder.load().npu_gmm(...)`, blind corpus 24). The value may be
        reshaped on the way (`grad_weight.view(-1, n)`, `.reshape`, `.t()`, `.contiguous()`,
        `.to(...)`, `.float()`, `.flatten()`: the fb-overlap store's drain, blind corpus
        24). A local bound to main_grad on some paths and to None on the others
        (`main_grad = None` / `if fuse: main_grad = w.main_grad`) is main_grad where an
        in-place method is called on it, since on None the call raises (blind corpus 25's
        DeepGEMM linear); and a gradient hook (its name
        says hook) that copies the incoming `Y.grad` into another object's `.grad` or into
        any main_grad, clears `Y.grad` (`= None`, `del`) and adds nowhere (blind corpus 9's
        NeMo main-params hook; blind corpus 11's Megatron-DeepSpeed DDP `param_hook` with
        `copy_` for `add_`): autograd accumulates into an uncleared `Y.grad` itself.

        An `out=` that is a conditional (`out=weight.main_grad if fuse_wgrad_accumulation
        else None`) writes its arm that is not None (each arm, when both are tensors), as
        every write of the linter reads it since blind corpus 12 (ROCm's Paddle
        `_linear_bwd_non_fp8` with `accumulate=False` and an `accumulate*` parameter it
        never reads; that finding is on the `accumulate=` argument).

        A wrapper of the file that every call hands main_grad itself (`out=ctx.main_grad`,
        `analysis/handed_main_grads.py`), called only from producers, is judged as they are:
        a replacing write into that parameter (`out.copy_(gemm(a, dy))` where the twin
        accumulates) is reported unless the wrapper or a caller asks (blind corpus 20,
        Primus-Turbo's grouped wgrad wrapper), or the wrapper reads what the buffer holds
        (a use other than a method call on it, its shape / dtype / device or a None test:
        MindSpeed's `_add_to_quant_grad` dequantizes it, adds and copies back), or tests a
        parameter every call hands a literal (`inplace_add_to_out=True`: the branch taken is
        the callers' constant); a call's `out=` is written there, not read (since 2026-12-07:
        `torch.matmul(dy.t(), x, out=out)` in the wrapper had counted as reading `out`). Not
        seen there: a wrapper some of whose calls hand another buffer, item assignments into
        the handed buffer (`out[:] = g`).

        Not seen: the decision made by a caller in another file (such a write is reported
        although the caller may ask), GEMMs whose default is to replace but that are given
        no `accumulate=` (only torch's matmuls are known to replace), dicts of arguments
        built up entry by entry, partials kept on `self`, in containers or made in another
        file, `main_grad.mul_(0)` followed by an add (a zeroing spelled as arithmetic), and
        producer functions named otherwise that mark nothing.

        The converse (accumulating where overwriting was needed, Megatron-LM #4849's PR
        branch): in a file of an FSDP integration (it names FSDP) that never sets
        `overwrite_main_grad` (an assignment or `setattr`; reading it, as a local copy
        of the sharding strategy, sets nothing: MindSpeed's MindSpore custom_fsdp), a hook
        or backward callback (a function named `*hook*` or `*backward*`) that resets
        `grad_added_to_main_grad = False` (or by `setattr`) for a new backward. Where
        gradients are sharded, each microbatch's main_grad is a fresh bucket and only
        `overwrite_main_grad` tells the fused wgrad GEMM not to add to what it holds. Not
        seen: an integration that zeroes those buckets itself in its hook
        (reported; suppress with the reason), one whose file never names FSDP, and resets
        in functions named otherwise.

        A helper of the file is judged with the functions that call it by name (one level):
        called from a producer it is one, called from a function that asks
        `overwrite_main_grad` it is left alone. Not seen: `accumulate=False` handed to such
        a helper as an argument.

        The consumer side (a fork's Megatron-FSDP v2 reduction, Autumn1998/Megatron-LM
        4a4c5706): code that moves each backward's autograd `.grad` into the main-grad
        buffer runs once per microbatch, so it must add unless the buffer is fresh. Seen: a
        function that runs once per backward (it reads `grad_added_to_main_grad`, or a name
        or attribute naming a microbatch such as `ctx.is_last_microbatch`) and `copy_`s into
        main_grad storage (`p.main_grad`, `p.get_main_grad()`, a local bound to either),
        while no write in it adds into main_grad storage (`add_`, `addmm_`, `+=`, a GEMM
        `out=` that accumulates) and it never names `overwrite_main_grad`. A consumer that
        adds on some path has made the choice, and is left alone whatever decides it; a
        consolidation that runs once per step (nothing in it says per backward) is left
        alone. Not seen: the per-backward evidence in a caller, a copy into a buffer that is
        not recognisably main_grad storage, and a copy whose caller guarantees a fresh
        buffer each microbatch (reported: suppress with the reason).

        A switch handed in and heeded on one path only (a fork's Megatron-FSDP v2
        `reduce_grad(overwrite_grad=...)`, Autumn1998/Megatron-LM dca96853): where an `if` of
        a function chooses between replacing a destination (`copy_`, `zero_`, `fill_`, a
        GEMM `out=` with accumulate off, `D[...] =`) and adding to it (`add_`, `+=`, an
        accumulating GEMM), the function itself says that this destination's write mode is
        decided by that test. Another write in the function that replaces the same
        destination (the same expression text) on a path that no test on the same values
        (or on locals computed from them, through the data flow) decides ignores the switch:
        a fast path that copies while the caller asked to accumulate. No main_grad spelling
        is needed at the write; the file must name a trigger. Not seen: a switch decided
        in another function, the same buffer reached through two different expressions,
        and a replacing write where replacing is right whatever the switch says (a buffer
        reduced in place and copied back onto itself: reported, suppress with the reason).

        A computed switch is a choice too (blind corpus 16, Fast-LLM's
        `update_linear_gradients`: one branch hands `input_row_sparse_matmul(...,
        out=weight.grad_buffer, accumulate=not param_get_and_unset_is_zero(weight))`,
        another `torch.addmm(..., beta=beta, out=weight.grad_buffer)`, a third
        `torch.mm(lhs, rhs, out=weight.grad_buffer)`): a write that adds to a destination
        under an `accumulate=` / `beta=` value that is not a literal (nor a local bound only
        to literals) says that value decides how that destination is written. A write that
        replaces the same destination, storage the function was handed (a parameter, `self`,
        an attribute of one), on a path no test of that value's terms decides (the
        destination's own owner is not one: `weight` is the object, the call on it the
        decision) ignores it. Files that never spell main_grad are analysed for this when
        they hand a GEMM `accumulate=` such a value and spell `out=`. Not seen: the switch
        computed into a local that another function reads, and a destination spelled two
        ways.

        An accumulator that records whether it holds a gradient (blind corpus 17, YaFSDP's
        `Narrow.backward`: copy while `ctx.metaparam.grad_accumulation` is False, add once
        it is True, then set it True; analysis/accumulation_records.py), in a file that
        never spells main_grad: a function that sets such a record (an attribute named for
        accumulation, not for fusion, set to `True`) and never reads it, while it replaces
        storage reached through the record's owner, drops every earlier microbatch; one
        that reads the record on one object and sets it on another
        (`ctx.metaparam.param.grad_accumulation = True` beside a choice on
        `ctx.metaparam.grad_accumulation`) leaves the record the choice reads False for
        ever, and is reported at the assignment. Files are analysed for this when their
        text sets such an attribute to `True` and spells a replacing write. Not seen: a
        record kept under another word (`is_zero`, `fresh`), set through a helper, or
        read in another function than the one that sets it.

        Its degenerate form: a function with a parameter named for the choice
        (`overwrite*`, `accumulate*`) that it never reads, and a write that replaces storage
        it was handed or reaches through an object (a parameter or `self`, an attribute of
        one, a local bound to such an attribute or to a method call on one that allocates
        nothing): a caller asking to accumulate gets an overwrite. Writes into buffers the
        function allocates are left alone; a function that reads one of several such
        parameters is left alone. Not seen: the parameter read only to be ignored
        (`del overwrite`), and a parameter named otherwise.

        Accumulators under other names (issue #19 class 4, from Fast-LLM #551 and DeepSpeed
        #7906, generalised): a file that never spells main_grad is analysed when a `def`
        takes a parameter named `accumulate*` / `overwrite*` (a switch handed in) or it
        names the accumulation boundary. There, (a) the switch-handed-in check above runs
        with the buffer under any name, counting kernels written as functions that take
        their destination (`triton_copy(src, dst)` / a `*copy*` function of two positional
        arguments replaces the second, `_foreach_copy_(dst, src)` / `copyto(dst, src)` the
        first; `torch.add(a, b, out=a)` / `fused_add(a, b, a)` adds into its output when
        that is one of its inputs), but only a choice whose test reads a parameter of the
        function (directly or through a local bound from one; not the destination itself)
        counts, and the never-read form judges only tensors' own writes (`d[k] = v` may
        fill a dict); (b) a function that reads the per-micro-step accumulation state (a
        name with `microbatch`, `micro_step` or `accumulation_boundary`) and `copy_`s into
        gradient storage (`X.grad`, a `narrow` / `view` / slice of it, or a local bound to
        one) while adding into nothing (a `+= 1` counter aside) drops the earlier
        micro-steps' gradients. Everywhere, a side of a choice that reads the destination
        it replaces (`tmp.copy_(D); tmp.add_(g); D.copy_(tmp)`, an add staged through
        another device) is an add, not an overwrite. Not seen: a decision taken from a
        configuration count instead of the per-step state (DeepSpeed #7981's
        `gradient_accumulation_steps > 1`: both are attributes, the file does not say
        which is state), kernels named neither copy nor add, destinations reached through
        two different expressions, consumers whose micro-step evidence is in a caller, and
        files naming none of the triggers.
    """,
    fix="""
        Accumulate (`accumulate=True`, `main_grad.add_(...)`), or decide by
        `not getattr(param, "overwrite_main_grad", False)`. No automatic fix.
    """,
    fix_summary="none (accumulate, or ask overwrite_main_grad)",
    valid=(
        Example(
            """
            def pre_backward_hook(fsdp_module, grads):
                for group in fsdp_module.param_groups:
                    for param in group.params:
                        param.grad_added_to_main_grad = False
                        param.overwrite_main_grad = group.shards_gradients
            """
        ),
        Example(
            """
            def finish_step(model):
                for param in model.parameters():
                    if param.grad is not None:
                        param.main_grad.copy_(param.grad)
            """
        ),
        Example(
            """
            def wgrad(weight, x, dy):
                accumulate = not getattr(weight, "overwrite_main_grad", False)
                general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            """
        ),
        Example(
            """
            def wgrad(weight, x, dy):
                general_gemm(x, dy, out=weight.main_grad, accumulate=True)
            """
        ),
        Example(
            """
            def reduce_grads(params, fresh):
                for param in params:
                    if getattr(param, "grad_added_to_main_grad", False):
                        continue
                    main_grad = param.get_main_grad()
                    if fresh:
                        main_grad.copy_(param.grad)
                    else:
                        main_grad.add_(param.grad)
            """
        ),
        Example(
            """
            def reduce_grad(self, param, overwrite_grad=False):
                grad = param.main_grad
                shard = self.shard_of(param)
                if self.group_size == 1:
                    if overwrite_grad:
                        shard.copy_(grad)
                    else:
                        shard.add_(grad)
                    return
                reduced = reduce_scatter(grad)
                if overwrite_grad:
                    shard.copy_(reduced)
                else:
                    shard += reduced
            """
        ),
        Example(
            """
            def reduce_grad(self, param, accumulate=True):
                staged = torch.empty_like(param.main_grad)
                staged.copy_(param.main_grad)
                self.reduce(staged, accumulate=accumulate)
            """
        ),
        Example(
            """
            def partition_grad(param, buffer, n, accumulate=False):
                dest = buffer.narrow(0, 0, n)
                src = param.grad.view(-1).narrow(0, 0, n)
                if not accumulate:
                    dest.copy_(src)
                elif src.device == dest.device:
                    dest.add_(src)
                else:
                    staged = torch.empty(n, dtype=src.dtype, device=src.device)
                    staged.copy_(dest)
                    staged.add_(src)
                    dest.copy_(staged)
            """
        ),
        Example(
            """
            def tally(counts, rows, accumulate=True):
                for row in rows:
                    if row.key in counts:
                        counts[row.key] += row.value
                    else:
                        counts[row.key] = row.value
                counts["total"] = len(rows)
                counts["seen"] = copy(rows)
            """
        ),
        Example(
            """
            def chunked_wgrad(chunks, dys, shape):
                out = torch.empty(shape)
                out.zero_()
                for i, (x, dy) in enumerate(zip(chunks, dys)):
                    gemm(x, dy, out=out, accumulate=i > 0)
                return out
            """
        ),
        Example(
            """
            class Narrow(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    meta = ctx.metaparam
                    view = meta.grad_buffer.narrow(0, meta.offset, meta.numel)
                    if not meta.grad_accumulation:
                        view.copy_(grad_output.view(-1))
                    else:
                        view.add_(grad_output.view(-1))
                    meta.grad_accumulation = True
                    return None, None
            """
        ),
        Example(
            """
            def _add_to_quant_grad(target, grad):
                fp32 = target.meta.dequantization(target.data)
                fp32.add_(grad)
                target.data.copy_(target.meta.quantization(fp32))


            def backward_hook(param):
                if param.grad is not None and not param.grad_added_to_main_grad:
                    _add_to_quant_grad(param.main_grad, param.grad)
            """
        ),
        Example(
            """
            def use_fsdp(config):
                return config.use_megatron_fsdp


            def _grad_acc(param, gbuf):
                if not param.grad_added_to_main_grad:
                    if gbuf.is_data_distributed:
                        param.main_grad = param.get_main_grad()
                        param.main_grad.copy_(param.grad)
                    else:
                        param.main_grad.add_(param.grad)
                param.grad_added_to_main_grad = False
            """
        ),
        Example(
            """
            def _wgrad_impl(x, dy, out=None):
                torch.add(out, torch.matmul(dy.t(), x), out=out)


            class ExpertFn(torch.autograd.Function):
                @staticmethod
                def backward(ctx, dy):
                    x, weight = ctx.saved_tensors
                    _wgrad_impl(x, dy, out=weight.main_grad)
                    weight.grad_added_to_main_grad = True
                    return dy @ weight, torch.zeros_like(weight)
            """
        ),
        Example(
            """
            class WeightGradStore:
                @classmethod
                def overlap_matmul(cls, grad_store_cache):
                    inputs, grad_output, weight, group_list = grad_store_cache
                    if get_args().gemm_gradient_accumulation_fusion:
                        npu_groupmatmul_add_fp32(inputs, grad_output, group_list, weight.main_grad)
                    else:
                        gmm = GMMFunction.builder.load().npu_gmm
                        grad_weight = gmm([inputs.t()], [grad_output], [], group_list)[0]
                        weight.main_grad.data.add_(grad_weight.view(-1, weight.shape[-1]))
            """,
        ),
    ),
    invalid=(
        Example(
            """
            def pre_backward_hook(fsdp_module, grads):
                for group in fsdp_module.param_groups:
                    for param in group.params:
                        setattr(param, "grad_added_to_main_grad", False)
            """,
            line=4,
        ),
        Example(
            """
            def wgrad(weight, x, dy):
                torch.matmul(dy.t(), x, out=weight.main_grad)
            """,
            line=2,
        ),
        Example(
            """
            def wgrad(weight, x, dy):
                general_gemm(x, dy, out=weight.main_grad, accumulate=False)
            """,
            line=2,
        ),
        Example(
            """
            def wgrad(weight, x, dy):
                weight.main_grad.copy_(dy.t() @ x)
            """,
            line=2,
        ),
        Example(
            """
            class _Linear(torch.autograd.Function):
                @staticmethod
                def backward(ctx, dy):
                    def compute():
                        torch.mm(dy.t(), ctx.x, out=ctx.weight.main_grad)

                    compute()
            """,
            line=5,
        ),
        Example(
            """
            def reduce_grads(params, fresh):
                for param in params:
                    if getattr(param, "grad_added_to_main_grad", False):
                        continue
                    main_grad = param.get_main_grad()
                    main_grad.copy_(param.grad)
            """,
            line=6,
        ),
        Example(
            """
            def reduce_grad(self, param, overwrite_grad=False):
                grad = param.main_grad
                shard = self.shard_of(param)
                if self.group_size == 1:
                    shard.copy_(grad)
                    return
                reduced = reduce_scatter(grad)
                if overwrite_grad:
                    shard.copy_(reduced)
                else:
                    shard += reduced
            """,
            line=5,
        ),
        Example(
            """
            def reduce_grad(self, param, accumulate=True):
                reduced = all_reduce(param.main_grad)
                self.shard_of(param).copy_(reduced)
            """,
            line=3,
        ),
        Example(
            """
            def reduce_gradients(self, accumulate=False):
                if self.fsdp_size > 1:
                    reduced = reduce_scatter(self.grad_buffer)
                    if accumulate:
                        triton_add(self.grad_shard, reduced, self.grad_shard)
                    else:
                        triton_copy(reduced, self.grad_shard)
                else:
                    triton_copy(self.grad_buffer, self.grad_shard)
            """,
            line=9,
        ),
        Example(
            """
            def wgrad(weight, x, dy):
                torch.addmm(weight.main_grad, dy.t(), x, beta=0.0, out=weight.main_grad)
            """,
            line=2,
        ),
        Example(
            """
            import functools

            _wgrad_gemm = functools.partial(general_gemm, accumulate=False)


            def wgrad(weight, x, dy):
                _wgrad_gemm(x, dy, out=weight.main_grad)
            """,
            line=7,
        ),
        Example(
            """
            def scatter_wgrads(weight, active, dw):
                view = weight.main_grad.view(weight.shape)
                view.index_copy_(0, active, dw.float())
                weight.grad_added_to_main_grad = True
            """,
            line=3,
        ),
        Example(
            """
            def linear_wgrad(x, dy, weight, fuse_wgrad_accumulation, accumulate_into_main_grad):
                wgrad, _ = gemm(
                    x,
                    dy,
                    accumulate=False,
                    out=weight.main_grad if fuse_wgrad_accumulation else None,
                )
                return wgrad
            """,
            line=5,
        ),
        Example(
            """
            def update_gradients(weight, lhs, rhs, sparse):
                if sparse:
                    sparse_matmul(lhs, rhs, out=weight.grad_buffer, accumulate=not is_zero(weight))
                else:
                    torch.mm(lhs, rhs, out=weight.grad_buffer)
            """,
            line=5,
        ),
        Example(
            """
            class Narrow(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    meta = ctx.metaparam
                    meta.grad_buffer.narrow(0, meta.offset, meta.numel).copy_(grad_output.view(-1))
                    meta.grad_accumulation = True
                    return None, None
            """,
            line=5,
        ),
        Example(
            """
            class Narrow(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    meta = ctx.metaparam
                    view = meta.grad_buffer.narrow(0, meta.offset, meta.numel)
                    if not meta.grad_accumulation:
                        view.copy_(grad_output.view(-1))
                    else:
                        view.add_(grad_output.view(-1))
                    meta.param.grad_accumulation = True
                    return None, None
            """,
            line=10,
        ),
        Example(
            """
            def _bgrad_wrapper(a, dy, accumulate_into_out=False, out=None):
                if not accumulate_into_out:
                    return gemm(a, dy)
                out.copy_(gemm(a, dy))
                return torch.zeros(out.shape, dtype=dy.dtype)


            class GroupedGemm(torch.autograd.Function):
                @staticmethod
                def backward(ctx, dy):
                    a, b = ctx.saved_tensors
                    db = _bgrad_wrapper(a, dy, accumulate_into_out=ctx.fuse, out=ctx.main_grad)
                    return dy @ b, db
            """,
            line=4,
        ),
        Example(
            """
            def use_fsdp(config):
                return config.use_megatron_fsdp and config.overwrite_main_grad


            class _GroupedMLP(torch.autograd.Function):
                @staticmethod
                def backward(ctx, dy):
                    torch.matmul(dy.t(), ctx.x, out=ctx.weight.main_grad)
                    ctx.weight.grad_added_to_main_grad = True
                    return dy @ ctx.weight, None
            """,
            line=8,
        ),
        Example(
            """
            def _wgrad_impl(x, dy, out=None):
                torch.matmul(dy.t(), x, out=out)


            class ExpertFn(torch.autograd.Function):
                @staticmethod
                def backward(ctx, dy):
                    x, weight = ctx.saved_tensors
                    _wgrad_impl(x, dy, out=weight.main_grad)
                    weight.grad_added_to_main_grad = True
                    return dy @ weight, torch.zeros_like(weight)
            """,
            line=2,
        ),
        Example(
            """
            class WeightGradStore:
                @classmethod
                def overlap_matmul(cls, entry):
                    x, dy, weight = entry
                    torch.matmul(dy.t(), x, out=weight.main_grad.data)
            """,
            line=5,
        ),
        Example(
            """
            class WeightGradStore:
                @classmethod
                def overlap_matmul(cls, grad_store_cache):
                    inputs, grad_output, weight, group_list = grad_store_cache
                    if get_args().gemm_gradient_accumulation_fusion:
                        npu_groupmatmul_add_fp32(inputs, grad_output, group_list, weight.main_grad)
                    else:
                        gmm = GMMFunction.builder.load().npu_gmm
                        grad_weight = gmm([inputs.t()], [grad_output], [], group_list)[0]
                        weight.main_grad.data.copy_(grad_weight.view(-1, weight.shape[-1]))
            """,
            line=10,
        ),
        Example(
            """
            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                main_grad = None
                if ctx.accumulate_into_main_grad:
                    main_grad = weight.main_grad.detach()
                wgrad = dy.t() @ x
                if main_grad is not None:
                    main_grad.copy_(wgrad.float())
                return None, None
            """,
            line=8,
        ),
    ),
)


# -- the check: the findings and their messages are in analysis/producer_overwrites.py (and
# overwrite_findings.py, which it runs), fsdp_resets.py and other_accumulators.py ----------
def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if "main_grad" not in source:
        # A gradient accumulator under another name (a grad shard, an output buffer handed
        # in): the function's own overwrite-or-add choice is the evidence, no spelling is.
        other_accumulators.check(context, out)
        return
    if "fsdp" in source.lower():
        fsdp_resets.check(context, out)
    producer_overwrites.check(context, out)
