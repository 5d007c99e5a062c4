"""Where the emulated engine follows the real ones in detail: Megatron-FSDP's main_grad
attribute is absent until fetched and None again after each sharded reduction, and delayed
weights carry Transformer Engine's skip_backward_post_hook."""

import torch

from gmlp_check.backends import Backend
from gmlp_check.inputs import DEVICE_SIZES
from gmlp_check.matrix import Case
from gmlp_check.pair import run_pair
from gmlp_check.refimpl import GroupedMLP

CASE = "mode={mode},delay={delay},zero=0,single=0,bias=1,act=swiglu,dtype=fp32,splits=ragged,mb=2"


def seen_at_forward(mode: str, delay: int = 0):
    """Per microbatch, what the fused side's parameters carry when its forward starts."""
    seen: list[dict[str, tuple[bool, bool, bool]]] = []

    def recording(**kwargs):
        mlp = GroupedMLP(**kwargs)
        original = mlp.forward

        def forward(x, splits, probs=None):
            seen.append(
                {
                    name: (
                        hasattr(p, "main_grad"),
                        getattr(p, "main_grad", None) is None,
                        getattr(p, "skip_backward_post_hook", False),
                    )
                    for name, p in mlp.named_parameters()
                }
            )
            return original(x, splits, probs)

        mlp.forward = forward
        return mlp

    case = Case.from_id(CASE.format(mode=mode, delay=delay))
    run = run_pair(case, DEVICE_SIZES["cpu"], torch.device("cpu"), Backend("rec", recording))
    assert run.fused is not None and run.fused.error is None
    assert len(seen) == 2
    return seen


def test_fsdp_main_grad_is_absent_until_fetched_then_none_after_each_sharded_reduction():
    first, second = seen_at_forward("overwrite-fsdp")
    assert all(has is False for has, _, _ in first.values())
    assert all(has is True and is_none for has, is_none, _ in second.values())


def test_unsharded_fsdp_keeps_the_fetched_buffer_within_the_step():
    first, second = seen_at_forward("accumulate-fsdp")
    assert all(has is False for has, _, _ in first.values())
    weights = {n: v for n, v in second.items() if "weight" in n}
    assert weights and all(has and not is_none for has, is_none, _ in weights.values())


def test_ddp_main_grad_exists_from_the_start():
    first, _ = seen_at_forward("accumulate-ddp")
    assert all(has and not is_none for has, is_none, _ in first.values())


def test_delayed_weights_carry_skip_backward_post_hook_and_biases_do_not():
    first, _ = seen_at_forward("accumulate-ddp", delay=1)
    marks = {name: marked for name, (_, _, marked) in first.items()}
    assert {n for n, m in marks.items() if m} == {n for n in marks if "weight" in n}
    now, _ = seen_at_forward("accumulate-ddp", delay=0)
    assert not any(marked for _, _, marked in now.values())
