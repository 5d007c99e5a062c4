"""Everything the checker compares, declared once: each observable's name (a check in a case's
result and a column of the report), what must hold (the README's table is generated from it)
and the function that checks it.

Values are compared under ``tolerance.py``'s model; everything about where gradients went is
exact. ``reference``, ``construct`` and ``run`` are outcomes rather than comparisons: when one
of them fails nothing else of the case can be compared (``run`` still reports the guard bands).

Each observable says which engine produces it: the emulated one (``gmlp_check.refimpl.megatron``
around each side, every hook call observed) or the real ones (``--megatron real``: megatron-core
DDP and Megatron-FSDP, whose checks ``gmlp_check.engines.real_checks`` computes per engine
configuration and rank).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .checks import Check, Context, flags, grads, main_grad, values
from .pair import CaseRun

EMULATED, REAL = "emulated", "real"
BOTH = (EMULATED, REAL)


@dataclass(frozen=True)
class Observable:
    name: str
    doc: str
    # The emulated run's comparison; None: an outcome, or an observable only the real engines
    # produce (computed in gmlp_check.engines.real_checks).
    check: Callable[[Context], Check | None] | None = None
    engines: tuple[str, ...] = (EMULATED,)  # which engines produce it


OBSERVABLES: tuple[Observable, ...] = (
    Observable(
        "reference",
        "the reference itself failed: a bug in the checker, not the fused side",
        engines=BOTH,
    ),
    Observable(
        "construct",
        "the fused side could not be built or take the reference's parameters",
        engines=BOTH,
    ),
    Observable(
        "run",
        "the fused side raised while running (the detail names phase and exception); under the "
        "real engines also the engines' own assertions (DDP's `.grad` None under overlap, "
        "a bucket never reduced), and when it passes, which engine configurations ran",
        engines=BOTH,
    ),
    Observable(
        "output",
        "forward output of every microbatch, within tolerance",
        values.output,
        engines=BOTH,
    ),
    Observable("grad.input", "gradient of x, within tolerance", values.input_grad, engines=BOTH),
    Observable(
        "grad.probs",
        "gradient of probs (scaled_swiglu), within tolerance",
        values.probs_grad,
        engines=BOTH,
    ),
    Observable("grad.bias", "bias gradients as the hook found them in `.grad`", values.bias_grad),
    Observable(
        "param.grad",
        "`.grad` as the post-backward hook finds it: present, the weight's shape and dtype; "
        "`W` in plain mode (real engines: once per microbatch, at the engine's own hook)",
        grads.param_grad,
        engines=BOTH,
    ),
    Observable(
        "param.grad.alias",
        "`.grad` shares no memory with any main_grad buffer",
        grads.param_grad_alias,
    ),
    Observable(
        "param.grad.zero", "the dummy is all zeros under `zero_out_wgrad`", grads.param_grad_zero
    ),
    Observable(
        "grad_added_to_main_grad",
        "the reference's value at every hook call, after backward and after backward_dw (real "
        "engines: each weight's flag at the engine's hook)",
        flags.grad_added,
        engines=BOTH,
    ),
    Observable(
        "main_grad.fetched",
        "under FSDP, `param.main_grad` is the buffer `get_main_grad()` returned",
        flags.fetched,
    ),
    Observable(
        "ddp_hook",
        "the post-backward hook ran as often and in the same phase as for the reference, and "
        "DDP's never found `.grad` None",
        flags.hook_calls,
    ),
    Observable("main_grad.at_hook", "main_grad as the hook found it", main_grad.at_hook),
    Observable(
        "main_grad.after_backward", "main_grad when `backward()` returned", main_grad.after_backward
    ),
    Observable(
        "main_grad.after_backward_dw",
        "main_grad when `backward_dw()` returned",
        main_grad.after_backward_dw,
    ),
    Observable(
        "main_grad.own_run",
        "FP8 cases: main_grad when `backward_dw()` returned equals what the mode asks given the "
        "backend's own weight gradients from a twin run with the same recipe and inputs that "
        "does not write main_grad (previous contents + gradient, or the gradient alone when "
        "overwriting), within 2^-8 relative",
        main_grad.own_run,
    ),
    Observable(
        "guard_bands",
        "no write outside any main_grad region (canaries intact)",
        main_grad.guard_bands,
    ),
    Observable(
        "main_grad.synced",
        "after `finish_grad_sync`, each parameter's reduced gradient as the engine holds it "
        "(DDP's main_grad buffer, the distributed optimizer's or Megatron-FSDP's shard on each "
        "rank) equals the reference's data-parallel mean, K = ranks x microbatches x tokens; "
        "a value equal to the last microbatch's alone is diagnosed (Megatron-LM #6357 class)",
        engines=(REAL,),
    ),
)
NAMES: tuple[str, ...] = tuple(o.name for o in OBSERVABLES)


def compare(ctx: Context) -> list[Check]:
    """The checks of one case, in the order of OBSERVABLES."""
    run: CaseRun = ctx.run
    ref = run.reference
    if ref.error is not None or ref.guard_violations:
        what = ref.error.describe() if ref.error else "; ".join(ref.guard_violations)
        return [Check("reference", False, None, None, f"the reference failed: {what}")]
    if run.fused is None:
        assert run.construct_error is not None
        return [Check("construct", False, None, None, run.construct_error.describe())]
    if run.fused.error is not None:
        # The DDP hook's own assertion (TE #2097) is what ddp_hook watches for.
        name = "ddp_hook" if run.fused.error.missing_grad else "run"
        return [
            Check(name, False, None, None, run.fused.error.describe()),
            main_grad.guard_bands(ctx),
        ]
    checks = [o.check(ctx) for o in OBSERVABLES if o.check is not None and EMULATED in o.engines]
    return [c for c in checks if c is not None]


def markdown_table() -> str:
    """The README's table of observables, generated from the declaration."""
    lines = ["| observable | what must hold | engines |", "|---|---|---|"]
    lines += [f"| `{o.name}` | {o.doc} | {', '.join(o.engines)} |" for o in OBSERVABLES]
    return "\n".join(lines)
