"""Fix a mutant, run the original and the instrumented fix on the same stub inputs, and
say what happened."""

from __future__ import annotations

from gmlp_check.lint import engine
from gmlp_check.lint.registry import CODES

from .runtime import run_text
from .snippets import ALIASY

ALL = frozenset(CODES)


def fix(text):
    return engine.fix_source(text, "m.py", ALL, unsafe=True)


def evaluate(m, n_inputs=12):
    """Returns dict(result=..., details=...).  result in:
    'no-fix', 'fix-ok', 'defect:<class>', 'withheld-right', 'withheld-wrong',
    'unexpected-edit', 'skip'."""
    orig = m.render("orig")
    try:
        compile(orig, "m.py", "exec")
    except SyntaxError:
        return {"result": "skip", "why": "orig-syntax"}
    fixed, _applied, _remaining = fix(orig)
    manual = m.render("manual")
    instr = m.render("instr")
    res = {"orig": orig, "fixed": fixed, "manual": manual, "instr": instr}
    if fixed != orig:
        try:
            compile(fixed, "m.py", "exec")
        except SyntaxError as e:
            res.update(result="defect:fixed-does-not-compile", why=repr(e))
            return res
        again = fix(fixed)[0]
        if again != fixed:
            res.update(result="defect:second-pass-changes", again=again)
            return res
        if fixed != manual:
            res.update(result="unexpected-edit")
            if m.family == "007":
                # behaviour oracle: with every weight's zero_out_wgrad equal, reading
                # it from fc1_weight instead of weight must change nothing
                for k in range(n_inputs):
                    fz = bool(k % 2)
                    sig = []
                    for text in (orig, fixed):
                        out, st = run_text(m, text, m.seed * 1000 + k, force_zero=fz)
                        sig.append(
                            (
                                out,
                                repr(getattr(st, "ret", None)),
                                [
                                    (w.zero_out_wgrad, getattr(w, "grad_added_to_main_grad", None))
                                    for w in st.weights
                                ],
                            )
                        )
                    if sig[0] != sig[1]:
                        res.update(
                            result="defect:unexpected-edit-behaves-differently",
                            violations=[("behaviour", str(sig)[:300])],
                        )
                        break
            return res
    viol = []
    checks = 0
    for k in range(n_inputs):
        s = m.seed * 1000 + k
        _o_out, _ = run_text(m, orig, s)
        i_out, st = run_text(m, instr, s)
        checks += st.checks
        if st.violations:
            # origin twin: a binding above the edit that is not the template's own
            # (with-as, import, class...) is what "its bindings above give": info only
            viol.extend(
                v
                for v in st.violations
                if v[0] not in ("unrecorded-binding", "info-untagged-mismatch")
            )
        elif i_out[0] == "syntax":
            viol.append(("instr-syntax", i_out[1]))
    res["checks"] = checks
    res["violations"] = viol
    if fixed != orig:
        if viol:
            res["result"] = "defect:" + viol[0][0]
            if set(m.kinds) & ALIASY and viol[0][0] == "tagged-mismatch":
                res["result"] = "aliasy:" + viol[0][0]
        else:
            res["result"] = "fix-ok"
    else:
        if checks == 0:
            res["result"] = "no-fix-unexercised"
        elif viol:
            res["result"] = "withheld-wrong"
        else:
            res["result"] = "withheld-right"
    return res
