"""Correct code near the sixth blind corpus's new facts, from the review of that round: each
was reported (or, for the ``match`` statement, stopped the file with an internal error)
before the mends in unexposed_fetches, override_gates, holders and unwritten_marks."""

import pytest

from .support import lint_snippet

CORRECT = {
    # GMLP046: a fetch inside a ``match`` case (compound statements' suites include cases).
    "fetch-in-match-case": """
def pre_forward(module, mode):
    for p in module.parameters():
        match mode:
            case "fsdp":
                p.main_grad = p.get_main_grad()
            case _:
                pass
""",
    # GMLP046: the None case is handled by another fetch of the same function.
    "fetch-also-on-none": """
def pre_forward(module, _inputs):
    for p in module.parameters():
        if not hasattr(p, "main_grad"):
            p.main_grad = p.get_main_grad()
        elif p.main_grad is None:
            p.main_grad = p.get_main_grad()
""",
    "fetch-in-else-and-on-none": """
def expose(p):
    if hasattr(p, "main_grad"):
        if p.main_grad is None:
            p.main_grad = p.get_main_grad()
    else:
        p.main_grad = p.get_main_grad()
""",
    "fetch-after-attribute-error-and-on-none": """
def expose(p):
    try:
        mg = p.main_grad
    except AttributeError:
        mg = None
        p.main_grad = p.get_main_grad()
    if mg is None:
        p.main_grad = p.get_main_grad()
""",
    # GMLP046: a stored fetch that is read: returned, a GEMM's output, a closure, a subclass.
    "stored-and-returned": """
class Linear(nn.Module):
    def _wgrad_out(self):
        self._cached_main_grad = self.weight.get_main_grad()
        return self._cached_main_grad
""",
    "stored-and-gemm-output": """
class Experts(nn.Module):
    def backward_dw(self):
        self._mg = self.weight.get_main_grad()
        torch.matmul(self.grad_out.t(), self.inp, out=self._mg)
        self.weight.grad_added_to_main_grad = True
""",
    "stored-and-read-by-closure": """
class Experts(nn.Module):
    def install(self):
        self._bufs = [p.get_main_grad() for p in self.parameters()]

        def _zero(*_):
            for b in self._bufs:
                b.zero_()

        self.register_forward_pre_hook(_zero)
""",
    "stored-and-read-by-subclass": """
class Base(nn.Module):
    def prefetch(self):
        self._bufs = [p.get_main_grad() for p in self.op.parameters()]


class Child(Base):
    def forward(self, x):
        return self.op(x, self._bufs)
""",
    # GMLP014: the layer's backward_dw is called on both sides of an unrelated test.
    "layer-called-on-both-sides": """
class MLP(MegatronModule):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.linear_fc1 = TELinear(config)
        self.linear_fc2 = TELinear(config)

    def backward_dw(self):
        if self.config.fp8:
            with fp8_autocast(enabled=True):
                self.linear_fc1.backward_dw()
        else:
            self.linear_fc1.backward_dw()
        self.linear_fc2.backward_dw()
""",
    "layers-called-in-either-order": """
class MLP(MegatronModule):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.linear_fc1 = TELinear(config)
        self.linear_fc2 = TELinear(config)

    def backward_dw(self):
        if self.config.recompute_granularity == "full":
            self.linear_fc1.backward_dw()
            self.linear_fc2.backward_dw()
        else:
            self.linear_fc2.backward_dw()
            self.linear_fc1.backward_dw()
""",
    # GMLP030: a holder's bias field is a parameter of its own, not the weight's stand-in.
    "holder-bias-marked-itself": """
@dataclass
class ExpertParams:
    weight: nn.Parameter
    bias: torch.Tensor

    def accumulate(self, wgrad, bgrad):
        self.weight.main_grad.add_(wgrad)
        self.weight.grad_added_to_main_grad = True
        self.bias.main_grad.add_(bgrad)
        self.bias.grad_added_to_main_grad = True
""",
    "holder-field-given-its-grad": """
@dataclass
class ExpertParams:
    param: nn.Parameter
    offset: torch.Tensor

    def finish(self, wgrad, g):
        self.param.main_grad.add_(wgrad)
        self.param.grad_added_to_main_grad = True
        self.offset.grad = g.sum(0)
""",
    # GMLP032: the second weight's main_grad reached through another object.
    "second-main-grad-from-ctx-field": """
class F(torch.autograd.Function):
    @staticmethod
    def backward(ctx, g):
        fc1_w, fc2_w = ctx.fc1_weight, ctx.fc2_weight
        fc1_mg = fc1_w.main_grad
        fc2_mg = ctx.fc2_main_grad
        general_gemm(ctx.x, g, out=fc1_mg, accumulate=True)
        general_gemm(ctx.h, g, out=fc2_mg, accumulate=True)
        for w in (fc1_w, fc2_w):
            w.grad_added_to_main_grad = True
        return None
""",
    "second-main-grad-from-ctx-list": """
class F(torch.autograd.Function):
    @staticmethod
    def backward(ctx, g):
        w1, w2 = ctx.w1, ctx.w2
        w1.main_grad.add_(g)
        w2_mg = ctx.main_grads[1]
        w2_mg.add_(g)
        for w in (w1, w2):
            w.grad_added_to_main_grad = True
        return None
""",
}


@pytest.mark.parametrize("source", list(CORRECT.values()), ids=list(CORRECT))
def test_correct_code_near_the_new_facts_is_not_reported(source):
    assert lint_snippet(source) == []
