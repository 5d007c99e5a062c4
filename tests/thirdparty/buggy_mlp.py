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
