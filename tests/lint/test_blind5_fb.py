"""Fifth blind corpus, classes 1 and 4 (helper fb): the variants made caught, and the classes
they stand for in other spellings.

* GMLP007: ``overwrite_main_grad`` read into a local (an assignment or a walrus, a couple of
  locals deep) that a GEMM writing another object's main_grad is handed;
* GMLP007/GMLP030: stand-ins bound by a walrus, kept in a dict comprehension and walked
  through ``.values()`` / ``.items()``;
* GMLP016: torch's ``addmm`` family with ``beta=0`` into main_grad (``out=`` its own input or
  the in-place method), ``out=main_grad`` over another input, and ``accumulate=False``
  pinned by a ``functools.partial`` (module-level, local, a partial of a partial).
"""

from __future__ import annotations

import pytest

from .support import lint_snippet

# (source, code, line) of buggy spellings not in the corpus.
BUGGY = (
    # GMLP007 through locals: the flag of fc1 two locals deep decides fc2's GEMM
    (
        """
        def backward(ctx, dy, fc1_weight, fc2_weight, x, h):
            fc1_over = getattr(fc1_weight, "overwrite_main_grad", False)
            acc = not fc1_over
            general_gemm(h, dy, out=fc2_weight.main_grad, accumulate=acc)
        """,
        "GMLP007",
        2,
    ),
    # the flag read from the per-expert copy zipped beside the Parameter
    (
        """
        def wgrad(params, casts, xs, dys):
            for p, c, x, dy in zip(params, casts, xs, dys):
                keep = not getattr(c, "overwrite_main_grad", False)
                general_gemm(x, dy, out=p.main_grad, accumulate=keep)
        """,
        "GMLP007",
        3,
    ),
    # one local computed for fc1, reused for fc2's GEMM
    (
        """
        def backward(ctx, dy, fc1_weight, fc2_weight, x, h):
            acc = not getattr(fc1_weight, "overwrite_main_grad", False)
            general_gemm(x, dy, out=fc1_weight.main_grad, accumulate=acc)
            general_gemm(h, dy, out=fc2_weight.main_grad, accumulate=acc)
        """,
        "GMLP007",
        2,
    ),
    # ``out=`` a local bound to main_grad, the flag from the copy beside it
    (
        """
        def wgrad(params, casts, xs, dys):
            for p, c, x, dy in zip(params, casts, xs, dys):
                mg = p.main_grad
                if over := getattr(c, "overwrite_main_grad", False):
                    log_once("main_grad is overwritten")
                general_gemm(x, dy, out=mg, accumulate=not over)
        """,
        "GMLP007",
        4,
    ),
    # stand-ins through a walrus and a dict of per-expert copies
    (
        """
        def backward(ctx, dy, weight, x):
            if (wq := quantize(weight)) is not None:
                general_gemm(x, dy, out=wq.main_grad, accumulate=True)
            return wq
        """,
        "GMLP030",
        3,
    ),
    (
        """
        def backward(ctx, dy, weight, x):
            if (wq := cast_to_fp8(weight)) is not None:
                acc = not getattr(wq, "overwrite_main_grad", False)
            return acc
        """,
        "GMLP007",
        3,
    ),
    (
        """
        def backward(ctx, weights, xs):
            casts = {e: quantize(w) for e, w in enumerate(weights)}
            for wq in casts.values():
                wq.main_grad.add_(xs)
        """,
        "GMLP030",
        4,
    ),
    (
        """
        def backward(ctx, weights, xs):
            gathered = {e: all_gather_along_first_dim(w) for e, w in enumerate(weights)}
            for e, full in gathered.items():
                full.main_grad.add_(xs[e])
        """,
        "GMLP030",
        4,
    ),
    # GMLP016: the addmm family with beta=0, and out= over another input
    (
        """
        def wgrad_into_main_grad(param, x, dy):
            param.main_grad.addmm_(dy.t(), x, beta=0)
        """,
        "GMLP016",
        2,
    ),
    (
        """
        def grouped_wgrad(w, xs, dys):
            torch.baddbmm(w.main_grad, dys.transpose(1, 2), xs, beta=0.0, out=w.main_grad)
        """,
        "GMLP016",
        2,
    ),
    (
        """
        def wgrad(w, x, dy, bias):
            torch.addmm(bias, dy.t(), x, out=w.main_grad)
        """,
        "GMLP016",
        2,
    ),
    (
        """
        def wgrad(w, x, dy):
            zero = 0.0
            torch.addmm(w.main_grad, dy.t(), x, beta=zero, out=w.main_grad)
        """,
        "GMLP016",
        3,
    ),
    # accumulate=False pinned by a partial: local, and a partial of a module-level partial
    (
        """
        from functools import partial


        def backward_wgrad(ctx, weights, xs, dys):
            gemm = partial(general_gemm, accumulate=False, layout="NT")
            for w, x, dy in zip(weights, xs, dys):
                gemm(x, dy, out=w.main_grad)
        """,
        "GMLP016",
        7,
    ),
    (
        """
        import functools

        _base = functools.partial(general_gemm, accumulate=False)
        _nt = functools.partial(_base, layout="NT")


        def wgrad(w, x, dy):
            _nt(x, dy, out=w.main_grad)
        """,
        "GMLP016",
        8,
    ),
)

