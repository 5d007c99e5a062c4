"""Turn the observations of both sides into named checks.

Each observable below is one check in a case's result (and a column of the report). Values
are compared under ``tolerance.py``'s model; everything about where gradients went is exact:

output                    forward output of every microbatch
grad.input / grad.probs   gradient of x (and of probs for scaled_swiglu)
grad.bias                 bias gradients, as the DDP hook found them in ``.grad``
param.grad                the weight ``.grad`` the DDP hook found: present, weight's shape and
                          dtype, and equal to W in plain mode
param.grad.alias          ``.grad`` shares no memory with any main_grad buffer (exact)
param.grad.zero           under zero_out_wgrad the dummy is all zeros (exact)
grad_added_to_main_grad   the flag at every hook call and after backward / backward_dw (exact)
main_grad.fetched         ``param.main_grad`` is the buffer itself (FSDP: fetched) (exact)
ddp_hook                  the DDP hook ran as often, and in the same phase, as for the
                          reference, and never found ``.grad`` None
main_grad.at_hook         main_grad as the producer left it for the DDP hook
main_grad.after_backward  main_grad when ``backward()`` returns (non-delayed: after the hooks)
main_grad.after_backward_dw  main_grad when ``backward_dw()`` returns: the step's final state
guard_bands               no write outside any main_grad region (exact)
run / construct           the fused side raised while running / could not be built or load
                          the reference's state dict (the detail names phase and exception)
reference                 the reference itself failed: a bug in the checker, not the fused side

main_grad is compared expert block by expert block: where the reference left a block bit for
bit as it was, the fused side must leave it exactly as it was too (a NaN sentinel stays, a
random 'before' value stays); where the reference wrote, the values must match within
tolerance, and a NaN that survives fails whatever the tolerance.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import torch

from refimpl import ACTIVATIONS

from .harness import CaseRun, HookRecord, Observations
from .scenarios import Case, Sizes
from .tolerance import Comparison, compare_close, compare_exact, same_values, tolerance_for

OBSERVABLES = (
    "reference",
    "construct",
    "run",
    "output",
    "grad.input",
    "grad.probs",
    "grad.bias",
    "param.grad",
    "param.grad.alias",
    "param.grad.zero",
    "grad_added_to_main_grad",
    "main_grad.fetched",
    "ddp_hook",
    "main_grad.at_hook",
    "main_grad.after_backward",
    "main_grad.after_backward_dw",
    "guard_bands",
)


@dataclass(frozen=True)
class Check:
    observable: str
    passed: bool
    max_abs_err: float | None
    tolerance: float | None
    detail: str

    def to_json(self) -> dict[str, object]:
        return {
            "observable": self.observable,
            "passed": self.passed,
            "max_abs_err": self.max_abs_err,
            "tolerance": self.tolerance,
            "detail": self.detail,
        }


def _ratio(c: Comparison) -> float:
    if c.max_abs_err is None or c.tolerance is None:
        return float("inf")
    if c.tolerance == 0:
        return 0.0 if c.max_abs_err == 0 else float("inf")
    return c.max_abs_err / c.tolerance


def combine(observable: str, parts: list[tuple[str, Comparison]], empty: str = "") -> Check:
    """One check from many comparisons: fails at the first failing part, otherwise reports
    the part closest to its tolerance."""
    if not parts:
        return Check(observable, True, None, None, empty or "nothing to compare")
    failures = [(label, c) for label, c in parts if not c.passed]
    if failures:
        label, c = failures[0]
        more = f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""
        return Check(observable, False, c.max_abs_err, c.tolerance, f"{label}: {c.detail}{more}")
    label, c = max(parts, key=lambda lc: _ratio(lc[1]))
    return Check(observable, True, c.max_abs_err, c.tolerance, f"{label}: {c.detail}")


def flag_check(observable: str, mismatches: list[str], compared: int, what: str) -> Check:
    if mismatches:
        more = f" (+{len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
        return Check(observable, False, None, 0.0, mismatches[0] + more)
    return Check(observable, True, None, 0.0, f"{what}: {compared} observations agree")


def _is_weight(name: str) -> bool:
    return name.rsplit(".", 1)[-1].startswith("weight")


def _groups(case: Case, sizes: Sizes) -> int:
    """Expert blocks in a parameter: G for a single grouped weight or bias, else 1."""
    return sizes.experts if case.single else 1


def _match_hooks(
    ref: Observations, fused: Observations
) -> list[tuple[HookRecord, HookRecord | None]]:
    """Pair each reference hook call with the fused side's call of the same parameter,
    microbatch and phase (n-th with n-th)."""
    pending: dict[tuple[int, str, str], list[HookRecord]] = defaultdict(list)
    for rec in fused.hooks:
        pending[(rec.microbatch, rec.phase, rec.param)].append(rec)
    pairs = []
    for rec in ref.hooks:
        queue = pending[(rec.microbatch, rec.phase, rec.param)]
        pairs.append((rec, queue.pop(0) if queue else None))
    return pairs


def compare_region(
    label: str,
    f_now: torch.Tensor,
    f_prev: torch.Tensor,
    r_now: torch.Tensor,
    r_prev: torch.Tensor,
    before: torch.Tensor,
    case: Case,
    reduction_length: int,
    shape: torch.Size,
    suffix: str = "",
    extra: torch.Tensor | None = None,
) -> list[tuple[str, Comparison]]:
    """main_grad expert by expert (the blocks of a single grouped parameter, or the whole
    region of a discrete one): exact where the reference did not write, close where it did.
    Indices in details are in the parameter's (or the expert's) shape; ``extra`` is the
    kink slack of the region, if any."""
    if case.single:
        block_shape = shape[1:]
        labels = [f"{label} expert {g}{suffix}" for g in range(shape[0])]
    else:
        block_shape, labels = shape, [f"{label}{suffix}"]
    tensors = (f_now, f_prev, r_now, r_prev, before)
    views = [t.reshape(len(labels), *block_shape) for t in tensors]
    extras = None if extra is None else extra.reshape(len(labels), *block_shape)
    tol = tolerance_for(case.torch_dtype, reduction_length)
    parts = []
    for g, block_label in enumerate(labels):
        f1, f0, r1, r0, b = (v[g] for v in views)
        if bool(same_values(r1, r0).all()):
            what = "unchanged (the reference did not write it)"
            parts.append((block_label, compare_exact(f1, f0, what)))
        else:
            slack = None if extras is None else extras[g]
            parts.append((block_label, compare_close(f1, r1, tol, base=b, extra=slack)))
    return parts


def compare_case(case: Case, sizes: Sizes, run: CaseRun) -> list[Check]:
    ref, fused = run.reference, run.fused
    checks: list[Check] = []
    if ref.error is not None or ref.guard_violations:
        what = ref.error.describe() if ref.error else "; ".join(ref.guard_violations)
        checks.append(Check("reference", False, None, None, f"the reference failed: {what}"))
        return checks
    if fused is None:
        assert run.construct_error is not None
        return [Check("construct", False, None, None, run.construct_error.describe())]
    if fused.error is not None:
        observable = "ddp_hook" if fused.error.missing_grad else "run"
        checks.append(Check(observable, False, None, None, fused.error.describe()))
        checks.append(_guard_check(fused))
        return checks

    act = ACTIVATIONS[case.activation]
    fc1_out = act.fc1_out_features(sizes.ffn)
    dtype = case.torch_dtype
    tokens_k = max(sizes.tokens, 1)
    mbs = range(case.microbatches)

    # Forward output and data gradients.
    tol_fwd = tolerance_for(dtype, max(sizes.hidden, sizes.ffn))
    checks.append(
        combine(
            "output",
            [
                (f"mb {m + 1}", compare_close(fused.outputs[m], ref.outputs[m], tol_fwd))
                for m in mbs
            ],
        )
    )
    tol_dgrad = tolerance_for(dtype, max(sizes.hidden, fc1_out))
    checks.append(
        combine(
            "grad.input",
            [
                _grad_pair(m, fused.input_grads, ref.input_grads, tol_dgrad, _input_slack(run, m))
                for m in mbs
            ],
        )
    )
    if act.uses_probs:
        tol_probs = tolerance_for(dtype, max(sizes.hidden, fc1_out))
        checks.append(
            combine(
                "grad.probs",
                [_grad_pair(m, fused.probs_grads, ref.probs_grads, tol_probs) for m in mbs],
            )
        )

    pairs = _match_hooks(ref, fused)
    if case.bias:
        checks.append(_bias_check(case, sizes, run, pairs, tokens_k))
    checks.extend(_param_grad_checks(case, sizes, run, pairs, tokens_k))
    checks.append(_flags_check(ref, fused, pairs, "grad_added_to_main_grad", "grad_added"))
    # Fetching earlier than the reference (in a pre-forward hook, as Megatron's fix does) is
    # fine; not having fetched where the reference had is not.
    checks.append(_flags_check(ref, fused, pairs, "main_grad.fetched", "fetched", at_least=True))
    checks.append(_hook_count_check(ref, fused))
    checks.extend(_main_grad_checks(case, sizes, run, pairs))
    checks.append(_guard_check(fused))
    return checks


def _input_slack(run: CaseRun, m: int) -> torch.Tensor | None:
    return None if run.slack is None else run.slack.input_grads[m]


def _param_slack(run: CaseRun, name: str, m: int) -> torch.Tensor | None:
    """Kink slack of one microbatch's gradient of parameter ``name`` (None: none)."""
    return None if run.slack is None else run.slack.params[m].get(name)


