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
