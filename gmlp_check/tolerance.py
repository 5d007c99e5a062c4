"""How close the fused side must be to the reference, per dtype and reduction length.

The reference runs in fp32 on exactly the values the fused side sees (its inputs, weights
and output gradients are the fused side's, upcast), so every difference comes from how the
fused side rounds and orders its arithmetic, never from different data:

* rounding to the working dtype. A fused kernel stores h = x @ W1, the activation a and the
  results (output, dgrad) in the module dtype; each store is off by up to eps/2 relative and
  is carried on by derivatives of order one. An implementation that differentiates the
  activation op by op in the working dtype (plain torch between grouped GEMMs, as the
  torch-grouped-mm backend does) rounds about eight times between the GEMMs, and the worst of
  the ~10^5 elements of a gradient at real sizes lies four to five standard deviations out.
  Measured: refimpl itself run in bf16 and fp16 against the fp32 reference at the CUDA sizes
  (8 experts, hidden 256, ffn 320, 1000 tokens) peaks at 6.3 eps x RMS (a SwiGLU weight
  gradient); the triton backend on CPU in fp16 at 3.2 eps x RMS. ``ROUNDINGS = 16`` leaves a
  margin of 2.5 over the worst of these.
* the order of fp32 accumulation. Two fp32 sums of the same K terms in different orders differ
  by a random walk of K rounding errors of the partial sums, about sqrt(K) * eps_fp32 times the
  magnitude of the result.

* TF32. A backend that computes fp32 GEMMs in TF32 (Transformer Engine does; it says so with
  ``fp32_matmul = "tf32"``) rounds both operands of every product to 10 explicit mantissa
  bits, fp16's, so its fp32 results carry fp16-sized rounding: ``Precision.eps`` is then
  2^-10 in place of fp32's epsilon, in the rounding term and in the kink windows (kinks.py),
  while the accumulation term keeps fp32's (the sums are still fp32). That is a bound
  derived from the arithmetic the backend declares, not a loosening of fp32 as a whole: a
  backend that does not declare TF32 keeps fp32's bound.

* FP8 (Transformer Engine's recipes, gmlp_check.fp8). The GEMMs read operands rounded to
  E4M3 (unit roundoff u = 2^-4) or E5M2 (2^-3), scaled per tensor or per block, and accumulate
  in fp32. No per-element bound of rounding to the dtype applies: a quantized operand is off by
  up to u relative, and the error reaches the result through every GEMM on its way. With
  independent uniform roundings (variance u^2/3 each) the relative error of a value has the
  standard deviation ``Recipe.rounding_sigma()`` in units of the RMS of that value: 0.125 for
  the HYBRID recipes (four E4M3 and two E5M2 roundings on the way to fc1's weight gradient),
  0.088 for blockwise E4M3. Measured on an H200 (TE 2.20.2, bf16): the weight gradients'
  relative norm error against the same module run without FP8 is 0.092-0.10 (delayed,
  current) and 0.067-0.069 (block), under the model's sigma. The tails are heavier than
  Gaussian (per-tensor scales put small values near E4M3's subnormals; delayed scaling starts
  from scale 1): the worst of ~10^5 elements reached 11 sigma at the checker's CUDA sizes. So
  an FP8 value is judged two ways, each from sigma:

      per element: atol = max(atol_default, (FP8_SIGMAS * sigma + sqrt(K) * eps_fp32) * rms)
      per block:   ||fused - ref|| <= FP8_NORM_SIGMAS * sigma * ||ref - base||

  with bf16's rtol. The norm bound (0.25 of the gradient's norm for HYBRID, 0.18 for block)
  is what sees a lost, doubled or misplaced gradient (relative norm 1 or more) under FP8 noise;
  the elementwise one (16 sigma) only refuses gross local errors. Smaller shifts cannot be
  seen against the fp32 reference under FP8, which is why FP8 cases are also judged against
  the same backend's own weight gradients from a twin run with the same recipe and inputs that
  does not write main_grad (``OWN_RUN_RTOL``): the numerics are the same, and what is left is
  the rounding of that gradient to the weight's dtype, at most half a bf16 ulp (2^-9 to 2^-8
  relative across a binade), which 2^-7 holds with a margin of two.

Elements near zero after cancellation carry the absolute error of the whole dot product, so
the absolute part of the tolerance scales with the RMS of the reference values (per expert,
so a small expert is not judged against a large one's scale):

    |fused - ref| <= atol + rtol * |ref - base|
    atol = max(atol_default, (ROUNDINGS * eps_dtype + sqrt(K) * eps_fp32) * rms(ref - base))

with ``rtol``/``atol_default`` the ``torch.testing.assert_close`` defaults for the dtype (the
floor the contract asks for) and ``base`` the main_grad contents before the step for
main_grad (so a large "before" value does not loosen the check on the gradient added to it).
For bf16 that admits errors of about 12% of the RMS (fp16 1.6%, fp32 a few 1e-6); the faults
this tool must catch move main_grad by 100% of a gradient (dropped, doubled, stale, shifted,
a random 'before' value kept or lost) or leave a NaN, so there is nearly an order of magnitude
between the two even in bf16. NaN and infinities are never within tolerance: a
non-finite value where the reference is finite fails whatever the numbers say.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .fp8 import NONE, RECIPES

# torch.testing.assert_close defaults (rtol, atol), the floor of every tolerance.
ASSERT_CLOSE_DEFAULTS: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1.3e-6, 1e-5),
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
}
ROUNDINGS = 16
EPS_FP32 = torch.finfo(torch.float32).eps
# TF32 keeps 10 explicit mantissa bits, as fp16 does: an fp32 GEMM run in TF32 rounds each
# operand to relative 2^-11, so its products carry fp16's epsilon, not fp32's.
EPS_TF32 = 2.0**-10
MATMUL_PRECISIONS = ("ieee", "tf32")
# FP8: the worst element's distance from the reference in standard deviations of the recipe's
# rounding (module docstring), and the tight bound of main_grad against the own run.
FP8_SIGMAS = 16
FP8_NORM_SIGMAS = 2
OWN_RUN_RTOL = 2.0**-7


@dataclass(frozen=True)
class Precision:
    """How the fused side computes: its dtype, and for fp32 whether its GEMMs round operands
    to TF32 (the backend says so: fp32_matmul below)."""

    dtype: torch.dtype
    matmul: str = "ieee"
    fp8: str = NONE  # the FP8 recipe the side runs under (gmlp_check.fp8.RECIPES)

    @property
    def eps(self) -> float:
        """The relative rounding of the working precision: the dtype's epsilon, TF32's for an
        fp32 side whose GEMMs run in TF32 (each product carries it), or the FP8 recipe's
        rounding sigma."""
        if self.fp8 != NONE:
            return max(torch.finfo(self.dtype).eps, RECIPES[self.fp8].rounding_sigma())
        eps = torch.finfo(self.dtype).eps
        if self.dtype == torch.float32 and self.matmul == "tf32":
            return max(eps, EPS_TF32)
        return eps


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol_floor: float
    scale_factor: float  # atol = max(atol_floor, scale_factor * rms(reference))
    # FP8: each block's error norm must also stay under this fraction of its reference norm.
    norm_rtol: float | None = None

    def atol(self, scale: torch.Tensor) -> torch.Tensor:
        return torch.clamp(self.scale_factor * scale, min=self.atol_floor)


def tolerance_for(precision: Precision | torch.dtype, reduction_length: int) -> Tolerance:
    """The tolerance for a value the fused side produced at ``precision`` (a dtype means IEEE
    GEMMs) from K-term sums. TF32 replaces the dtype's epsilon in the rounding term (each
    product is rounded like an fp16 one); the accumulation term stays fp32's."""
    if isinstance(precision, torch.dtype):
        precision = Precision(precision)
    if precision.dtype not in ASSERT_CLOSE_DEFAULTS:
        raise ValueError(
            f"dtype: expected one of {', '.join(map(str, ASSERT_CLOSE_DEFAULTS))}, "
            f"got {precision.dtype}"
        )
    rtol, atol = ASSERT_CLOSE_DEFAULTS[precision.dtype]
    k = max(int(reduction_length), 1)
    if precision.fp8 != NONE:
        factor = FP8_SIGMAS * precision.eps + math.sqrt(k) * EPS_FP32
        return Tolerance(rtol, atol, factor, norm_rtol=FP8_NORM_SIGMAS * precision.eps)
    factor = ROUNDINGS * precision.eps + math.sqrt(k) * EPS_FP32
    return Tolerance(rtol=rtol, atol_floor=atol, scale_factor=factor)