def _cumulative_slack(run: CaseRun, name: str, m: int) -> torch.Tensor | None:
    return None if run.slack is None else run.slack.cumulative(name, m)


def _grad_pair(m, fused_list, ref_list, tol, extra=None) -> tuple[str, Comparison]:
    f, r = fused_list[m], ref_list[m]
    if r is None:
        return (f"mb {m + 1}", Comparison(f is None, None, None, "no gradient expected"))
    if f is None:
        return (f"mb {m + 1}", Comparison(False, None, None, "gradient is None"))
    return (f"mb {m + 1}", compare_close(f, r, tol, extra=extra))


def _bias_check(case, sizes, run, pairs, tokens_k) -> Check:
    tol = tolerance_for(case.torch_dtype, tokens_k)
    parts = []
    for r, f in pairs:
        if _is_weight(r.param):
            continue
        label = f"mb {r.microbatch + 1} {r.param}"
        if f is None or not f.grad.present:
            parts.append((label, Comparison(False, None, None, ".grad missing at the DDP hook")))
            continue
        groups = _groups(case, sizes)
        extra = _param_slack(run, r.param, r.microbatch)
        parts.append(
            (label, compare_close(f.grad.value, r.grad.value, tol, groups=groups, extra=extra))
        )
    return combine("grad.bias", parts)