CORRECT = (
    # the same flag, through locals and a walrus, decides the same weight's GEMM
    """
    def backward(ctx, dy, weight, x):
        acc = not getattr(weight, "overwrite_main_grad", False)
        general_gemm(x, dy, out=weight.main_grad, accumulate=acc)
    """,
    """
    def wgrad(params, xs, dys):
        for p, x, dy in zip(params, xs, dys):
            if (o := getattr(p, "overwrite_main_grad", False)):
                pass
            general_gemm(x, dy, out=p.main_grad, accumulate=not o)
    """,
    """
    def backward(ctx, dy, fc1_weight, fc2_weight, x, h):
        acc = not getattr(fc1_weight, "overwrite_main_grad", False)
        general_gemm(x, dy, out=fc1_weight.main_grad, accumulate=acc)
        acc = not getattr(fc2_weight, "overwrite_main_grad", False)
        general_gemm(h, dy, out=fc2_weight.main_grad, accumulate=acc)
    """,
    """
    def wgrad(params, xs, dys):
        for p, x, dy in zip(params, xs, dys):
            mg = getattr(p, "main_grad", None)
            over = getattr(p, "overwrite_main_grad", False)
            general_gemm(x, dy, out=mg, accumulate=not over)
    """,
    """
    def wgrad(params, xs, dys):
        for p, x, dy in zip(params, xs, dys):
            mg = p.main_grad
            over = getattr(p, "overwrite_main_grad", False)
            general_gemm(x, dy, out=mg, accumulate=not over)
    """,
    # a walrus or a dict that holds the Parameters, or copies used for the data path only
    """
    def backward(ctx, dy, weight, x):
        if (wq := quantize(weight)) is not None:
            general_gemm(x, dy, out=weight.main_grad, accumulate=True)
        return wq
    """,
    """
    def backward(ctx, weights, xs):
        params = {e: w for e, w in enumerate(weights)}
        for w in params.values():
            w.main_grad.add_(xs)
    """,
    # the addmm family adding into main_grad, or returning a fresh tensor
    """
    def wgrad(param, x, dy):
        param.main_grad.addmm_(dy.t(), x)
        torch.addmm(param.main_grad, dy.t(), x, out=param.main_grad)
    """,
    """
    def wgrad(param, x, dy):
        return torch.addmm(param.main_grad, dy.t(), x, beta=0)
    """,
    """
    def wgrad(param, x, dy):
        beta = 0.0 if getattr(param, "overwrite_main_grad", False) else 1.0
        param.main_grad.addmm_(dy.t(), x, beta=beta)
    """,
    # partials that accumulate, or whose pinned switch the call overrides
    """
    import functools

    _gemm = functools.partial(general_gemm, layout="NT", accumulate=True)


    def wgrad(w, x, dy):
        _gemm(x, dy, out=w.main_grad)
    """,
    """
    import functools

    _gemm = functools.partial(general_gemm, layout="NT", accumulate=False)


    def wgrad(w, x, dy):
        _gemm(x, dy, out=w.main_grad, accumulate=True)
    """,
    """
    import functools


    def wgrad(w, x, dy, fresh):
        if fresh:
            gemm = functools.partial(general_gemm, accumulate=False)
        else:
            gemm = general_gemm
        gemm(x, dy, out=w.main_grad, accumulate=True)
    """,
)


@pytest.mark.parametrize(("source", "code", "line"), BUGGY)
def test_other_spellings_reported(source, code, line):
    found = lint_snippet(source)
    assert any(f.code == code and f.line == line for f in found), found


@pytest.mark.parametrize("source", CORRECT)
def test_other_correct_spellings_clean(source):
    assert lint_snippet(source) == []
