"""te-sequential: one ``ops.Sequential(BasicLinear, [Bias], <activation>, BasicLinear, [Bias])``
per expert, each run on its own rows (every expert, also those with 0 rows, as Megatron's
SequentialMLP does), the path of Megatron's TEFusedMLP and of sequential experts.

TE 2.20.2's BasicLinear (ops/basic/basic_linear.py) owns one [out, in] weight Parameter per
op and has no ``delay_wgrad_compute``, so neither a single [G, out, in] weight nor delayed
weight gradients can be expressed with it: both raise NotImplementedError.

Its main_grad handling (``BasicLinear.op_backward``) is the class of bug behind TE #2936:
``accumulate_into_main_grad`` is read from the op, the wgrad GEMM output is aliased to
``main_grad`` whenever the op-level flag is on (correct), and then the local flag is
downgraded by ``get_accumulate_flag_in_param`` (False under overwrite_main_grad) and the
*bookkeeping* (the dummy returned to autograd) is gated on the downgraded local. Under
overwrite_main_grad=True the
GEMM overwrites main_grad with W (correct), but no dummy is returned and
grad_added_to_main_grad is not set: the op hands autograd the fp32 main_grad tensor itself as
the weight's gradient, so a DDP hook adds it into main_grad again (2W), and for an fp32 weight
``.grad`` can share main_grad's memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..refimpl.config import MLPConfig
from .te_common import (
    TE_ACTIVATIONS,
    TE_VERSION,
    TEAdapter,
    check_target,
    import_te,
    lookup,
    make_activation_op,
    require_kwargs,
)

ADAPTER = "te-sequential"


class TESequentialMLP(TEAdapter):
    def __init__(self, config: MLPConfig) -> None:
        super().__init__(ADAPTER, config)
        row = lookup(ADAPTER, TE_ACTIVATIONS, config.activation)
        if config.delay_wgrad_compute:
            raise NotImplementedError(
                f"{ADAPTER}: TE {TE_VERSION}'s BasicLinear has no delay_wgrad_compute "
                f"(BasicLinear.__init__, ops/basic/basic_linear.py)"
            )
        if config.single_grouped_weight:
            raise NotImplementedError(
                f"{ADAPTER}: TE's BasicLinear owns one [out, in] weight Parameter per op; a "
                f"single [G, out, in] Parameter cannot be shared with G ops as their leaves"
            )
        device = check_target(ADAPTER, config.device, config.dtype)
        te = import_te(ADAPTER)
        ops = te.ops
        require_kwargs(ADAPTER, ops.BasicLinear, ("device", "dtype", "accumulate_into_main_grad"))
        require_kwargs(ADAPTER, ops.Bias, ("device", "dtype"))
        self._scaled = row.scaled
        shapes = {
            "fc1": (config.hidden, self.activation.fc1_out_features(config.ffn)),
            "fc2": (config.ffn, config.hidden),
        }
        linears: dict[str, list] = {"fc1": [], "fc2": []}
        biases: dict[str, list] = {"fc1": [], "fc2": []}
        experts = []
        for _ in range(config.num_experts):
            for layer, (n_in, n_out) in shapes.items():
                linears[layer].append(
                    ops.BasicLinear(
                        n_in,
                        n_out,
                        device=device,
                        dtype=config.dtype,
                        accumulate_into_main_grad=config.accumulate_into_main_grad,
                    )
                )
                if config.bias:
                    biases[layer].append(ops.Bias(n_out, device=device, dtype=config.dtype))
            fc1, fc2 = ([linears[k][-1], *biases[k][-1:]] for k in ("fc1", "fc2"))
            experts.append(ops.Sequential(*fc1, make_activation_op(ADAPTER, te, row), *fc2))
        # refimpl's registration order: every weight of a layer, then every config.bias.
        for layer in shapes:
            for g, op in enumerate(linears[layer]):
                self.bind(layer, f"weight{g}", op, "weight")
            for g, op in enumerate(biases[layer]):
                self.bind(layer, f"bias{g}", op, "bias")
        self._te = tuple(experts)  # a tuple: out of the module tree and the state dict

    def forward(
        self,
        x: torch.Tensor,
        split_sizes: Sequence[int] | torch.Tensor,
        probs: torch.Tensor | None = None,
    ) -> torch.Tensor:
        sizes = self.check_call(x, split_sizes, probs)
        outputs, start = [], 0
        for expert, size in zip(self._te, sizes):
            rows = slice(start, start + size)
            extra = (probs[rows],) if self._scaled else ()
            outputs.append(expert(x[rows], *extra))
            start += size
        return torch.cat(outputs, dim=0)

    def backward_dw(self) -> None:
        """BasicLinear computes every weight gradient in backward: nothing is deferred."""


def make(**mlp_kwargs) -> TESequentialMLP:
    """``module:factory`` entry point: one TE op-fuser MLP per expert."""
    return TESequentialMLP(MLPConfig(**mlp_kwargs))