def _param_grad_checks(case, sizes, run, pairs, tokens_k) -> list[Check]:
    fused = run.fused
    mode = case.mode_spec
    tol = tolerance_for(case.torch_dtype, tokens_k * case.microbatches)
    grad_parts, alias_problems, zero_problems = [], [], []
    seen = 0
    for r, f in pairs:
        label = f"mb {r.microbatch + 1} {r.param} ({r.phase})"
        if f is None:
            continue  # reported by ddp_hook
        if f.grad.present and f.grad.aliases_main_grad:
            alias_problems.append(f"{label}: .grad shares memory with a main_grad buffer")
        if not _is_weight(r.param):
            continue
        seen += 1
        if not f.grad.present:
            grad_parts.append(
                (label, Comparison(False, None, None, ".grad is None at the DDP hook"))
            )
            continue
        shape, dtype = fused.param_shapes[r.param], fused.param_dtypes[r.param]
        if f.grad.shape != tuple(shape) or f.grad.dtype != dtype:
            grad_parts.append(
                (
                    label,
                    Comparison(
                        False,
                        None,
                        None,
                        f".grad is {list(f.grad.shape)} {f.grad.dtype}, expected the "
                        f"weight's {list(shape)} {dtype}",
                    ),
                )
            )
            continue
        if not mode.output_into_main_grad:
            groups = _groups(case, sizes)
            extra = _param_slack(run, r.param, r.microbatch)
            compared = compare_close(f.grad.value, r.grad.value, tol, groups=groups, extra=extra)
            grad_parts.append((label, compared))
        else:
            grad_parts.append(
                (label, Comparison(True, None, None, "dummy of the right shape/dtype"))
            )
            if case.zero_out:
                value = f.grad.value.to(torch.float32)
                nonzero = int((value != 0).sum())  # NaN != 0 too
                if nonzero:
                    zero_problems.append(
                        f"{label}: zero_out_wgrad is set but the dummy .grad has {nonzero} of "
                        f"{value.numel()} non-zero elements"
                    )
    checks = [combine("param.grad", grad_parts)]
    checks.append(
        flag_check("param.grad.alias", alias_problems, len(pairs), "no .grad aliases main_grad")
    )
    if mode.output_into_main_grad and case.zero_out:
        checks.append(flag_check("param.grad.zero", zero_problems, seen, "dummies zero-filled"))
    return checks


