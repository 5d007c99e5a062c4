"""GMLP030: the Parameter's main_grad, flag or weakref taken from a tensor standing in for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule
from ..wgrad_words import STORE_PUT_METHODS

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
module_provenance = LazyModule("..analysis.module_provenance", __package__)
provenance = LazyModule("..analysis.provenance", __package__)
stand_ins = LazyModule("..analysis.stand_ins", __package__)
marking_calls = LazyModule("..analysis.marking_calls", __package__)
marking_helpers = LazyModule("..analysis.marking_helpers", __package__)
stand_in_uses = LazyModule("..analysis.stand_in_uses", __package__)
store_calls = LazyModule("..analysis.store_calls", __package__)

CODE = "GMLP030"
RULE = Rule(
    code=CODE,
    classes=(1,),
    name="main-grad-on-stand-in",
    summary=(
        "main_grad is read or written, `grad_added_to_main_grad` is set, the weight gradient "
        "is put on `.grad`, or a weakref is taken through a tensor standing in for the "
        "Parameter (a restored, quantized or "
        "materialized copy), which carries none of the Parameter's attributes."
    ),
    flags=(
        "`X.main_grad` / `getattr(X, 'main_grad')`, `X.grad_added_to_main_grad = True`, "
        "`X.grad = ...` / `X.grad += ...`, `weakref.ref(X)`, `WeightGradStore.put(X, ...)`, "
        "a gradient hook fired as `X.<m>_hook()` (Paddle's `_apply_backward_hook`; not a "
        "`register_*` / `remove_*` or a query) or, "
        "where a weight is marked, a "
        "dummy shaped like X, where X is known to be a quantized, gathered or detached "
        "(`w.detach()`, `w.clone()`) copy of the weight or a holder's tensor field beside "
        "its Parameter field "
        "(also through `ctx` attributes, `save_for_backward` and the module's helpers), or "
        "the restored copy of a Parameter the function names `origin_X`; main_grad looked up "
        "(`X.main_grad`, `get_main_grad_from_param(X)`) on a name restored from saved tensors "
        "while the function marks one other, unrestored expression (or, converse, such a "
        "name or list of them handed to `get_dummy_wgrads_for_params`); the mark set through "
        "a name "
        "that held the Parameter where main_grad was taken and was then rebound to a saved "
        "tensor; under a CPU-offload test, main_grad hung on a restored name the function "
        "marks, with no binding of it from `ctx` (`w = ctx.weight_object`)"
    ),
    explanation="""
        Issue #19, class 1 (which object). A fused path handles several objects for one
        weight: the Parameter, which Megatron gave `main_grad` and whose
        `grad_added_to_main_grad` its hooks read, and tensors standing in for it: the copy
        restored from `ctx` / saved tensors, the FP8-quantized weight, the weight
        all-gathered for a parallel scheme. Writing the wgrad through the stand-in's
        `main_grad` fails or lands in a buffer nobody reduces; a dummy sized from it, a flag
        set on it or a weakref kept of it leaves the Parameter's bookkeeping undone.

        Seen (analysis/provenance.py): names bound to a quantize / cast / all-gather call,
        `.to(<float8 dtype>)`, `w.detach()` / `w.clone()` of a weight (not of a gradient
        buffer: a new tensor object, without the Parameter's attributes; also
        `tuple(w.detach() for w in ws)`, blind corpus 25's FSMoE), or a helper of the
        module whose returns all are such copies
        (analysis/module_provenance.py: also a helper returning another helper's copy, and a
        buffer an all-gather fills, `all_gather_into_tensor(buf, w); return buf`); names spelled as
        copies (`*_fp8`, `weightmat`, `full_weight`, `gathered`); `ctx` attributes every
        function of the file stores a copy in (`ctx.w = weight_fp8` in forward makes
        `ctx.w` a copy in backward); `ctx.w_ref = weakref.ref(<copy>)` dereferenced as
        `ctx.w_ref()`; the positions of `ctx.save_for_backward(...)` unpacked from
        `ctx.saved_tensors`; and a restored name `w` where the function also names the
        Parameter `origin_w`; per expert, a list or comprehension of such copies
        (`[quantize(w) for w in weights]`, or `L = []` filled only by `L.append(<copy>)`), its
        items `L[i]` and the loop variables that walk it (`for wq in L`, `enumerate(L)`,
        `zip(W, L)`; analysis/iteration.py, analysis/stand_ins.py); a dict comprehension of
        copies (`{e: quantize(w) for e, w in enumerate(weights)}`) walked through
        `.values()` / `.items()` or indexed; a name bound by a walrus as by an assignment
        (`if (wq := quantize(w)) is not None:`); the tensor field of a holder class that
        keeps the Parameter in another field (`param: nn.Parameter` beside `full:
        torch.Tensor` in a dataclass, NamedTuple or `__init__`), read as `self.full` in its
        methods or through a name annotated with the class or a `ctx` attribute holding one
        (analysis/holders.py). In a function that marks a weight, a weight-shaped allocation
        (the dummy: `X.new_zeros(...)`, `torch.zeros_like(X)`, `torch.zeros(X.shape)`,
        `get_dummy_wgrad(list(X.size()), ...)`) shaped like such a copy is reported too: it
        has the gathered or quantized shape and dtype, not the Parameter's (a weight only
        restored beside an `origin_` twin is not: it may be the forward input the dummy is
        handed back for, as in MindSpeed's GMM). Reads of
        main_grad inside the block that marks one weight are
        GMLP007's; reads of `overwrite_main_grad` / `zero_out_wgrad` from a stand-in are
        GMLP007's too.

        A weakref is kept for backward to reach the Parameter whatever the path, so for a
        weakref a quantized copy on one path is enough (since blind corpus 7): `weakref.ref(w)`
        of `w = quantize(weight) if fp8 else weight`, and of each element of a list filled
        with quantized copies under `if fp8:` (`[weakref.ref(w) for w in weights_fp8]`, a
        comprehension's variable walking the list). A copy gathered on one path only is not
        reported (code that materializes distributed weights handles their bookkeeping on
        that path: Transformer Engine's GroupedLinear reads its saved weights back there).

        A mark made by a call (blind corpus 8): a helper of the file that marks the weight
        it is handed (analysis/marking_helpers.py), or Transformer Engine's
        `get_dummy_wgrads_for_params([...])`, which marks each element of the list it is
        given (analysis/marking_calls.py's `KNOWN_MARKERS`), given a copy as above; or given
        a name unpacked from saved tensors (`(x, w) = op_ctx.saved_tensors`) while the same
        function takes main_grad from one other expression (`get_main_grad_from_param(
        weight_param)`, `linear_op.weight.main_grad`): the code names the Parameter there,
        so the restored tensor is not it. With main_grad taken from several objects, which
        is whose is not known and nothing is reported. The list may be handed by name
        (blind corpus 24, a TE fork's grouped linear: `get_dummy_wgrads_for_params(ws)`
        with `ws` peeled off the saved tensors in slices, `saved = saved[3:]; xs, saved =
        saved[:n], saved[n:]; ws, saved = ...`, followed four bindings deep, while main_grad
        comes from `get_main_grad_from_param(w) for w in weights`).

        The converse (blind corpus 12, pggPL's `BackwardLinearAdd`): main_grad (or its
        flag) looked up on a name unpacked from saved tensors, by `X.main_grad` or
        Transformer Engine's `get_main_grad_from_param(X)` / `get_accumulate_flag_in_param(
        X)`, while the function marks one other expression (`get_dummy_wgrads_for_params(
        [linear_op.weight])`, `linear_op.weight.grad_added_to_main_grad = True`) that is not
        itself restored: the operand saved for the GEMM (an FP8 copy) is not the Parameter
        the bookkeeping names. A weight saved and restored itself and marked under its own
        name is the Parameter (autograd hands back the object it was given: Megatron's
        linear layers) and is left alone. One finding per function, at the first lookup.

        One name, two objects (blind corpus 14, Transformer Engine's `BasicLinear.
        op_backward`): `weight_param = self.weight` where main_grad is taken into the GEMM,
        then `weight_param = w` (`w` unpacked from the saved tensors, or a copy of such a
        name) before `weight_param.grad_added_to_main_grad = True`. The bindings that reach
        each use decide (analysis/dataflow.py), not the spelling: the mark lands on the
        saved operand and the Parameter stays unmarked. Reported when every binding
        reaching the mark is restored and every main_grad lookup through that name saw one
        other binding, the function taking main_grad from no other object. Not seen: a
        rebinding on one path only, or by a walrus. Reported although correct: a saved
        tensor that is the Parameter itself (Megatron saves the Parameter) rebound this way;
        no code at the mirrored heads or in Transformer Engine's and Megatron-LM's history
        does so. A restored name
        marked while main_grad comes from a *different* name is not reported: two weights
        marked in turn (MindSpeed's fused MLP marks `weight_up` and `weight_down` in two
        blocks) look the same to a per-name check.

        CPU offload (blind corpus 14, Transformer Engine's `_Linear.backward`): offloading
        the saved weight hands backward a plain tensor in the Parameter's place, so the code
        hangs main_grad on it (`if ctx.cpu_offloading ...: weight.main_grad = main_grad`)
        and must read the Parameter back (`weight = ctx.weight_object`) before the
        bookkeeping. Reported at the offload test: a buffer (not a `get_main_grad()`
        fetch) hung as main_grad on a name every binding of which there comes from the
        saved tensors (`restore_from_saved`, `ctx.saved_tensors`), inside an `if` whose test
        names offload, in a function that marks that name and binds it from no `ctx`
        attribute anywhere.

        A gradient hook fired through a stand-in is the same slip (blind corpus 22,
        PaddleNLP's FP8 MLP backward: `w1_fp8._apply_backward_hook()` where the Parameter
        `w1` is the one whose hook hands its main_grad on). Seen: a method call `X.m()` whose
        name ends in `hook` and does not start with `register`, `unregister`, `remove`,
        `clear`, `add`, `set`, `get`, `has`, `is`, `make` or `create`, X judged a stand-in as
        above, also fetched by name (`getattr(X, "_apply_backward_hook")()`). Not seen: a
        hook fired on an item of a list of copies or through a helper handed the copy.

        Not seen: copies made by helpers in other files, copies kept in dict literals or
        filled into a list or dict item by item, a helper some of whose paths return the
        Parameter, a `ctx` attribute or saved-tensor position that two functions of the file
        fill with different objects (then nothing is assumed), and stand-ins whose name and
        producer say nothing (a plain `weight` restored from `ctx` with no `origin_weight`
        beside it is taken to be the Parameter: Transformer Engine saves the Parameter
        itself).

        The weight handed to a store of weight-gradient work (`WeightGradStore.put(total_weight,
        ...)`; files naming such a store are analysed without main_grad) is where the W pass
        delivers the gradient: a copy there (by producer, or a name spelled as a copy,
        `total_weight` / `weight_fp8`, bound from any call) gets it instead of the
        Parameter (blind corpus 19: InternEvo's weight-parallel linear handing the store
        its all-gathered weight).

        A pair unpacked with one name spelling the Parameter by a suffix on the other's
        stem (`weight_cal, weight_origin = weight`: ColossalAI's store keeps a view for
        Gemini beside the Parameter) makes the other a stand-in (blind corpus 17: the W pass
        setting `weight_cal.grad`).

        Not seen: the read moved into a helper function of the file, or into an autograd
        Function's forward / backward, handed the copy: GMLP037 reports the call (where
        the copy's `origin_` twin is in scope, or where every path makes it a copy).
    """,
    fix="""
        Keep the Parameter beside the stand-in (`origin_weight`, or a weakref of the
        Parameter) and read main_grad, set the flag and take the weakref from it. No
        automatic fix.
    """,
    fix_summary="none (use the Parameter, not its copy)",
    valid=(
        Example(
            """
            def backward(ctx, dy, x):
                origin_weight = ctx.origin_weight
                full_weight = all_gather_along_first_dim(origin_weight)
                general_gemm(x, dy, out=origin_weight.main_grad, accumulate=True)
                origin_weight.grad_added_to_main_grad = True
                return full_weight
            """
        ),
        Example(
            """
            import weakref


            def forward(ctx, x, weight):
                weight_fp8 = quantize(weight)
                ctx.weight_ref = weakref.ref(weight)
                return x @ weight_fp8


            def backward(ctx, dy):
                weight = ctx.weight_ref()
                weight.main_grad.add_(dy)
            """
        ),
        Example(
            """
            def fuser_backward(linear_op, op_ctx, dy):
                (x, w) = op_ctx.saved_tensors
                weight_param = linear_op.weight
                main_grad = get_main_grad_from_param(weight_param)
                general_gemm(x, dy, out=main_grad, accumulate=True)
                return get_dummy_wgrads_for_params([weight_param])[0]
            """
        ),
        Example(
            """
            def op_backward(self, ctx, dy):
                (x, w) = ctx.saved_tensors
                weight_param = w
                dgrad = general_gemm(weight_param, dy)
                weight_param = self.weight
                general_gemm(x, dy, out=weight_param.main_grad, accumulate=True)
                weight_param.grad_added_to_main_grad = True
                zero = getattr(weight_param, "zero_out_wgrad", False)
                return dgrad, get_dummy_wgrad(list(weight_param.size()), weight_param.dtype, zero)
            """
        ),
        Example(
            """
            def backward(ctx, dy):
                x, weight = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                main_grad = ctx.main_grad_func()
                if ctx.cpu_offloading:
                    weight = ctx.weight_object
                    weight.main_grad = main_grad
                general_gemm(x, dy, out=main_grad, accumulate=True)
                weight.grad_added_to_main_grad = True
                zero = getattr(weight, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero)
            """
        ),
        Example(
            """
            from internlm.core.scheduler.pipeline_scheduler_zb import WeightGradStore


            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                total_weight = ctx.communicator.weight_hook(weight, module=ctx.module)
                WeightGradStore.put(weight, x, dy, linear_backward_op)
                return dy @ total_weight, None
            """
        ),
        Example(
            """
            class WeightGradStore:
                @classmethod
                def pop(cls, stored):
                    for x, dy, weight, func in stored:
                        weight_cal, weight_origin = weight
                        if weight_origin.grad is not None:
                            func(x, dy, weight_origin.grad)
                        else:
                            weight_origin.grad = func(x, dy)
            """
        ),
        Example(
            """
            def fp8_mlp_bwd(do1, x_t, w1):
                w1_fp8, w1_scale = weight_quant(w1, True)
                dx = fp8_gemm(do1, w1_fp8, w1_scale)
                if hasattr(w1, "main_grad"):
                    kitchen_fp8_gemm(x_t, do1, True, True, w1.main_grad, paddle.float32)
                if hasattr(w1, "_apply_backward_hook"):
                    w1._apply_backward_hook()
                w1_fp8.register_hook(log_grad)
                return dx
            """
        ),
        Example(
            """
            class GroupedLinear(BasicOperation):
                def fuser_backward(self, ctx, grad_output):
                    weights = [getattr(self, f"weight{i}") for i in range(self.num_groups)]
                    saved = ctx.saved_tensors
                    saved = saved[1:]
                    xs, saved = saved[: self.num_groups], saved[self.num_groups :]
                    ws, saved = saved[: self.num_groups], saved[self.num_groups :]
                    grad_weights = [get_main_grad_from_param(w) for w in weights]
                    general_grouped_gemm(xs, grad_output, grad_weights, accumulate=True)
                    grads = get_dummy_wgrads_for_params(weights)
                    return grads
            """,
        ),
    ),
    invalid=(
        Example(
            """
            def backward(ctx, dy, x):
                weight, inp = ctx.saved_tensors
                origin_weight = ctx.origin_weight_ref()
                general_gemm(x, dy, out=weight.main_grad, accumulate=True)
                return None
            """,
            line=4,
        ),
        Example(
            """
            class _Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    ctx.save_for_backward(x, quantize(weight))
                    return x

                @staticmethod
                def backward(ctx, dy):
                    x, weight = ctx.saved_tensors
                    weight.main_grad.add_(dy.t() @ x)
                    return None, None
            """,
            line=10,
        ),
        Example(
            """
            import weakref


            def forward(ctx, x, weight):
                weight_fp8 = quantize(weight)
                ctx.weight_ref = weakref.ref(weight_fp8)
                ctx.fuse_wgrad = hasattr(weight, "main_grad")
                return x @ weight_fp8
            """,
            line=6,
        ),
        Example(
            """
            def backward(ctx, dy, wgrad):
                weight = all_gather_along_first_dim(ctx.weight)
                weight.grad_added_to_main_grad = True
                return wgrad
            """,
            line=3,
        ),
        Example(
            """
            def backward_dw(self, wgrads):
                members = [quantize(w) for w in self.weights]
                if self.fuse:
                    return [w.main_grad.add_(g) for w, g in zip(self.weights, wgrads)]
                for i, g in enumerate(wgrads):
                    members[i].grad = g if members[i].grad is None else members[i].grad + g
            """,
            line=6,
        ),
        Example(
            """
            def fuser_backward(linear_op, op_ctx, dy):
                (x, w) = op_ctx.saved_tensors
                weight_param = linear_op.weight
                main_grad = get_main_grad_from_param(weight_param)
                general_gemm(x, dy, out=main_grad, accumulate=True)
                return get_dummy_wgrads_for_params([w])[0]
            """,
            line=6,
        ),
        Example(
            """
            def fuser_backward(linear_op, op_ctx, dy):
                (x, w) = op_ctx.saved_tensors
                main_grad = get_main_grad_from_param(w)
                general_gemm(x, dy, out=main_grad, accumulate=True)
                return [get_dummy_wgrads_for_params([linear_op.weight])[0]]
            """,
            line=3,
        ),
        Example(
            """
            def op_backward(self, ctx, dy):
                (x, w) = ctx.saved_tensors
                weight_param = self.weight
                general_gemm(x, dy, out=weight_param.main_grad, accumulate=True)
                weight_param = w
                weight_param.grad_added_to_main_grad = True
                zero = getattr(weight_param, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(weight_param.size()), weight_param.dtype, zero)
            """,
            line=5,
        ),
        Example(
            """
            def backward(ctx, dy):
                x, weight = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                main_grad = ctx.main_grad_func()
                if ctx.cpu_offloading and ctx.fuse_wgrad_accumulation:
                    weight.main_grad = main_grad
                general_gemm(x, dy, out=main_grad, accumulate=True)
                weight.grad_added_to_main_grad = True
                zero = getattr(weight, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero)
            """,
            line=4,
        ),
        Example(
            """
            from internlm.core.scheduler.pipeline_scheduler_zb import WeightGradStore


            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                total_weight = ctx.communicator.weight_hook(weight, module=ctx.module)
                WeightGradStore.put(total_weight, x, dy, linear_backward_op)
                return dy @ total_weight, None
            """,
            line=7,
        ),
        Example(
            """
            class WeightGradStore:
                @classmethod
                def pop(cls, stored):
                    for x, dy, weight, func in stored:
                        weight_cal, weight_origin = weight
                        if weight_origin.grad is not None:
                            func(x, dy, weight_origin.grad)
                        else:
                            weight_cal.grad = func(x, dy)
            """,
            line=9,
        ),
        Example(
            """
            def fp8_mlp_bwd(do1, x_t, w1):
                w1_fp8, w1_scale = weight_quant(w1, True)
                dx = fp8_gemm(do1, w1_fp8, w1_scale)
                if hasattr(w1, "main_grad"):
                    kitchen_fp8_gemm(x_t, do1, True, True, w1.main_grad, paddle.float32)
                if hasattr(w1_fp8, "_apply_backward_hook"):
                    w1_fp8._apply_backward_hook()
                return dx
            """,
            line=7,
        ),
        Example(
            """
            class GroupedLinear(BasicOperation):
                def fuser_backward(self, ctx, grad_output):
                    weights = [getattr(self, f"weight{i}") for i in range(self.num_groups)]
                    saved = ctx.saved_tensors
                    saved = saved[1:]
                    xs, saved = saved[: self.num_groups], saved[self.num_groups :]
                    ws, saved = saved[: self.num_groups], saved[self.num_groups :]
                    grad_weights = [get_main_grad_from_param(w) for w in weights]
                    general_grouped_gemm(xs, grad_output, grad_weights, accumulate=True)
                    grads = get_dummy_wgrads_for_params(ws)
                    return grads
            """,
            line=10,
        ),
        Example(
            """
            class HandcraftBackward(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, *weights):
                    ctx.weights = tuple(w.detach() for w in weights)
                    return x

                @staticmethod
                def backward(ctx, dy):
                    for weight in ctx.weights:
                        weight.grad_added_to_main_grad = True
                    return dy, *(None for _ in ctx.weights)
            """,
            line=10,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
KINDS = {
    "saved": "the copy restored from ctx (the function names the Parameter `{twin}`)",
    "quantized": "a quantized copy of the weight",
    "materialized": "a materialized (gathered) copy of the weight",
    "detached": "a detached copy of the weight (a new tensor object)",
    "held": "a tensor field kept beside the holder's Parameter field (not the Parameter)",
    "paired": "the other tensor of a pair unpacked beside the Parameter `{twin}`",
}
MESSAGE = (
    "{what} `{subject}`, {kind}: the copy carries no main_grad or flags of the Parameter, "
    "so {effect}"
)
RESTORED = (
    "`{call}` marks `{subject}`, restored from the saved tensors, while this function takes "
    "main_grad from `{param}`: the restored tensor lacks the flag, so the Parameter stays "
    "unmarked although main_grad was written and its hook adds the dummy into it; hand "
    "`{call}` the Parameter (`{param}`)"
)
REBOUND = (
    "`{subject}` held `{param}` where this function took main_grad through it, and is "
    "rebound here to a tensor restored from the saved tensors before "
    "`{subject}.grad_added_to_main_grad` is set: the mark lands on the saved operand, and "
    "`{param}` stays unmarked although main_grad was written; mark `{param}`"
)
OFFLOAD = (
    "under this CPU-offload test `{subject}` is the tensor restored from the saved tensors "
    "(offload hands backward a plain tensor, which is why main_grad is hung on it here), "
    "and this function marks `{subject}`: the flag lands on the stand-in and the Parameter "
    "stays unmarked; restore the Parameter first (`{subject} = ctx.weight_object`)"
)
FETCHED = (
    "main_grad is looked up on `{subject}`, restored from the saved tensors, while this "
    "function marks `{param}`: the saved operand is not the Parameter (an FP8 copy, a "
    "gathered weight) and has no main_grad or flags of its own; look it up on `{param}`"
)
EFFECTS = {
    "main_grad": "the weight gradient is read from or written into a buffer Megatron never "
    "reduces (or the read fails)",
    "flag": "the Parameter itself stays unmarked and its hook adds the real gradient again",
    "weakref": "backward reaches the copy, not the Parameter, through this reference",
    "dummy": "it has the copy's shape and dtype (the gathered whole, the FP8 copy), not "
    "the Parameter's: autograd rejects it or the hook adds a wrong tensor into main_grad",
    "grad": "the gradient lands on a temporary the optimizer never sees and the Parameter's "
    "`.grad` stays empty",
    "store": "the W pass computes the gradient for it and delivers it there: it lands on a "
    "temporary and the Parameter gets none",
    "hook": "its hooks are not the Parameter's: the Parameter's gradient is never handed on "
    "to its reduction",
}


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    # a zero-bubble backward hands its weight to a store (ColossalAI's, InternEvo's) in
    # files that never name main_grad
    stores = store_calls.names_a_store(source)
    if "main_grad" not in source and not stores:
        return
    look_at_refs = "weakref" in source
    # a ``.grad`` assignment can stand anywhere in a file that keeps main_grad (a delayed
    # ``backward_dw`` spells neither main_grad nor the flag)
    sets_grad = ".grad =" in source
    for unit in context.units:
        survey = unit.survey
        if (
            sets_grad
            or survey.spells_main_grad
            or survey.spells_grad_added
            or (look_at_refs and survey.calls & {"ref", "proxy"})
            or (stores and not STORE_PUT_METHODS.isdisjoint(survey.calls))
        ):
            _check_unit(unit, out)


def _check_marking_calls(unit: Unit, out: Collector) -> None:
    """A weight marked by a call (a marking helper of the file, Transformer Engine's
    ``get_dummy_wgrads_for_params``) that is a stand-in: a copy, or a tensor restored from
    the saved tensors while the function takes main_grad from the Parameter by another name."""
    helpers = unit.context.shared(marking_helpers.MarkingHelpers)
    objects = None
    for subject, call, node in marking_calls.marked_by_calls(unit, helpers):
        name = patterns.callee_name(call)
        param = marking_calls.parameter_beside_restored(unit, subject, node)
        if param is not None:
            text = out.text(subject)
            out.report(CODE, subject, RESTORED.format(call=name, subject=text, param=param))
            continue
        objects = objects or module_provenance.of_unit(unit)
        what = f"`grad_added_to_main_grad` is set (by `{name}`) on"
        _Reporter(unit, objects, node, out)(subject, what, "flag")


def _check_direct_marks(unit: Unit, out: Collector) -> None:
    """``X.grad_added_to_main_grad = True`` on a name restored from the saved tensors where
    the function took main_grad through the same name before rebinding it to the restored
    tensor. (A restored name marked while main_grad comes from another name is left alone:
    two weights marked in turn, `weight_up` and `weight_down` of MindSpeed's fused MLP, look
    the same.)"""
    for stmt, _ in unit.statements():
        offload = marking_calls.offload_stand_in(unit, stmt)
        if offload is not None:
            name, test = offload
            out.report(CODE, test.test, OFFLOAD.format(subject=name.value))
        found = patterns.attribute_set(stmt, patterns.GRAD_ADDED)
        if found is None or type(found[0]) is not cst.Name:
            continue
        subject, node = found[0], unit.node_for(stmt)
        found = marking_calls.parameter_before_rebinding(unit, subject, node)
        if found is not None:
            # at the rebinding: that line is what hands the mark to the saved tensor
            param, rebinding = found
            out.report(CODE, rebinding, REBOUND.format(subject=subject.value, param=param))


def _check_fetches(unit: Unit, out: Collector) -> None:
    """main_grad (or its flag) looked up on a tensor restored from the saved tensors while
    the function marks the Parameter under another name: one finding, at the first."""
    helpers = unit.context.shared(marking_helpers.MarkingHelpers)
    for owner, param in marking_calls.fetched_from_restored(unit, helpers):
        out.report(CODE, owner, FETCHED.format(subject=owner.value, param=param))
        return


def _check_unit(unit: Unit, out: Collector) -> None:
    _check_marking_calls(unit, out)
    if unit.survey.spells_grad_added:
        _check_direct_marks(unit, out)
    _check_fetches(unit, out)
    uses = stand_in_uses
    candidates = [
        c for c in uses.candidates(unit) if c[4] == "weakref" or uses.may_stand_in(unit, *c[:2])
    ]
    if not candidates:
        return  # no subject bound by an assignment, no ctx attribute, no call: nothing to ask
    objects = module_provenance.of_unit(unit)
    in_mark_blocks = stand_in_uses.mark_block_ids(unit)
    for subject, node, root, what, effect in candidates:
        if effect == "main_grad" and id(root) in in_mark_blocks:
            continue  # GMLP007 judges what the marking block reads
        reporter = _Reporter(unit, objects, node, out)
        if effect == "weakref":
            reporter.weakref(subject, root, what)
        else:
            reporter(subject, what, effect)


class _Reporter:
    def __init__(self, unit: Unit, objects, node, out: Collector) -> None:
        self.unit, self.objects, self.node, self.out = unit, objects, node, out

    def __call__(self, subject, what: str, effect: str, kind: str | None = None) -> None:
        kind = kind or self._kind(subject)
        if kind is None and effect == "store":
            kind = self._produced_copy(subject)
        if kind is None or self._rebinds_itself(subject):
            return
        if effect == "dummy" and kind == provenance.DETACHED:
            return  # a detached copy has the weight's shape and dtype (review 28)
        if effect == "dummy" and kind == provenance.SAVED:
            # a restored weight may be the forward input the dummy is handed back for
            # (MindSpeed's GMM saves `weight` beside `original_weight` and returns the
            # dummy at `weight`'s place): only a copy's shape surely differs
            return
        out = self.out
        text = out.text(subject)
        names = self.objects.names
        twin = next((p + text for p in provenance.ORIGIN_PREFIXES if p + text in names), "")
        twin = twin or provenance.origin_sibling(text, names) or ""
        message = MESSAGE.format(
            what=what, subject=text, kind=KINDS[kind].format(twin=twin), effect=EFFECTS[effect]
        )
        out.report(CODE, subject, message)

    def weakref(self, subject, root, what: str) -> None:
        """A weakref is kept for backward to reach the Parameter whatever the path: a copy
        on one path (``weakref.ref(w)`` for ``w = quantize(weight) if fp8 else weight``, or
        for each ``w`` of a list filled with quantized copies under ``if fp8:``) already
        loses it there."""
        sequence = stand_ins.element_reads(root).get(id(subject))
        at, objects, unit = self.node, self.objects, self.unit
        if sequence is not None:
            if stand_ins.quantized_on_some_path(objects, unit, sequence, at):
                kind = provenance.QUANTIZED
            else:  # a list of gathered copies on every path
                kind = provenance.copy_or_none(
                    stand_ins.surely_stand_in(objects, unit, sequence, at)
                )
        elif isinstance(subject, cst.Name) and not unit.reaching.reaching(subject.value, at):
            return  # bound by a comprehension it does not walk plainly, or not in this unit
        elif stand_ins.quantized_on_some_path(objects, unit, subject, at):
            kind = provenance.QUANTIZED
        else:
            kind = self._kind(subject) if stand_in_uses.may_stand_in(unit, subject, at) else None
        if kind is not None:
            self(subject, what, "weakref", kind)

    def _produced_copy(self, subject) -> str | None:
        """A name spelled as a copy (``total_weight``, ``weight_fp8``) that every binding
        reaching here takes from a call (a communicator's gather, a cast helper): the copy
        its spelling says, whatever the producer's name."""
        if type(subject) is not cst.Name:
            return None
        kind = provenance.by_name(subject.value)
        defs = self.unit.reaching.reaching(subject.value, self.node)
        if kind not in provenance.COPIES or not defs:
            return None
        produced = all(d.kind == "assign" and type(d.value) is cst.Call for d in defs)
        return kind if produced else None

    def _kind(self, subject) -> str | None:
        return stand_ins.surely_stand_in(self.objects, self.unit, subject, self.node)

    def _rebinds_itself(self, subject) -> bool:
        """``w = quantize(w)`` reaching here: the weight name rebound to its own copy is
        GMLP015's finding."""
        return isinstance(subject, cst.Name) and stand_ins.rebound_to_itself(
            self.unit, subject.value, self.node
        )
