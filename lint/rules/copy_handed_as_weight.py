"""GMLP037: a copy of a weight handed to a helper that uses it as the Parameter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

callee_weights = LazyModule("..analysis.callee_weights", __package__)
call_provenance = LazyModule("..analysis.call_provenance", __package__)

CODE = "GMLP037"
RULE = Rule(
    code=CODE,
    classes=(1,),
    name="copy-handed-as-weight",
    summary=(
        "A name that some path binds to a gathered or quantized copy of a weight (while its "
        "`origin_` twin names the Parameter), or that every path binds to such a copy, is "
        "handed to a function (of the file, an autograd Function's `apply`, or imported "
        "from another file of the run) that takes main_grad, weakrefs or main_grad flags from "
        "that argument."
    ),
    flags=(
        "a call of a function of the file (`f(...)`, `self.f(...)`, `Cls.f(...)`), or of a "
        "top-level function of another file of the run imported by name, given `w` "
        "where `origin_w` is in scope and a binding of `w` to a copy (all-gather, "
        "materialize, quantize) reaches the call, when `f` reads `.main_grad` / "
        "`.get_main_grad` / a main_grad flag from that parameter, or takes a weakref of it "
        "(also through `P[i]` and a loop or comprehension variable over `P`); and, with no "
        "twin needed, an argument every binding of which is such a copy handed to `Fn.apply` "
        "(into `Fn.forward` after `ctx`, a starred list into its `*args`) or to a function of "
        "the file, whose parameter is so used (also kept on `ctx` or saved for backward and "
        "used there), unless the caller gives the copy main_grad first"
    ),
    explanation="""
        Issue #19, class 1 (which object), across functions of one file; found from
        Transformer Engine #3517. A fused path that gathers or quantizes a weight keeps the
        Parameter under an `origin_` name and rebinds the plain name to the transient copy
        on the paths that need it (`weights = materialize_weight_for_forward(weights)`
        when the weights are distributed). A helper handed the plain name then takes the
        backward bookkeeping from the copy: `weakref.ref(w)` of a tensor that dies after
        forward, `lambda: weights[j].main_grad` of an object with no main_grad
        (AttributeError with `fuse_wgrad_accumulation`), flags set where Megatron never
        reads them. GroupedLinear's grouped-tensor forward did exactly this with GTP's
        gathered weights; the path beside it used `origin_weights`.

        Seen: calls by name of the file's functions (a name defined once in the file),
        through `self.` / `cls.` / a class of the file; arguments matched to parameters by
        keyword and by position (skipping `self` for methods called as attributes);
        arguments that are plain names with an `origin_` / `orig_` / `original_` twin in
        the calling function, with a binding to a copy (provenance of
        analysis/provenance.py: all-gather, unshard, materialize, quantize, cast, or a
        helper of the file returning one) reaching the call on some path; in the callee,
        `.main_grad`, `.get_main_grad`, `grad_added_to_main_grad`, `overwrite_main_grad`,
        `zero_out_wgrad` and `weakref.ref` on the parameter, an item of it, or a loop or
        comprehension variable over it. Reported at the argument, or, when a comprehension
        around the call binds it, at the sequence that comprehension walks
        (`zip(weights, main_grads)`: where the Parameters' list should be named).

        Also seen across files (a run fact, lint/project.py's `weight_users`): a top-level
        function of another file of the run that uses a parameter so (its `main_grad`,
        flags or weakrefs, also through `P[i]`, a loop or comprehension variable over `P`,
        or a lambda), called by the name this file imports it under
        (`from helpers import f`, also `from helpers import f as g`) and does not define
        itself. Looked for only among the names that files naming an `origin_` twin and
        main_grad import.

        Also seen, with no `origin_` twin (lint/analysis/call_provenance.py): an argument
        that is a copy on every path reaching the call (a name every binding of which is a
        quantize / cast / all-gather call, `.to(<float8 dtype>)`, a list comprehension of
        such calls, or a helper of the file whose returned value provenance.py classifies as
        a copy, also two helpers deep; or the call itself), handed by position, keyword or
        as a starred list to a function of the file or to an autograd Function of the file
        through `Fn.apply(...)`, or through a local bound to `Fn.apply` / `Fn.forward`
        (`linear_fn(*autograd_ctx, x, *weights)`: a leading starred list is the `ctx` slot,
        empty for `apply` and `[None]` for `forward`), or bound to a function of the file by
        `functools.partial(f, copy)` (the partial hands it on as a call does, whoever calls
        the partial later: `ctx.wgrad_fn = partial(_wgrad, weight_fp8)`). `apply` binds
        `ctx` itself, so the arguments go to `forward`'s parameters after it; arguments past
        its named parameters, or a starred list right after them, go to its `*args`. The callee uses
        the parameter as the Parameter as above, also through a name bound to a slice of it
        (`weights = weights_and_biases[:n]`), and, for `apply`, through what `forward` keeps
        of it on `ctx` (`ctx.w = w`) or saves for backward (`ctx.save_for_backward(x, w)`)
        and another method of the class (backward) uses so, read back as `ctx.w` or restored
        from `ctx.saved_tensors` (Paddle: `ctx.saved_tensor()`) at that position (unpacked,
        or indexed), also when the callee or that method hands it (by position or keyword)
        to a plain function of the file, defined once, that so uses its parameter, two calls
        deep at most (a backward, its wgrad helper, the helper's writer).
        (Not seen: the saved tensors unpacked from a local by index into a tuple, `x, w =
        saved[0], saved[1]`.) `w.astype(dtype)` / `w.cast(dtype)` (Paddle's and NumPy's
        casts, a new tensor whatever the dtype) is a copy; torch's `w.to(dtype)` only to an
        FP8 dtype (to the weight's own dtype it hands back the Parameter). A function of the
        file counts by what it returns, not by its name (`_param_list_for_unshard(module)`
        returning `module.parameters()` hands the Parameters). A helper's returned value is
        classified by its last binding provenance.py can classify, so a helper returning a
        grouped weight's member views on one branch and the Parameters on another counts as
        returning copies: the finding then holds on the branch that makes them (Transformer
        Engine #3178's shape at a fork's head). Not reported when the caller sets the copy's
        `main_grad` (also on a loop variable over it): the copy then carries the Parameter's
        buffer on purpose. Not seen there: a copy made on some paths of the caller only, a
        starred argument ahead of the positional ones other than the `ctx` slot of an alias,
        an alias bound to both `apply` and `forward` with no leading list, and `ctx` state
        kept in containers.

        Also seen (since blind corpus 7): an argument that is no copy but is handed in as a
        parameter, restored from `ctx` / the saved tensors, or a loop variable, while its
        twin names the Parameter beside it (`origin_w`, `orig_w`, `original_w`, or
        `w_param` as MindSpeed's GMM spells it), given to a function of the file that
        reads main_grad or `get_main_grad` from that parameter or sets
        `grad_added_to_main_grad` on it: the code names the Parameter separately because
        this name is not it (`weight` is the GMM operand, a view of `weight_param`).
        A callee that only reads a flag with a default from it is not enough for this case.

        Not seen: methods of other files and module-qualified calls (`helpers.f(...)`), star
        imports, helpers outside the files linted together (one file linted alone knows only
        its own functions), a calling file that names no trigger of the linter (main_grad
        and the others: such a file is not analysed), copies on some paths only with no
        `origin_` twin in scope (the code may then hold only the copy on purpose), other
        expressions as arguments, `**kwargs`, positions inside `zip(...)`, names defined
        more than once in the file (methods of two classes named alike).
    """,
    fix="""
        Hand the helper the Parameter (`origin_w`) for its bookkeeping, and the copy
        separately for the compute. No automatic fix.
    """,
    fix_summary="none (hand the helper the `origin_` Parameter)",
    valid=(
        Example(
            """
            class _Grouped(torch.autograd.Function):
                @staticmethod
                def _forward_grouped(ctx, inp, weights, origin_weights):
                    ctx.refs = [weakref.ref(w) for w in origin_weights]
                    return grouped_gemm(inp, weights)

                @staticmethod
                def forward(ctx, inp, *weights):
                    origin_weights = weights
                    if is_distributed_weight(weights[0]):
                        weights = materialize_weight_for_forward(weights)
                    return _Grouped._forward_grouped(
                        ctx, inp, weights=weights, origin_weights=origin_weights
                    )
            """
        ),
    ),
    invalid=(
        Example(
            """
            class _Grouped(torch.autograd.Function):
                @staticmethod
                def _forward_grouped(ctx, inp, weights):
                    ctx.refs = [weakref.ref(w) for w in weights]
                    ctx.main_grad_funcs = [lambda j=i: weights[j].main_grad for i in range(2)]
                    return grouped_gemm(inp, weights)

                @staticmethod
                def forward(ctx, inp, *weights):
                    origin_weights = weights
                    if is_distributed_weight(weights[0]):
                        weights = materialize_weight_for_forward(weights)
                    return _Grouped._forward_grouped(ctx, inp, weights=weights)
            """,
            line=13,
        ),
        Example(
            """
            class _Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    ctx.save_for_backward(x, weight)
                    return x @ weight.t()

                @staticmethod
                def backward(ctx, dy):
                    x, weight = ctx.saved_tensors
                    weight.main_grad.add_(dy.t() @ x)
                    return dy @ weight, None


            def linear(x, weight):
                return _Linear.apply(x, quantize(weight))
            """,
            line=15,
        ),
        Example(
            """
            def _wgrad(x, weight, dy):
                if hasattr(weight, "main_grad"):
                    weight.main_grad.add_(dy.t() @ x)


            class _Linear(PyLayer):
                @staticmethod
                def forward(ctx, x, weight):
                    ctx.save_for_backward(x, weight)
                    return x @ weight.t()

                @staticmethod
                def backward(ctx, dy):
                    x, weight = ctx.saved_tensor()
                    _wgrad(x, weight, dy)
                    return dy @ weight, None


            def linear(x, weight):
                return _Linear.apply(x, weight.astype(x.dtype))
            """,
            line=20,
        ),
    ),
)


MESSAGE = (
    "`{name}` may be a gathered or quantized copy here while `{twin}` names the Parameter, "
    "and `{callee}` uses its parameter `{parameter}` as the Parameter ({where}: main_grad, "
    "weakref or flags): it takes them from the copy; hand it `{twin}`"
)


BESIDE_MESSAGE = (
    "`{name}` is not the Parameter here: `{twin}` names it beside `{name}`, and `{callee}` "
    "uses its parameter `{parameter}` as the Parameter ({where}: main_grad, weakref or "
    "flags): it takes them from the operand; hand it `{twin}`"
)


SURE_MESSAGE = (
    "`{name}` is {kind} here, and `{callee}` uses its parameter `{parameter}` as the "
    "Parameter (line {line}: main_grad, weakref or flags): it takes them from the copy; hand "
    "it the Parameter, or give the copy the Parameter's main_grad first"
)
KINDS = {
    "quantized": "a quantized copy of the weight",
    "materialized": "a materialized (gathered) copy of the weight",
    "detached": "a detached copy of the weight (a new tensor object)",
}


def check(context: ModuleContext, out: Collector) -> None:
    # The twin-based findings first: the collector keeps one finding per site, and theirs
    # names the Parameter to hand instead.
    for found in context.shared(callee_weights.handed_copies):
        out.report(
            CODE,
            found.site or found.argument,
            (MESSAGE if found.copied else BESIDE_MESSAGE).format(
                name=found.name,
                twin=found.twin,
                callee=found.callee,
                parameter=found.parameter,
                where="in another file of the run"
                if found.use_line is None
                else f"line {found.use_line}",
            ),
        )
    for sure in context.shared(call_provenance.handed_stand_ins):
        out.report(
            CODE,
            sure.argument,
            SURE_MESSAGE.format(
                name=out.text(sure.argument),
                kind=KINDS[sure.kind],
                callee=sure.callee,
                parameter=sure.parameter,
                line=sure.use_line,
            ),
        )
