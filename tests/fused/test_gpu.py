"""The fused backends on a CUDA GPU at real sizes, against refimpl run in fp32.

Tolerances are relative to the largest reference magnitude of each tensor (atol = tol * max,
rtol = tol): fp32 1e-5 (IEEE dots; a K <= 1536 term fp32 sum is off by about sqrt(K) * 2^-24
of its scale); fp16 1e-2 and bf16 4e-2 (the fused path rounds h, act(h), dh and the outputs to
the 16-bit type, 2^-11 resp. 2^-8 each, against an fp32 reference that rounds nothing).
NaN sentinels and zero-token experts are checked exactly.
"""

import pytest
import torch

from gmlp_check import refimpl
from gmlp_check.fused.grouped_mm import TorchGroupedMMMLP
from gmlp_check.fused.tiles import wgrad_by_cublas, wgrad_tiles

from ..harness import MainGrads, attach, main_grad_buffers, nonempty
from .harness import (
    Case,
    Inputs,
    build_fused,
    make_inputs,
    run,
    run_pair,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

# 8 experts, two without tokens, sizes off every block multiple (1, 127, 513, 759).
SPLITS = (700, 0, 1, 513, 0, 900, 127, 759)
REAL = Case(splits=SPLITS, hidden=512, ffn=768, device="cuda")
TOL = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 4e-2}
# Accumulating over microbatches (DDP), overwriting with zero_out_wgrad (one grouped weight),
# Megatron-FSDP's sharded overwrite with the weight gradients delayed.
MAIN_GRAD_MODES = pytest.mark.parametrize(
    ("how", "delay", "single", "microbatches"),
    [
        (MainGrads(), False, False, 2),
        (MainGrads(overwrite=True, fill="nan", zero_out=True), False, True, 1),
        (MainGrads(fsdp=True, overwrite=True, fill="nan"), True, False, 2),
    ],
    ids=["accumulate-2mb", "overwrite-zero-out", "fsdp-delayed-2mb"],
)
DTYPES = pytest.mark.parametrize(
    "dtype", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "fp16", "fp32"]
)


def close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    expected = expected.float()
    scale = expected.abs().max().item() if expected.numel() else 1.0
    tol = TOL[dtype]
    atol = tol * max(scale, 1e-6)
    torch.testing.assert_close(
        actual.float(), expected, rtol=tol, atol=atol, msg=lambda m: f"{what}: {m}"
    )


def fp32_reference_of(fused, case: Case):
    ref = refimpl.GroupedMLP(**case.with_(dtype=torch.float32).kwargs())
    ref.load_state_dict({k: v.float() for k, v in fused.state_dict().items()})
    return ref


def upcast(batches: list[Inputs]) -> list[Inputs]:
    return [
        Inputs(b.x.float(), b.dy.float(), b.probs.float() if b.probs is not None else None)
        for b in batches
    ]


def run_against_fp32_reference(case: Case, how=None, *, backend="triton", fault=None, mb=1):
    torch.manual_seed(0)
    fused = build_fused(case, backend, fault)
    ref = fp32_reference_of(fused, case)
    batches = make_inputs(case)
    observations = []
    for mlp, inputs in ((ref, upcast(batches)), (fused, batches)):
        buffers = attach(mlp, how) if how is not None else None
        observations.append(
            run(mlp, inputs, list(case.splits), main_grads=buffers, microbatches=mb)
        )
    return observations[0], observations[1]


def check_outputs(ref, fused, dtype):
    for name in ("y", "dx", "dprobs"):
        for r, f in nonempty(zip(getattr(ref, name), getattr(fused, name)), name):
            if r is None:
                assert f is None
            else:
                assert f.dtype == dtype
                close(f, r, dtype, name)


@DTYPES
@pytest.mark.parametrize(
    ("activation", "bias", "single"),
    [("swiglu", True, False), ("scaled_swiglu", False, True), ("gelu", True, True)],
)
def test_plain_mode(dtype, activation, bias, single):
    case = REAL.with_(dtype=dtype, activation=activation, bias=bias, single=single)
    ref, fused = run_against_fp32_reference(case, MainGrads(fill="nan"))
    check_outputs(ref, fused, dtype)
    for name, r in nonempty(ref.grads.items(), "parameters"):
        assert fused.grads[name].dtype == dtype, name
        close(fused.grads[name], r, dtype, name)
    for name, buf in nonempty(fused.main_grads.items(), "main_grads"):
        assert buf.isnan().all(), f"{name}: plain mode wrote main_grad"