def _flags_check(ref, fused, pairs, observable: str, attr: str, at_least: bool = False) -> Check:
    """Exact equality of a per-parameter flag with the reference's, at every hook call and
    snapshot; with ``at_least``, the fused side may be True where the reference is False."""

    def differs(f_value, r_value) -> bool:
        return not (f_value == r_value or (at_least and f_value is True))

    problems, compared = [], 0
    for r, f in pairs:
        if f is None:
            continue
        compared += 1
        if differs(getattr(f, attr), getattr(r, attr)):
            problems.append(
                f"mb {r.microbatch + 1} {r.param} at the DDP hook ({r.phase}): {attr} is "
                f"{getattr(f, attr)}, reference {getattr(r, attr)}"
            )
    for phase, r_snaps, f_snaps in (
        ("after backward", ref.after_backward, fused.after_backward),
        ("after backward_dw", ref.after_backward_dw, fused.after_backward_dw),
    ):
        for m, (rs, fs) in enumerate(zip(r_snaps, f_snaps)):
            r_values, f_values = getattr(rs, attr), getattr(fs, attr)
            for name, value in r_values.items():
                compared += 1
                if differs(f_values.get(name), value):
                    problems.append(
                        f"mb {m + 1} {name} {phase}: {attr} is {f_values.get(name)}, "
                        f"reference {value}"
                    )
    return flag_check(observable, problems, compared, attr)


def _hook_count_check(ref, fused) -> Check:
    r_count = Counter((h.microbatch, h.phase, h.param) for h in ref.hooks)
    f_count = Counter((h.microbatch, h.phase, h.param) for h in fused.hooks)
    problems = []
    for key in sorted(set(r_count) | set(f_count)):
        if r_count[key] != f_count[key]:
            mb, phase, name = key
            problems.append(
                f"{name}: DDP hook ran {f_count[key]} time(s) in {phase} of mb {mb + 1}, "
                f"reference {r_count[key]}"
            )
    for m, (rs, fs) in enumerate(zip(ref.after_backward_dw, fused.after_backward_dw)):
        for name, present in rs.grad_present.items():
            if fs.grad_present[name] != present:
                problems.append(
                    f"mb {m + 1} {name}: .grad {'left set' if fs.grad_present[name] else 'None'} "
                    f"after backward_dw, reference {'set' if present else 'None'}"
                )
    return flag_check("ddp_hook", problems, sum(r_count.values()), "hook calls")


def _main_grad_checks(case, sizes, run, pairs) -> list[Check]:
    ref, fused = run.reference, run.fused
    at_hook, after_bwd, after_dw = [], [], []
    for r, f in pairs:
        if f is None:
            continue
        m = r.microbatch
        after_bwd_k = sizes.tokens * (m + 1)
        at_hook.extend(
            compare_region(
                f"mb {m + 1} {r.param}",
                f.main_grad,
                fused.state_before(m, r.phase)[r.param],
                r.main_grad,
                ref.state_before(m, r.phase)[r.param],
                ref.before[r.param],
                case,
                after_bwd_k,
                ref.param_shapes[r.param],
                f" ({r.phase})",
                _cumulative_slack(run, r.param, m),
            )
        )
    for m in range(case.microbatches):
        k = sizes.tokens * (m + 1)
        for name in ref.before:
            shape = ref.param_shapes[name]
            after_bwd.extend(
                compare_region(
                    f"mb {m + 1} {name}",
                    fused.after_backward[m].main_grad[name],
                    fused.state_at_start(m)[name],
                    ref.after_backward[m].main_grad[name],
                    ref.state_at_start(m)[name],
                    ref.before[name],
                    case,
                    k,
                    shape,
                    extra=_cumulative_slack(run, name, m),
                )
            )
            after_dw.extend(
                compare_region(
                    f"mb {m + 1} {name}",
                    fused.after_backward_dw[m].main_grad[name],
                    fused.after_backward[m].main_grad[name],
                    ref.after_backward_dw[m].main_grad[name],
                    ref.after_backward[m].main_grad[name],
                    ref.before[name],
                    case,
                    k,
                    shape,
                    extra=_cumulative_slack(run, name, m),
                )
            )
    return [
        combine("main_grad.at_hook", at_hook),
        combine("main_grad.after_backward", after_bwd),
        combine("main_grad.after_backward_dw", after_dw),
    ]


def _guard_check(fused: Observations) -> Check:
    if fused.guard_violations:
        more = (
            f" (+{len(fused.guard_violations) - 1} more)" if len(fused.guard_violations) > 1 else ""
        )
        return Check("guard_bands", False, None, 0.0, fused.guard_violations[0] + more)
    return Check("guard_bands", True, None, 0.0, "every canary intact")
