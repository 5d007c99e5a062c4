"""Class variants for issue #19's class 3 (flags without writes, and writes without
flags), the flag used as a once-per-step guard: a producer adds into main_grad only while
the weight's ``grad_added_to_main_grad`` is False and then sets it, so from the second
microbatch on its write is skipped (GMLP041). Written from the shape of the bug (AMD-AGI
Primus #1046's unfused path), not from its code: other test spellings (``is False``,
``getattr``, a ``hasattr`` guard joined by ``and``), a GEMM or kernel instead of ``add_``,
per-expert weights in a loop. Each twin is the correct version: the write on every
microbatch, the flag set after it, or the test left to the consumer. Same format as
variant_corpus.py.
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    Variant(
        3,
        "once-guard-on-the-flag-getattr-is-false",
        """
        def accumulate_wgrad(weight, x, dy):
            if getattr(weight, "grad_added_to_main_grad", False) is False:  # bug
                torch.addmm(weight.main_grad, dy.t(), x, out=weight.main_grad)
            weight.grad_added_to_main_grad = True
            return make_dummy_wgrad(weight)
        """,
        """
        def accumulate_wgrad(weight, x, dy):
            torch.addmm(weight.main_grad, dy.t(), x, out=weight.main_grad)
            weight.grad_added_to_main_grad = True
            return make_dummy_wgrad(weight)
        """,
    ),
    Variant(
        3,
        "once-guard-per-expert-kernel",
        """
        class ExpertWgrad(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                for w, g in zip(ctx.weights, split_wgrads(ctx, dy)):
                    if hasattr(w, "main_grad") and not w.grad_added_to_main_grad:  # bug
                        fused_add_(w.main_grad, g)
                        w.grad_added_to_main_grad = True
                return (None,) + tuple(make_dummy_wgrad(w) for w in ctx.weights)
        """,
        """
        class ExpertWgrad(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                for w, g in zip(ctx.weights, split_wgrads(ctx, dy)):
                    if hasattr(w, "main_grad"):
                        fused_add_(w.main_grad, g)
                        w.grad_added_to_main_grad = True
                return (None,) + tuple(make_dummy_wgrad(w) for w in ctx.weights)
        """,
    ),
    Variant(
        3,
        "once-guard-main-grad-through-a-local",
        """
        def finish_wgrad(param, wgrad, fused):
            if fused:
                param.grad_added_to_main_grad = True
                return None
            main_grad = param.main_grad
            if not param.grad_added_to_main_grad:  # bug
                main_grad.add_(wgrad)
                param.grad_added_to_main_grad = True
            return torch.zeros_like(param)
        """,
        """
        def finish_wgrad(param, wgrad, fused):
            if fused:
                param.grad_added_to_main_grad = True
                return None
            main_grad = param.main_grad
            main_grad.add_(wgrad)
            param.grad_added_to_main_grad = True
            return torch.zeros_like(param)
        """,
    ),
)