@DTYPES
@MAIN_GRAD_MODES
def test_accumulate_into_main_grad(dtype, how, delay, single, microbatches):
    case = REAL.with_(dtype=dtype, accumulate_into_main_grad=True, delay=delay, single=single)
    ref, fused = run_against_fp32_reference(case, how, mb=microbatches)
    check_outputs(ref, fused, dtype)
    assert fused.wgrad_hook_calls == ref.wgrad_hook_calls
    for name, r in nonempty(ref.main_grads.items(), "main_grads"):
        f = fused.main_grads[name]
        assert not f.isnan().any(), f"{name}: a NaN sentinel survived"
        if how.overwrite:
            close(f, r, dtype, name)
        else:  # compare the added gradient, not the random starting values
            start = main_grad_buffers(module_shaped_like(case), how)[name]
            close(f - start, r - start, dtype, name)
        assert fused.grad_added[name] is True
        grad = fused.grads[name]
        assert grad.dtype == dtype and grad.data_ptr() != fused.exposed_main_grads[name].data_ptr()
        if how.zero_out:
            assert torch.count_nonzero(grad) == 0
    if how.overwrite:
        empty = (
            fused.main_grads["fc2.weight"].view(len(SPLITS), -1)[1]
            if single
            else fused.main_grads["fc2.weight1"]
        )
        assert torch.count_nonzero(empty) == 0


# 32 short experts, the heaviest far above the mean, five without rows: accumulating, the
# weight gradients take heavy-light pairs (fused.tiles.wgrad_tiles, Tiles.paired).
PAIRED_SPLITS = (1500, 300, 77, 1, *[40] * 23, *[0] * 5)


@pytest.mark.parametrize("single", [False, True], ids=["discrete", "single"])
def test_accumulate_in_heavy_light_pairs(single):
    dtype = torch.bfloat16
    case = REAL.with_(
        dtype=dtype, splits=PAIRED_SPLITS, accumulate_into_main_grad=True, single=single
    )
    rows, experts = sum(PAIRED_SPLITS), len(PAIRED_SPLITS)
    tiles = wgrad_tiles(
        torch.device("cuda"),
        dtype,
        rows=rows,
        experts=experts,
        heaviest=max(PAIRED_SPLITS),
        accumulate=True,
    )
    assert tiles.paired
    how = MainGrads()
    ref, fused = run_against_fp32_reference(case, how, mb=2)
    check_outputs(ref, fused, dtype)
    for name, r in nonempty(ref.main_grads.items(), "main_grads"):
        start = main_grad_buffers(module_shaped_like(case), how)[name]
        close(fused.main_grads[name] - start, r - start, dtype, name)
        assert fused.grad_added[name] is True


# fc1's weight gradients (mean n * k * rows 3.8e10) go to cuBLAS one expert at a time, fc2's
# (1.9e10) to the grouped Triton kernel: fused.tiles.wgrad_by_cublas. Expert 1 has no rows.
LARGE = Case(splits=(4096, 0, 2049, 3000), hidden=4096, ffn=2048, device="cuda")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@MAIN_GRAD_MODES
def test_weight_gradients_by_cublas(dtype, how, delay, single, microbatches):
    case = LARGE.with_(dtype=dtype, accumulate_into_main_grad=True, delay=delay, single=single)
    cuda = torch.device("cuda")
    assert wgrad_by_cublas(case.splits, 2 * case.ffn, case.hidden, cuda, dtype)
    assert not wgrad_by_cublas(case.splits, case.hidden, case.ffn, cuda, dtype)
    torch.manual_seed(0)
    fused = build_fused(case)
    ref = fp32_reference_of(fused, case)
    batches = make_inputs(case)
    splits = list(case.splits)
    ref_run = run(
        ref, upcast(batches), splits, main_grads=attach(ref, how), microbatches=microbatches
    )
    profiler = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True
    )
    with profiler as prof:
        fused_run = run(
            fused, batches, splits, main_grads=attach(fused, how), microbatches=microbatches
        )
    gemms = [e for e in prof.events() if e.name in ("aten::addmm", "aten::mm")]
    # One cuBLAS GEMM per expert and microbatch (an accumulating expert without rows is
    # skipped), all of them fc1's: fc2's operands a_g and its gradient have ffn columns, and no
    # dimension of fc1's (hidden, 2 * ffn, the split sizes) equals ffn here.
    experts = sum(1 for rows in case.splits if rows or how.overwrite)
    assert case.ffn not in (case.hidden, 2 * case.ffn, *case.splits)
    assert len(gemms) == experts * microbatches
    for e in gemms:
        assert case.ffn not in {d for shape in e.input_shapes for d in shape}, e.input_shapes
    check_outputs(ref_run, fused_run, dtype)
    for name, r in nonempty(ref_run.main_grads.items(), "main_grads"):
        f = fused_run.main_grads[name]
        assert not f.isnan().any(), f"{name}: a NaN sentinel survived"
        start = 0 if how.overwrite else main_grad_buffers(module_shaped_like(case), how)[name]
        close(f - start, r - start, dtype, name)
        assert fused_run.grad_added[name] is True
    if how.overwrite:
        for layer in ("fc1", "fc2"):
            buf = fused_run.main_grads[f"{layer}.weight" if single else f"{layer}.weight1"]
            empty = buf.view(len(case.splits), -1)[1] if single else buf
            assert torch.count_nonzero(empty) == 0, layer


