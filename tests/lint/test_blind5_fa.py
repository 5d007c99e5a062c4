"""Helper "fa"'s targets in the fifth blind corpus (variant_corpus_blind5.py) and the shapes
they stand for, in other spellings:

* a: exception paths are paths (GMLP032): a ``return`` / ``break`` / ``continue`` inside a
  ``try`` runs its ``finally``, and a handler is entered before the write of its ``try``
  body, so a mark in ``finally`` also follows the plain fallback that wrote nothing;
* b: a write into main_grad with no flag, the gradient handed on converted (``g.to(dtype)``,
  a view) and main_grad reached through a local (GMLP033), reported at the write when only
  the write is conditional;
* c: a dummy-versus-real choice or a destination made by indexing a two-way display with the
  downgraded flag (GMLP002 / GMLP001);
* d: a conditional expression in a comprehension whose test is an element of a list of
  downgraded flags (GMLP002 / GMLP001).
"""

from __future__ import annotations

import pytest

from .support import lint_snippet

BUGGY = {
    "a_bug1": (
        "GMLP032",
        8,
        """
        def wgrad_for(weight, inp, grad_out):
            try:
                fused_wgrad_gemm(inp, grad_out, weight.main_grad)
            except (RuntimeError, TypeError):
                plain = torch.matmul(grad_out.t(), inp)
                return plain.to(weight.dtype)
            finally:
                setattr(weight, "grad_added_to_main_grad", True)
            return make_dummy_wgrad(weight)
        """,
    ),
    "a_bug2": (
        "GMLP032",
        10,
        """
        def backward_experts(ctx, grads):
            outs = []
            for w, x, g in zip(ctx.weights, ctx.inputs, grads):
                try:
                    grouped_gemm(x, g, out=w.main_grad, accumulate=True)
                except NotImplementedError:
                    outs.append(g.t() @ x)
                    continue
                finally:
                    w.grad_added_to_main_grad = True
                outs.append(make_dummy_wgrad(w))
            return outs
        """,
    ),
    "b_bug1": (
        "GMLP033",
        6,
        """
        def backward(ctx, grad_output):
            inp, weight = ctx.saved_tensors
            grad_weight = grad_output.flatten(0, -2).t().float() @ inp.flatten(0, -2).float()
            if ctx.fuse_wgrad_accumulation:
                buf = getattr(weight, "main_grad")
                buf.add_(grad_weight)
            return grad_output @ weight, grad_weight.contiguous().view(weight.shape)
        """,
    ),
    "b_bug2": (
        "GMLP033",
        4,
        """
        def accumulate_expert_grads(params, grads):
            for p, g in zip(params, grads):
                p.main_grad.copy_(g)
                p.grad = g.to(p.dtype)
        """,
    ),
    "c_bug1": (
        "GMLP002",
        5,
        """
        def finish_wgrad(ctx, weight, wgrad):
            accumulate = ctx.fuse_wgrad_accumulation and not weight.overwrite_main_grad
            general_gemm(ctx.x, ctx.dy, out=weight.main_grad, accumulate=accumulate)
            weight.grad_added_to_main_grad = True
            return (wgrad, make_dummy_wgrad(weight))[accumulate]
        """,
    ),
    "c_bug2": (
        "GMLP002",
        7,
        """
        def finish_wgrad(ctx, weight, wgrad):
            accumulate = ctx.fuse_wgrad_accumulation
            if getattr(weight, "overwrite_main_grad", False):
                accumulate = False
            general_gemm(ctx.x, ctx.dy, out=weight.main_grad, accumulate=accumulate)
            weight.grad_added_to_main_grad = True
            return ctx.dgrad, {True: None, False: wgrad}.get(accumulate)
        """,
    ),
    "c_bug3": (
        "GMLP001",
        4,
        """
        def wgrad_gemm(ctx, weight, x, dy):
            fuse = ctx.fuse_wgrad_accumulation
            accumulate = fuse and not getattr(weight, "overwrite_main_grad", False)
            dest = {True: weight.main_grad, False: None}[accumulate]
            return general_gemm(x, dy, out=dest, accumulate=accumulate)
        """,
    ),
    "d_bug1": (
        "GMLP002",
        7,
        """
        def backward(ctx, grads):
            ws = ctx.expert_weights
            keep = [ctx.fuse and not getattr(w, "overwrite_main_grad", False) for w in ws]
            for w in ws:
                if ctx.fuse:
                    w.grad_added_to_main_grad = True
            return [make_dummy_wgrad(ws[i]) if k else grads[i] for i, k in enumerate(keep)]
        """,
    ),
    "d_bug2": (
        "GMLP001",
        4,
        """
        def expert_wgrads(ctx, xs, dys):
            flags = [ctx.fuse and not w.overwrite_main_grad for w in ctx.weights]
            return [
                general_gemm(x, dy, out=w.main_grad if f else None, accumulate=f)
                for w, f, x, dy in zip(ctx.weights, flags, xs, dys)
            ]
        """,
    ),
}

