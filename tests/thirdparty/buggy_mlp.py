"""The third party's per-expert MLP with one bug planted in its own code, for reproductions
that must fail without gmlp_check: in overwrite mode an expert that received no tokens is
skipped, so its main_grad keeps whatever it held (the "empty expert skipped" class)."""

from __future__ import annotations

import torch

from .per_expert_mlp import ExpertLinears, _destination, make


class SkipsEmptyExperts(ExpertLinears):
    def deliver(self, g, x, dy):
        p = self.weight(g)
        if self.into_main_grad and getattr(p, "overwrite_main_grad", False) and x.shape[0] == 0:
            _destination(p)  # fetched, then never written
            if hasattr(p, "grad_added_to_main_grad"):
                p.grad_added_to_main_grad = True
            return torch.zeros_like(p)
        return super().deliver(g, x, dy)


def make_skipping_empty_experts(**kwargs):
    module = make(**kwargs)
    module.fc1.__class__ = SkipsEmptyExperts
    module.fc2.__class__ = SkipsEmptyExperts
    return module


class GatesBookkeepingOnLocalFlag(ExpertLinears):
    """TE #2936's other half, in this module's own code: the flag and the dummy follow a
    local accumulate flag that overwrite_main_grad switched off."""

    def deliver(self, g, x, dy):
        weight = self.weight(g)
        wgrad = dy.float().t() @ x.float()
        if not self.into_main_grad:
            return wgrad.to(weight.dtype)
        accumulate = False
        if self.into_main_grad:
            accumulate = not getattr(weight, "overwrite_main_grad", False)
        destination = _destination(weight)
        if accumulate:
            destination.add_(wgrad)
        else:
            destination.copy_(wgrad)
        if accumulate and hasattr(weight, "grad_added_to_main_grad"):
            weight.grad_added_to_main_grad = True
            return torch.zeros_like(weight)
        return wgrad.to(weight.dtype)


def make_gating_bookkeeping_on_local_flag(**kwargs):
    module = make(**kwargs)
    module.fc1.__class__ = GatesBookkeepingOnLocalFlag
    module.fc2.__class__ = GatesBookkeepingOnLocalFlag
    return module


def _wgrad_gemm(dy, x, out=None, accumulate=False):
    """The weight-gradient GEMM: into ``out`` when given (added when ``accumulate``, else
    overwriting it) and that tensor returned, as a GEMM with an output argument does."""
    wgrad = dy.float().t() @ x.float()
    if out is None:
        return wgrad
    if accumulate:
        return out.add_(wgrad)
    return out.copy_(wgrad)


class HandsMainGradBackOnLocalFlag(ExpertLinears):
    """The shape of Transformer Engine 2.20.2's ``BasicLinear.op_backward`` (this module's own
    code, not TE's): the wgrad GEMM writes into main_grad whenever output into main_grad is on,
    accumulating or not as a local flag says; that local is then switched off by
    overwrite_main_grad, and the dummy and grad_added_to_main_grad are gated on it. In overwrite
    mode main_grad is right, the flag is never set, and the GEMM's output, main_grad itself, goes
    back to autograd as the weight's .grad."""

    def deliver(self, g, x, dy):
        weight = self.weight(g)
        accumulate_into_main_grad = self.into_main_grad
        grad_weight = None
        if accumulate_into_main_grad:
            main_grad = _destination(weight)
            accumulate_into_main_grad = not getattr(weight, "overwrite_main_grad", False)
            grad_weight = main_grad.detach()
        else:
            accumulate_into_main_grad = False
        grad_weight = _wgrad_gemm(dy, x, out=grad_weight, accumulate=accumulate_into_main_grad)
        if accumulate_into_main_grad:
            weight.grad_added_to_main_grad = True
            grad_weight = torch.zeros_like(weight)
        return grad_weight if grad_weight.dtype == weight.dtype else grad_weight.to(weight.dtype)


def make_handing_main_grad_back(**kwargs):
    module = make(**kwargs)
    module.fc1.__class__ = HandsMainGradBackOnLocalFlag
    module.fc2.__class__ = HandsMainGradBackOnLocalFlag
    return module