def module_shaped_like(case):
    """A module with the parameter names and shapes of ``case``: main_grad_buffers of it
    rebuilds the starting main_grad contents of a run (same seed, same order)."""
    return refimpl.GroupedMLP(**case.with_(dtype=torch.float32).kwargs())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_sizes_off_every_block_multiple(dtype):
    case = Case(
        splits=(1, 0, 37, 300),
        hidden=200,
        ffn=300,
        device="cuda",
        dtype=dtype,
        activation="clamped_qgeglu",
        accumulate_into_main_grad=True,
    )
    ref, fused = run_against_fp32_reference(case, MainGrads(overwrite=True, fill="nan"))
    check_outputs(ref, fused, dtype)
    for name, r in nonempty(ref.main_grads.items(), "main_grads"):
        assert not fused.main_grads[name].isnan().any()
        close(fused.main_grads[name], r, dtype, name)


def test_zero_tokens():
    case = REAL.with_(dtype=torch.bfloat16, splits=(0,) * 8, accumulate_into_main_grad=True)
    ref, fused = run_against_fp32_reference(case, MainGrads(overwrite=True, fill="nan"))
    assert fused.y[0].shape == (0, case.hidden)
    for name in nonempty(ref.main_grads, "main_grads"):
        assert torch.count_nonzero(fused.main_grads[name]) == 0


def test_deterministic():
    case = REAL.with_(dtype=torch.bfloat16, activation="scaled_swiglu", bias=True)
    first = run_against_fp32_reference(case)[1]
    second = run_against_fp32_reference(case)[1]
    for name in ("y", "dx", "dprobs"):
        assert torch.equal(getattr(first, name)[0], getattr(second, name)[0]), name
    for name, g in nonempty(first.grads.items(), "parameters"):
        assert torch.equal(g, second.grads[name]), name


def test_cpu_interpreter_and_cuda_in_one_process():
    """CPU tensors run interpreted, CUDA tensors compiled, in any order, in one process."""
    tiny = Case(activation="scaled_swiglu")
    for device in ("cpu", "cuda", "cpu", "cuda"):
        case = tiny.with_(device=device)
        ref, fused = run_pair(case)
        for r, f in nonempty(zip(ref.y + ref.dx, fused.y + fused.dx), "outputs"):
            torch.testing.assert_close(f, r)


# -- torch-grouped-mm (bf16, sm90+) -------------------------------------------------------------

needs_sm90 = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0),
    reason="torch-grouped-mm needs sm90+",
)


@needs_sm90
@pytest.mark.parametrize(
    ("how", "delay", "single"),
    [
        (None, False, False),
        (MainGrads(), False, True),
        (MainGrads(overwrite=True, fill="nan"), False, False),
        (MainGrads(fsdp=True, overwrite=True, fill="nan", zero_out=True), True, True),
    ],
    ids=["plain", "accumulate", "overwrite", "fsdp-delayed"],
)
def test_torch_grouped_mm(how, delay, single):
    dtype = torch.bfloat16
    case = REAL.with_(
        dtype=dtype,
        activation="scaled_swiglu",
        bias=True,
        single=single,
        accumulate_into_main_grad=how is not None,
        delay=delay,
    )
    ref, fused = run_against_fp32_reference(case, how, backend="torch-grouped-mm")
    check_outputs(ref, fused, dtype)
    for name, r in nonempty(ref.grads.items(), "parameters"):
        if how is None or "bias" in name:
            close(fused.grads[name], r, dtype, name)
    if how is None:
        return
    for name, r in nonempty(ref.main_grads.items(), "main_grads"):
        f = fused.main_grads[name]
        assert not f.isnan().any(), name
        start = 0 if how.overwrite else main_grad_buffers(module_shaped_like(case), how)[name]
        close(f - start, r - start, dtype, name)
        assert fused.grad_added[name] is True


@needs_sm90
def test_torch_grouped_mm_refuses_fp32():
    with pytest.raises(NotImplementedError, match=r"torch\.bfloat16"):
        TorchGroupedMMMLP(**REAL.with_(dtype=torch.float32).kwargs())
