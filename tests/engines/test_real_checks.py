"""The real engines' checks on one rank, fed with readings built from the reference itself (no
megatron needed): the promise, the last-microbatch diagnosis, shards, the hook's .grad."""

import torch

from gmlp_check.engines.configs import LAST_MICROBATCH_ONLY
from gmlp_check.engines.real_checks import ConfigRun, Judge
from gmlp_check.engines.reference import promised, rank_data, run_reference
from gmlp_check.engines.step import GradAtHook, StepRecord
from gmlp_check.engines.wrapped import Reading
from gmlp_check.inputs import DEVICE_SIZES, is_weight
from gmlp_check.matrix import Case
from gmlp_check.refimpl import GroupedMLP
from gmlp_check.tolerance import Precision

SIZES = DEVICE_SIZES["cpu"]
CPU = torch.device("cpu")
CASE = Case.from_id(
    "mode=accumulate-ddp,delay=0,zero=0,single=1,bias=1,act=swiglu,dtype=fp32,splits=ragged,mb=2"
)


def judge_and_promises(case=CASE):
    config = case.mlp_config(SIZES, CPU).replace(accumulate_into_main_grad=False)
    reference = GroupedMLP(config.replace(dtype=torch.float32))
    shapes = {n: p.shape for n, p in reference.named_parameters()}
    state, inputs = rank_data(case, SIZES, shapes, CPU, 0, 2)
    with torch.no_grad():
        for n, p in reference.named_parameters():
            p.copy_(state[n])
    precision = Precision(torch.float32)
    steps = [run_reference(reference, i, case.activation, precision) for i in inputs]
    promises = [promised(s) for s in steps]
    dtypes = {n: torch.float32 for n in shapes}
    return Judge(case, SIZES, precision, 1, shapes, dtypes, steps, promises), promises, shapes


def run_with(judge, readings, hooks=None):
    case = judge.case
    records = [StepRecord(s.outputs, s.input_grads, s.probs_grads) for s in judge.reference]
    if hooks is None:
        hooks = [
            GradAtHook(s, m, n, True, tuple(shape), torch.float32, None, True)
            for s in range(2)
            for m in range(case.microbatches)
            for n, shape in judge.shapes.items()
        ]
    return judge.checks(ConfigRun(records, readings, hooks))


def whole(values: dict[str, torch.Tensor]) -> dict[str, Reading]:
    return {n: Reading(v.reshape(-1).clone(), 0, v.numel(), v.numel()) for n, v in values.items()}


def by_name(checks):
    return {c.observable: c for c in checks}


def test_the_promised_reduction_passes_every_check():
    judge, promises, _ = judge_and_promises()
    checks, _ = run_with(judge, [whole(p.synced) for p in promises])
    assert [c.observable for c in checks if not c.passed] == []
    assert {"output", "grad.input", "param.grad", "main_grad.synced"} <= set(by_name(checks))


def test_the_last_microbatch_alone_is_diagnosed_as_the_6357_class():
    judge, promises, _ = judge_and_promises()
    # Weights hold the last microbatch only (a forced overwrite), biases the full sum.
    readings = [
        whole({n: (p.last_only[n] if is_weight(n) else p.synced[n]) for n in p.synced})
        for p in promises
    ]
    checks, last_only = run_with(judge, readings)
    synced = by_name(checks)["main_grad.synced"]
    assert not synced.passed and synced.detail.endswith(f"{LAST_MICROBATCH_ONLY} (+3 more)")
    assert "fc1.weight" in synced.detail and last_only


def test_a_wrong_value_that_is_not_the_last_microbatch_is_not_diagnosed():
    judge, promises, _ = judge_and_promises()
    readings = [whole({n: 2 * v for n, v in p.synced.items()}) for p in promises]
    checks, last_only = run_with(judge, readings)
    synced = by_name(checks)["main_grad.synced"]
    assert not synced.passed and LAST_MICROBATCH_ONLY not in synced.detail and not last_only