@dataclass(frozen=True)
class Comparison:
    passed: bool
    max_abs_err: float | None  # at the worst element (largest error / tolerance); None if NaN
    tolerance: float | None  # the tolerance of that element
    detail: str


def _fmt_index(flat: int, shape: torch.Size) -> str:
    if not shape:
        return "[]"
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"


def compare_close(
    actual: torch.Tensor,
    expected: torch.Tensor,
    tol: Tolerance,
    *,
    groups: int = 1,
    base: torch.Tensor | None = None,
    extra: torch.Tensor | None = None,
) -> Comparison:
    """Compare elementwise under ``tol``. ``groups`` splits the leading dimension into that
    many blocks with their own RMS scale (experts of a single grouped weight); ``base`` is the
    main_grad contents before the step (NaN sentinels count as 0); ``extra`` is added to each
    element's bound (kinks.py: an activation kink within rounding distance)."""
    if actual.shape != expected.shape:
        return Comparison(
            False,
            None,
            None,
            f"shape {list(actual.shape)}, expected {list(expected.shape)}",
        )
    if expected.numel() == 0:
        return Comparison(True, 0.0, 0.0, "empty")
    a = actual.detach().to(torch.float32)
    e = expected.detach().to(torch.float32)
    bad_a, bad_e = ~torch.isfinite(a), ~torch.isfinite(e)
    if bool((bad_a | bad_e).any()):
        both_nan = a.isnan() & e.isnan()
        same_inf = torch.isinf(a) & (a == e)
        mismatch = (bad_a | bad_e) & ~(both_nan | same_inf)
        if bool(mismatch.any()):
            first = int(mismatch.flatten().nonzero()[0])
            n_nan = int((a.isnan() & ~e.isnan()).sum())
            what = f"{n_nan} NaN where the reference is finite" if n_nan else "non-finite mismatch"
            return Comparison(
                False,
                None,
                None,
                f"{what} ({int(mismatch.sum())} of {a.numel()} elements; first at "
                f"{_fmt_index(first, a.shape)}: {a.flatten()[first].item()!r} vs "
                f"{e.flatten()[first].item()!r})",
            )
    # Non-finite values that matched above count as exact; only finite ones are measured.
    finite_e = torch.nan_to_num(e, nan=0.0, posinf=0.0, neginf=0.0)
    b = torch.zeros_like(e) if base is None else torch.nan_to_num(base.to(torch.float32), nan=0.0)
    increment = finite_e - b
    blocks = increment.reshape(groups, -1)
    rms = blocks.pow(2).mean(dim=1, keepdim=True).sqrt()
    atol = tol.atol(rms).expand_as(blocks).reshape(e.shape)
    bound = atol + tol.rtol * increment.abs()
    if base is not None:
        bound = bound + 2 * EPS_FP32 * finite_e.abs()  # the fp32 rounding of before + gradient
    if extra is not None:
        bound = bound + extra.reshape(e.shape).to(bound.device, torch.float32)
    err = (a - e).abs()
    err = torch.where(torch.isfinite(err), err, torch.zeros_like(err))
    ratio = (err / bound).flatten()
    worst = int(torch.argmax(ratio))
    passed = bool((err <= bound).all())
    worst_err, worst_tol = float(err.flatten()[worst]), float(bound.flatten()[worst])
    if passed and tol.norm_rtol is not None:
        norm_failure = _block_norm_failure(a - e, blocks, tol.norm_rtol)
        if norm_failure is not None:
            return Comparison(False, worst_err, worst_tol, norm_failure)
    if passed:
        detail = f"worst {worst_err:.3g} <= {worst_tol:.3g} at {_fmt_index(worst, e.shape)}"
    else:
        n_bad = int((err > bound).sum())
        detail = (
            f"{n_bad} of {e.numel()} elements out of tolerance; worst at "
            f"{_fmt_index(worst, e.shape)}: {a.flatten()[worst].item():.6g} vs "
            f"{e.flatten()[worst].item():.6g} (|err| {worst_err:.3g} > {worst_tol:.3g})"
        )
    return Comparison(passed, worst_err, worst_tol, detail)


