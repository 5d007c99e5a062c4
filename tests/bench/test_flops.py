"""flops.py against counts taken from the matmuls refimpl actually runs.

torch's FlopCounterMode counts every matmul the reference dispatches (2*M*N*K, from the real
operand shapes), so each phase's model FLOPs are checked against an independent count, on a
shape where hidden, ffn and fc1_out all differ and with empty experts in the split.
"""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from gmlp_check.bench import flops
from gmlp_check.bench.phases import baseline_wgrads, group_ends
from gmlp_check.bench.shapes import Shape, split_sizes
from gmlp_check.refimpl import GroupedMLP
from gmlp_check.refimpl.megatron import setup_ddp_param, weight_params

# hidden, ffn and fc1_out all differ; rows of 8 elements keep torch._grouped_mm's 16-byte strides
ODD = Shape("odd", experts=5, hidden=24, ffn=8, tokens=9, top_k=3, model="test")


def counted(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def delayed_module(shape: Shape) -> GroupedMLP:
    mlp = GroupedMLP(shape.experts, shape.hidden, shape.ffn, delay_wgrad_compute=True)
    return mlp


@pytest.mark.parametrize("load", ["uniform", "skewed"])
def test_phase_flops_match_the_matmuls_of_refimpl(load):
    shape, splits = ODD, split_sizes(ODD, load)
    x = torch.randn(shape.rows, shape.hidden, requires_grad=True)
    dy = torch.randn(shape.rows, shape.hidden)

    mlp = delayed_module(shape)
    holder = {}
    forward = counted(lambda: holder.setdefault("y", mlp(x, splits)))
    dgrad = counted(lambda: holder["y"].backward(dy))
    wgrad = counted(mlp.backward_dw)

    step_mlp = GroupedMLP(shape.experts, shape.hidden, shape.ffn)
    step = counted(lambda: step_mlp(x, splits).backward(dy))

    assert flops.phase_flops(shape, "forward") == forward
    assert flops.phase_flops(shape, "dgrad") == dgrad
    for phase in ("wgrad-accumulate", "wgrad-overwrite", "wgrad-baseline"):
        assert flops.phase_flops(shape, phase) == wgrad
    assert flops.phase_flops(shape, "step") == step


def test_the_baseline_computes_the_weight_gradients_of_refimpl():
    """The wgrad-baseline GEMMs are the same products the wgrad phases count."""
    shape, splits = ODD, split_sizes(ODD, "skewed")
    mlp = GroupedMLP(shape.experts, shape.hidden, shape.ffn)
    x = torch.randn(shape.rows, shape.hidden)
    dh = torch.randn(shape.rows, shape.fc1_out)
    a = torch.randn(shape.rows, shape.ffn)
    dy = torch.randn(shape.rows, shape.hidden)
    dw1, dw2 = baseline_wgrads(x, dh, a, dy, group_ends(splits, x.device))
    for layer, got, left, right in ((mlp.fc1, dw1, x, dh), (mlp.fc2, dw2, a, dy)):
        for g, expected in layer.expert_wgrads(left, right, splits):
            torch.testing.assert_close(got[g], expected)


def test_wgrad_bytes_are_operands_plus_main_grad_traffic():
    """Derived from the tensors a refimpl wgrad phase really touches."""
    shape, splits = ODD, split_sizes(ODD, "uniform")
    mlp = delayed_module(shape)
    main_grads = []
    for p in weight_params(mlp):
        main_grads.append(torch.zeros(p.shape))
        setup_ddp_param(p, main_grads[-1])
    dtype_bytes = 2  # bf16 operands, as on the GPU
    x = torch.randn(shape.rows, shape.hidden)
    h = mlp.fc1(x, splits)
    a = mlp.activation(h, None)
    y = mlp.fc2(a, splits)
    operands = sum(t.numel() for t in (x, h, a, y)) * dtype_bytes  # x, dh ~ h, a, dy ~ y
    main_grad_elements = sum(m.numel() for m in main_grads)

    assert flops.phase_bytes(shape, "wgrad-accumulate", dtype_bytes) == (
        operands + main_grad_elements * 8
    )
    assert flops.phase_bytes(shape, "wgrad-overwrite", dtype_bytes) == (
        operands + main_grad_elements * 4
    )
    assert flops.phase_bytes(shape, "wgrad-baseline", dtype_bytes) == (
        operands + main_grad_elements * dtype_bytes
    )
    for phase in ("forward", "dgrad", "step"):
        assert flops.phase_bytes(shape, phase, dtype_bytes) is None


def test_unknown_phase_is_rejected():
    with pytest.raises(ValueError, match="phase: unknown phase 'backward'"):
        flops.phase_flops(ODD, "backward")
