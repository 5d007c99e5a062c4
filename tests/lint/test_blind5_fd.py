"""Held-out fifth blind corpus, classes 1-4 (helper fd): the variants made caught, and the
classes they stand for in other spellings.

* GMLP032 precision: a product of the weight (``dx = general_gemm(weight_fp8, dy)[0]``,
  ``dy @ w``) handed back beside the dummy is the input gradient, not a dropped wgrad;
* GMLP037: a quantized copy bound to a wgrad helper by ``functools.partial`` (kept on
  ``ctx`` and called later) takes the Parameter's main_grad from the copy;
* GMLP015: a module's weight rebound to a fresh ``Parameter`` by a method its forward runs
  (assignment, ``setattr``, ``register_parameter``);
* GMLP032: a marking decorator / wrapper applied to a function that returns the gradient
  it computes;
* GMLP016: ``accumulate=self.X`` where X is a class constant that is off.
"""

from __future__ import annotations

import pytest

from .support import lint_snippet

# (source, code, line) of buggy spellings not in the corpus.
BUGGY = (
    # GMLP037: the partial made in backward, the copy by keyword
    (
        """
        def _accumulate(param, x, dy):
            param.main_grad.add_(dy.t() @ x)
            param.grad_added_to_main_grad = True


        def backward(ctx, dy, x, weight):
            w_q = cast_to_fp8(weight)
            step = partial(_accumulate, param=w_q)
            step(x, dy)
            return dy @ w_q
        """,
        "GMLP037",
        8,
    ),
    # GMLP037: a partial of a method, the copy quantized by .to(float8)
    (
        """
        class Expert:
            def _wgrad(self, weight, x, dy):
                general_gemm(x, dy, out=weight.main_grad, accumulate=True)

            def backward(self, x, dy):
                wq = self.weight.to(torch.float8_e4m3fn)
                self._pending = functools.partial(self._wgrad, wq)
                return dy @ wq
        """,
        "GMLP037",
        7,
    ),
    # GMLP015: forward itself rebinds the weight
    (
        """
        class Layer(torch.nn.Module):
            def forward(self, x):
                self.weight = nn.Parameter(self.weight.detach().cuda())
                return LinearFn.apply(x, self.weight)


        class LinearFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                ctx.weight.main_grad.add_(dy.t() @ ctx.x)
                return None, None
        """,
        "GMLP015",
        3,
    ),
    # GMLP015: a forward pre-hook of the class re-registers the weights
    (
        """
        class Experts(torch.nn.Module):
            def __init__(self, n):
                super().__init__()
                self.register_forward_pre_hook(self._fetch)

            def _fetch(self, module, args):
                for i, host in enumerate(self.hosts):
                    fresh = torch.nn.Parameter(host.cuda(non_blocking=True))
                    self.register_parameter(f"w{i}", fresh)

            def wgrad(self, i, x, dy):
                getattr(self, f"w{i}").main_grad.add_(dy.t() @ x)
        """,
        "GMLP015",
        9,
    ),
    # GMLP032: the wrapper called, not used as a decorator; the weight second
    (
        """
        def flagging(fn):
            def inner(x, param, dy):
                out = fn(x, param, dy)
                param.grad_added_to_main_grad = True
                return out

            return inner


        def grad_weight(x, param, dy):
            return torch.matmul(dy.t(), x).float()


        WGRAD = flagging(grad_weight)
        """,
        "GMLP032",
        14,
    ),
    (
        """
        def sets_added(fn):
            @functools.wraps(fn)
            def wrapped(w, inp, grad):
                g = fn(w, inp, grad)
                for _ in range(1):
                    w.grad_added_to_main_grad = True
                return g

            return wrapped


        @sets_added
        def dense_wgrad(w, inp, grad):
            return general_gemm(inp, grad, layout="NT")[0]
        """,
        "GMLP032",
        12,
    ),
    # GMLP016: a class constant that is 0, read through cls
    (
        """
        class WgradOps:
            BETA = 0

            @classmethod
            def wgrad(cls, weight, x, dy):
                weight.main_grad.addmm_(dy.t(), x, beta=cls.BETA)
                weight.grad_added_to_main_grad = True
        """,
        "GMLP016",
        6,
    ),
    # GMLP016: the constant on the same class, used in a backward
    (
        """
        class _Fn(torch.autograd.Function):
            accumulate_into_main_grad = False

            def backward(self, ctx, dy):
                w = ctx.weight
                general_gemm(ctx.x, dy, out=w.main_grad, accumulate=self.accumulate_into_main_grad)
                return None, None
        """,
        "GMLP016",
        6,
    ),
)

