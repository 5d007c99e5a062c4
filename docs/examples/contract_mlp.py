"""A ``module:factory`` for ``gmlp-check diff --fused docs.examples.contract_mlp:make``: the
smallest thing the protocol asks for. Replace the body with your own fused grouped MLP.

The factory takes the reference's keyword arguments (num_experts, hidden, ffn, activation,
bias, single_grouped_weight, accumulate_into_main_grad, delay_wgrad_compute, dtype, device)
and returns a module with ``forward(x, split_sizes, probs=None)``, ``backward_dw()`` and
``register_wgrad_accumulation_and_reduce_hooks(hook)``, whose parameters carry the reference's
names (``fc1.weight0`` ... or ``fc1.weight`` for one grouped weight). A configuration it cannot
build raises NotImplementedError with the reason: the checker reports that case as skipped.
Here the module is gmlp-check's own reference, which honours the contract by construction.
"""

from __future__ import annotations

from gmlp_check.refimpl import GroupedMLP


def make(**kwargs) -> GroupedMLP:
    return GroupedMLP(**kwargs)
