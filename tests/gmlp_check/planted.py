"""Reference grouped MLPs with one planted bug each, one per bug class of CONTRACT.md.

They let the checker's own tests show that each class is caught by the observable meant to
catch it, independently of the fused backend's fault injection (which the mutants tests
cover). Each is the reference with one decision changed, written plainly.
"""

from __future__ import annotations

import torch

import gmlp_check.refimpl.grouped_linear as gl
from gmlp_check.refimpl import GroupedMLP
from gmlp_check.refimpl.main_grad import (
    dummy_wgrad,
    fetch_main_grad,
    mark_grad_added,
    overwrites_main_grad,
)


class _Buggy(gl.GroupedLinear):
    bug = ""

    def weight_grads(self, x, dy, split_sizes):
        params = self.weight_params()
        if not self.accumulate_into_main_grad:
            return super().weight_grads(x, dy, split_sizes)
        names = [f"{self.name}.{n}" for n in self.weight_names()]
        if self.bug == "fsdp-main-grad-not-fetched":
            destinations = [p.main_grad.view(p.shape) for p in params]
        else:
            destinations = [fetch_main_grad(n, p) for n, p in zip(names, params)]
        expert_params = params * self.num_groups if self.single_grouped_weight else params
        expert_destinations = self.per_expert(destinations)
        local_accumulate = not overwrites_main_grad(params[0])  # the downgraded local flag
        for g, wgrad in self.expert_wgrads(x, dy, split_sizes):
            rows = split_sizes[g]
            if self.bug == "empty-expert-skipped" and rows == 0:
                continue
            dest = expert_destinations[g]
            if self.bug == "group-offsets-shifted":
                dest = expert_destinations[(g + 1) % self.num_groups]
            if self.bug == "alias-gated-on-local-flag" and not local_accumulate:
                dest = torch.empty_like(dest)  # scratch, never copied back
            overwrite = overwrites_main_grad(expert_params[g])
            if self.bug == "overwrite-accumulate-swapped":
                overwrite = not overwrite
            if overwrite:
                dest.copy_(wgrad)
            else:
                dest.add_(wgrad)
        if self.bug == "bookkeeping-gated-on-local-flag" and not local_accumulate:
            acc = torch.float32
            grads = [torch.zeros(p.shape, dtype=acc, device=p.device) for p in params]
            for g, wgrad in self.expert_wgrads(x, dy, split_sizes):
                self.per_expert(grads)[g].copy_(wgrad)
            return [grad.to(p.dtype) for grad, p in zip(grads, params)]
        for p in params:
            mark_grad_added(p)
        if self.bug == "no-dummy-grad":
            return [None for _ in params]
        if self.bug == "dummy-not-zeroed":
            return [torch.empty_like(p) for p in params]
        return [dummy_wgrad(p) for p in params]

    def backward_dw(self):
        if self.bug == "delayed-wgrad-dropped":
            ran = bool(self._pending_wgrads)
            self._pending_wgrads.clear()
            return ran
        return super().backward_dw()


BUGS = (
    "alias-gated-on-local-flag",
    "bookkeeping-gated-on-local-flag",
    "delayed-wgrad-dropped",
    "dummy-not-zeroed",
    "overwrite-accumulate-swapped",
    "fsdp-main-grad-not-fetched",
    "empty-expert-skipped",
    "group-offsets-shifted",
    "no-dummy-grad",
)


def planted(bug: str):
    """A factory (refimpl.GroupedMLP's arguments) for the reference with ``bug`` planted."""
    if bug not in BUGS:
        raise ValueError(f"bug: expected one of {', '.join(BUGS)}, got {bug!r}")
    cls = type(f"Buggy_{bug}", (_Buggy,), {"bug": bug})

    def factory(**kwargs):
        mlp = GroupedMLP(**kwargs)
        mlp.fc1.__class__ = cls
        mlp.fc2.__class__ = cls
        return mlp

    return factory


# Module-level factories, so that "tests.gmlp_check.planted:<bug_with_underscores>" and
# "tests.gmlp_check.planted:reference" work as --fused specs.
reference = GroupedMLP
for _bug in BUGS:
    globals()[_bug.replace("-", "_")] = planted(_bug)