# Correct spellings of the same shapes: no finding at all.
CORRECT = (
    # GMLP032: dgrad of the weight handed back beside the dummy (matmul of the weight)
    """
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        general_gemm(x, dy, out=w.main_grad, accumulate=True)
        grad_input = dy.matmul(w)
        w.grad_added_to_main_grad = True
        zero = getattr(w, "zero_out_wgrad", False)
        return grad_input, get_dummy_wgrad(list(w.size()), w.dtype, zero=zero)
    """,
    """
    def backward(ctx, dy):
        inp, weightmat = ctx.saved_tensors
        weight = ctx.weight
        ctx.wgrad_step(inp, dy)
        dgrad = torch.matmul(dy, weightmat.t())
        if hasattr(weight, "grad_added_to_main_grad"):
            weight.grad_added_to_main_grad = True
        zero = getattr(weight, "zero_out_wgrad", False)
        return dgrad, get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)
    """,
    # GMLP037: the partial bound to the Parameter, the copy used for compute only
    """
    def _accumulate(param, x, dy):
        param.main_grad.add_(dy.t() @ x)


    def backward(ctx, dy, x, weight):
        w_q = cast_to_fp8(weight)
        step = partial(_accumulate, param=weight)
        step(x, dy)
        return dy @ w_q
    """,
    """
    class Expert:
        def _wgrad(self, weight, x, dy):
            general_gemm(x, dy, out=weight.main_grad, accumulate=True)

        def backward(self, x, dy):
            wq = self.weight.to(torch.float8_e4m3fn)
            self._pending = functools.partial(self._wgrad, self.weight)
            return dy @ wq
    """,
    # GMLP015: lazy creation on the first forward, and copying into the Parameter
    """
    class Layer(torch.nn.Module):
        def forward(self, x):
            if self.weight is None:
                self.weight = nn.Parameter(torch.empty(self.shape, device=x.device))
            return LinearFn.apply(x, self.weight)

        def backward_dw(self, x, dy):
            self.weight.main_grad.add_(dy.t() @ x)
    """,
    """
    class Experts(torch.nn.Module):
        def __init__(self, hosts):
            super().__init__()
            for i, host in enumerate(hosts):
                self.register_parameter(f"w{i}", torch.nn.Parameter(host.cuda()))

        def forward(self, x):
            self._fetch()
            return run(x, self.parameters())

        def _fetch(self):
            for i, host in enumerate(self.hosts):
                getattr(self, f"w{i}").data.copy_(host, non_blocking=True)

        def wgrad(self, i, x, dy):
            getattr(self, f"w{i}").main_grad.add_(dy.t() @ x)
    """,
    # GMLP032: the marking wrapper around a function that writes main_grad; a wrapper
    # that marks nothing around the plain one
    """
    def flagging(fn):
        def inner(x, param, dy):
            out = fn(x, param, dy)
            param.grad_added_to_main_grad = True
            return out

        return inner


    def fused(x, param, dy):
        param.main_grad.add_(dy.t() @ x)
        return None


    def grad_weight(x, param, dy):
        return torch.matmul(dy.t(), x).float()


    WGRAD = {True: flagging(fused), False: grad_weight}
    """,
    """
    def timed(fn):
        def inner(weight, x, dy):
            start = time.time()
            result = fn(weight, x, dy)
            weight.grad_added_to_main_grad = weight.grad_added_to_main_grad
            log(time.time() - start)
            return result

        return inner


    @timed
    def plain_wgrad(weight, x, dy):
        return dy.t() @ x
    """,
    # GMLP016: the constant overridden by a subclass, or set from the config
    """
    class _Mixin:
        wgrad_accumulate = False

        def _wgrad(self, weight, x, dy):
            general_gemm(x, dy, out=weight.main_grad, accumulate=self.wgrad_accumulate)
            weight.grad_added_to_main_grad = True


    class Expert(_Mixin, torch.nn.Module):
        wgrad_accumulate = True
    """,
    """
    class _Mixin:
        wgrad_accumulate = False

        def configure(self, config):
            self.wgrad_accumulate = config.gradient_accumulation_fusion

        def _wgrad(self, weight, x, dy):
            general_gemm(x, dy, out=weight.main_grad, accumulate=self.wgrad_accumulate)
            weight.grad_added_to_main_grad = True
    """,
)


@pytest.mark.parametrize(("source", "code", "line"), BUGGY)
def test_buggy_spelling_reported(source, code, line):
    found = lint_snippet(source)
    assert any(f.code == code and f.line == line for f in found), found


@pytest.mark.parametrize("source", CORRECT)
def test_correct_spelling_clean(source):
    assert lint_snippet(source) == []