def test_nothing_written_is_not_diagnosed_where_the_last_microbatch_had_no_tokens():
    # ragged-empty: some experts get no tokens in the last microbatch, so their last-only
    # gradient is zero, and so is a buffer nobody wrote: consistent with the upstream
    # deviations' signature (the flag), but no evidence of it (the detail).
    case = Case.from_id(CASE.id.replace("single=1", "single=0").replace("ragged", "ragged-empty"))
    judge, promises, _ = judge_and_promises(case)
    zero_last = {
        n for n, v in promises[0].last_only.items() if not v.any() and promises[0].synced[n].any()
    }
    assert zero_last, "the case must have an expert with tokens in the first microbatch only"
    # Only those parameters are wrong: nothing was written into them.
    readings = [
        whole({n: 0 * v if n in zero_last else v for n, v in p.synced.items()}) for p in promises
    ]
    checks, last_only = run_with(judge, readings)
    synced = by_name(checks)["main_grad.synced"]
    assert not synced.passed and LAST_MICROBATCH_ONLY not in synced.detail and last_only


def test_diagnosed_parts_are_reported_first():
    judge, promises, _ = judge_and_promises()
    # fc1.weight (first in order) is plainly wrong, fc2.weight holds the last microbatch only.
    readings = [
        whole(
            {
                **p.synced,
                "fc1.weight": 2 * p.synced["fc1.weight"],
                "fc2.weight": p.last_only["fc2.weight"],
            }
        )
        for p in promises
    ]
    checks, last_only = run_with(judge, readings)
    synced = by_name(checks)["main_grad.synced"]
    assert synced.detail.startswith("step 1 fc2.weight:") and LAST_MICROBATCH_ONLY in synced.detail
    assert not last_only


def test_a_shard_is_judged_on_its_region_alone_and_named_with_it():
    judge, promises, _ = judge_and_promises()
    readings = []
    for p in promises:
        step = {}
        for n, v in p.synced.items():
            flat = v.reshape(-1)
            lo, hi = flat.numel() // 3, flat.numel() // 2
            step[n] = Reading(flat[lo:hi].clone(), lo, hi, flat.numel())
        readings.append(step)
    checks, _ = run_with(judge, readings)
    assert by_name(checks)["main_grad.synced"].passed
    flat = promises[0].synced["fc2.weight"].reshape(-1)
    lo, hi = flat.numel() // 3, flat.numel() // 2
    readings[0]["fc2.weight"].values[0] += 1.0
    checks, _ = run_with(judge, readings)
    synced = by_name(checks)["main_grad.synced"]
    assert not synced.passed
    assert synced.detail.startswith(f"step 1 fc2.weight [{lo}:{hi}] of {flat.numel()}: 1 of")


def test_the_hook_must_see_each_weights_grad_once_with_its_shape_and_dtype():
    judge, promises, shapes = judge_and_promises()
    readings = [whole(p.synced) for p in promises]
    hooks = [
        GradAtHook(s, m, n, True, tuple(shape), torch.float32, None, True)
        for s in range(2)
        for m in range(CASE.microbatches)
        for n, shape in shapes.items()
        if (s, m, n) != (1, 1, "fc1.weight")
    ]
    checks, _ = run_with(judge, readings, hooks)
    grad = by_name(checks)["param.grad"]
    assert (
        not grad.passed
        and "step 2 mb 2 fc1.weight: the engine's hook saw it 0 times" in grad.detail
    )
    hooks.append(GradAtHook(1, 1, "fc1.weight", True, (1,), torch.bfloat16, None, True))
    checks, _ = run_with(judge, readings, hooks)
    assert (
        ".grad is [1] torch.bfloat16, expected the weight's" in by_name(checks)["param.grad"].detail
    )


def test_the_flag_at_the_engines_hook_must_say_the_producer_wrote_main_grad():
    judge, promises, shapes = judge_and_promises()
    readings = [whole(p.synced) for p in promises]
    hooks = [
        GradAtHook(
            s, m, n, True, tuple(shape), torch.float32, None, (s, m, n) != (0, 1, "fc2.weight")
        )
        for s in range(2)
        for m in range(CASE.microbatches)
        for n, shape in shapes.items()
    ]
    checks, _ = run_with(judge, readings, hooks)
    flag = by_name(checks)["grad_added_to_main_grad"]
    assert not flag.passed
    assert flag.detail == (
        "step 1 mb 2 fc2.weight: grad_added_to_main_grad is False at the engine's hook, "
        "expected True"
    )