CORRECT = {
    "a_ok1": """
        def wgrad_for(weight, inp, grad_out):
            try:
                fused_wgrad_gemm(inp, grad_out, weight.main_grad)
            except (RuntimeError, TypeError):
                return torch.matmul(grad_out.t(), inp).to(weight.dtype)
            else:
                setattr(weight, "grad_added_to_main_grad", True)
            return make_dummy_wgrad(weight)
    """,
    "a_ok2": """
        def wgrad_for(weight, inp, grad_out):
            try:
                fused_wgrad_gemm(inp, grad_out, weight.main_grad)
            except RuntimeError:
                weight.main_grad.add_(torch.matmul(grad_out.t(), inp))
                return make_dummy_wgrad(weight)
            finally:
                weight.grad_added_to_main_grad = True
            return make_dummy_wgrad(weight)
    """,
    "a_ok3": """
        def wgrad_for(weight, inp, grad_out, stream):
            try:
                if inp.numel() == 0:
                    return None
                general_gemm(inp, grad_out, out=weight.main_grad, accumulate=True)
            finally:
                stream.synchronize()
            weight.grad_added_to_main_grad = True
            return make_dummy_wgrad(weight)
    """,
    "a_ok4": """
        def wgrad_for(weight, inp, grad_out):
            try:
                general_gemm(inp, grad_out, out=weight.main_grad, accumulate=True)
            except RuntimeError:
                log.error("wgrad gemm failed for %s", weight.shape)
                raise
            finally:
                weight.grad_added_to_main_grad = True
            return make_dummy_wgrad(weight)
    """,
    "b_ok1": """
        def backward(ctx, grad_output):
            inp, weight = ctx.saved_tensors
            grad_weight = grad_output.flatten(0, -2).t().float() @ inp.flatten(0, -2).float()
            fuse = ctx.fuse_wgrad_accumulation
            if fuse and (buf := getattr(weight, "main_grad", None)) is not None:
                buf.add_(grad_weight)
                weight.grad_added_to_main_grad = True
                return grad_output @ weight, make_dummy_wgrad(weight)
            return grad_output @ weight, grad_weight.to(weight.dtype)
    """,
    "b_ok2": """
        def backward(ctx, grad_output):
            inp, weight = ctx.saved_tensors
            grad_weight = grad_output.t().float() @ inp.float()
            if ctx.fuse_wgrad_accumulation:
                getattr(weight, "main_grad").add_(grad_weight)
                setattr(weight, "grad_added_to_main_grad", True)
                zero = getattr(weight, "zero_out_wgrad", False)
                grad_weight = get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)
            return grad_output @ weight, grad_weight.to(weight.dtype)
    """,
    "b_ok3": """
        def accumulate_expert_grads(params, grads):
            for p, g in zip(params, grads):
                if hasattr(p, "main_grad"):
                    p.main_grad.add_(g)
                    p.grad_added_to_main_grad = True
                else:
                    p.grad = g.to(p.dtype)
    """,
    "c_ok1": """
        def finish_wgrad(ctx, weight, wgrad):
            accumulate = ctx.fuse_wgrad_accumulation and not weight.overwrite_main_grad
            general_gemm(ctx.x, ctx.dy, out=weight.main_grad, accumulate=accumulate)
            weight.grad_added_to_main_grad = True
            return (wgrad, make_dummy_wgrad(weight))[ctx.fuse_wgrad_accumulation]
    """,
    "c_ok2": """
        def pick(ctx, weight, grads, i):
            accumulate = ctx.fuse_wgrad_accumulation and not weight.overwrite_main_grad
            general_gemm(ctx.x, ctx.dy, out=weight.main_grad, accumulate=accumulate)
            weight.grad_added_to_main_grad = True
            modes = {True: "accumulate", False: "overwrite"}
            log.debug("wgrad mode %s", modes[accumulate])
            return ctx.dgrad, (grads[0], make_dummy_wgrad(weight))[i]
    """,
    "d_ok1": """
        def expert_wgrads(ctx, xs, dys):
            flags = [ctx.fuse and not w.overwrite_main_grad for w in ctx.weights]
            return [
                general_gemm(x, dy, out=w.main_grad if ctx.fuse else None, accumulate=f)
                for w, f, x, dy in zip(ctx.weights, flags, xs, dys)
            ]
    """,
    "d_ok2": """
        def backward(ctx, grads):
            ws = ctx.expert_weights
            acc = [ctx.fuse and not getattr(w, "overwrite_main_grad", False) for w in ws]
            general_grouped_gemm(ctx.xs, ctx.dys, [w.main_grad for w in ws], accumulate=acc)
            trainable = [w.requires_grad for w in ws]
            for w in ws:
                w.grad_added_to_main_grad = True
            return [make_dummy_wgrad(w) if t else None for w, t in zip(ws, trainable)]
    """,
}


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_buggy_spelling_is_reported(name):
    code, line, source = BUGGY[name]
    assert [(f.code, f.line) for f in lint_snippet(source)] == [(code, line)]


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_spelling_is_clean(name):
    assert lint_snippet(CORRECT[name]) == []


def test_a_return_in_a_try_runs_its_finally_and_the_normal_way_out_does_not_return():
    import libcst

    from gmlp_check.lint.analysis.cfg import build_graph

    module = libcst.parse_module(
        "try:\n    if a:\n        return x\n    y = 1\nfinally:\n    z = 2\nw = 3\n"
    )
    graph = build_graph(module.body)
    try_stmt = module.body[0]
    (final,) = try_stmt.finalbody.body.body[0].body
    normal, copy = graph.nodes_for(final)
    (ret,) = [n for n in graph.nodes if isinstance(n.owner, libcst.Return)]
    assert [s for s, _ in ret.succ] == [copy]
    assert [s for s, _ in copy.succ] == [graph.exit]
    assert [type(s.owner).__name__ for s, _ in normal.succ] == ["Assign"]  # ``w = 3``
