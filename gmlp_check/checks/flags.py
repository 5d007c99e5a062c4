"""Exact checks of the bookkeeping: grad_added_to_main_grad, whether main_grad was fetched, and
when and how often the post-backward hook ran."""

from __future__ import annotations

from collections import Counter

from . import Check, Context, flag_check


def _flags(ctx: Context, observable: str, attr: str, at_least: bool = False) -> Check:
    """Exact equality of a per-parameter flag with the reference's, at every hook call and
    snapshot; with ``at_least``, the fused side may be True where the reference is False."""

    def differs(f_value, r_value) -> bool:
        return not (f_value == r_value or (at_least and f_value is True))

    ref, fused = ctx.ref, ctx.fused
    problems, compared = [], 0
    for r, f in ctx.pairs:
        if f is None:
            continue
        compared += 1
        if differs(getattr(f, attr), getattr(r, attr)):
            problems.append(
                f"mb {r.microbatch + 1} {r.param} at the hook ({r.phase}): {attr} is "
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


def grad_added(ctx: Context) -> Check:
    return _flags(ctx, "grad_added_to_main_grad", "grad_added")


def fetched(ctx: Context) -> Check:
    # Fetching earlier than the reference (in a pre-forward hook, as Megatron's layer does) is
    # fine; not having fetched where the reference had is not.
    return _flags(ctx, "main_grad.fetched", "fetched", at_least=True)


def hook_calls(ctx: Context) -> Check:
    ref, fused = ctx.ref, ctx.fused
    r_count = Counter((h.microbatch, h.phase, h.param) for h in ref.hooks)
    f_count = Counter((h.microbatch, h.phase, h.param) for h in fused.hooks)
    problems = []
    for key in sorted(set(r_count) | set(f_count)):
        if r_count[key] != f_count[key]:
            mb, phase, name = key
            problems.append(
                f"{name}: the post-backward hook ran {f_count[key]} time(s) in {phase} of "
                f"mb {mb + 1}, reference {r_count[key]}"
            )
    for m, (rs, fs) in enumerate(zip(ref.after_backward_dw, fused.after_backward_dw)):
        for name, present in rs.grad_present.items():
            if fs.grad_present[name] != present:
                problems.append(
                    f"mb {m + 1} {name}: .grad {'left set' if fs.grad_present[name] else 'None'} "
                    f"after backward_dw, reference {'set' if present else 'None'}"
                )
    return flag_check("ddp_hook", problems, sum(r_count.values()), "hook calls")