def _block_norm_failure(
    diff: torch.Tensor, increments: torch.Tensor, norm_rtol: float
) -> str | None:
    """The first block whose error norm exceeds ``norm_rtol`` of its increment's norm."""
    errors = torch.nan_to_num(diff, nan=0.0).reshape(increments.shape[0], -1).norm(dim=1)
    scales = increments.norm(dim=1)
    for g, (e_norm, r_norm) in enumerate(zip(errors.tolist(), scales.tolist())):
        if e_norm > norm_rtol * r_norm:
            rel = e_norm / r_norm if r_norm else float("inf")
            block = f" (block {g})" if increments.shape[0] > 1 else ""
            return f"relative error norm {rel:.3g} > {norm_rtol:.3g}{block}"
    return None


def same_values(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise exact equality where NaN equals NaN (sentinels) and -0 equals +0."""
    return (a == b) | (a.isnan() & b.isnan())


def compare_exact(actual: torch.Tensor, expected: torch.Tensor, what: str) -> Comparison:
    """Exact comparison (tolerance 0): every element must hold the expected value. ``what``
    says what was expected ("unchanged ..."), for the detail."""
    if actual.shape != expected.shape:
        return Comparison(
            False, None, 0.0, f"shape {list(actual.shape)}, expected {list(expected.shape)}"
        )
    if actual.numel() == 0:
        return Comparison(True, 0.0, 0.0, what)
    a = actual.detach().to(torch.float32)
    e = expected.detach().to(torch.float32)
    differs = ~same_values(a, e)
    if not bool(differs.any()):
        return Comparison(True, 0.0, 0.0, what)
    err = torch.nan_to_num((a - e).abs()[differs], nan=float("inf"))
    max_err = float(err.max())
    first = int(differs.flatten().nonzero()[0])
    return Comparison(
        False,
        max_err if math.isfinite(max_err) else None,
        0.0,
        f"expected {what}, but {int(differs.sum())} of {a.numel()} elements differ; first at "
        f"{_fmt_index(first, a.shape)}: {a.flatten()[first].item()!r}, expected "
        f"{e.flatten()[first].item()!r}",
    )


def fp32_matmul(module: torch.nn.Module) -> str:
    """How a module under test computes fp32 GEMMs: "ieee" unless it says "tf32"."""
    value = getattr(module, "fp32_matmul", "ieee")
    return value if value in MATMUL_PRECISIONS else "ieee"
