"""The generator: a seeded choice of template, snippets and wrappers, rendered three
ways."""

from __future__ import annotations

import random

from .snippets import (
    BASES,
    FLAG_SNIPS,
    HARMFUL,
    HARMLESS,
    SELF_HARMFUL,
    SNIP_WRAPS,
    WRAPPERS,
)
from .templates import T001, T007, TOW


class Mutant:
    def __init__(self, family, tname, tmpl, params, plan, seed):
        self.family, self.tname, self.tmpl = family, tname, tmpl
        self.params, self.plan, self.seed = params, plan, seed
        self.kinds = [k for (_, k, _) in plan.get("snips", []) if k]

    def render(self, mode):
        """mode: orig | manual | instr"""
        p = self.params
        out = []
        extra = 0
        wstack = []
        hole_i = 0
        wrap_i = 0
        # position tracking (for origin_weight above/below)
        edit_seen = False
        lines = self.tmpl.splitlines()
        for line in lines:
            stripped = line.strip()
            ind = len(line) - len(line.lstrip())
            pad = " " * (ind + extra)
            if stripped == "{H}":
                snips = [
                    (self._marks(b, mode), k, w) for (b, k, w) in self.plan["holes"].get(hole_i, [])
                ]
                hole_i += 1
                for body, _kind, wrap in snips:
                    sl = body
                    if mode == "instr" and self.family == "ow":
                        sl = [self._instr_ow_line(s, edit_seen) for s in sl]
                    if wrap:
                        out.append(pad + wrap[0])
                        out.extend(pad + "    " + s for s in sl)
                        if wrap[1]:
                            out.extend(pad + s for s in wrap[1])
                    else:
                        out.extend(pad + s for s in sl)
                continue
            if stripped == "{W<}":
                w = self.plan["wraps"].get(wrap_i)
                wrap_i += 1
                wstack.append((w, ind + extra))
                if w is not None:
                    out.extend(pad + h for h in WRAPPERS[w][0])
                    extra += 4
                continue
            if stripped == "{W>}":
                w, wpad = wstack.pop()
                if w is not None:
                    extra -= 4
                    _hdr, ftr = WRAPPERS[w]
                    # footer lines: first-level lines are relative to wrapper
                    for f_ in ftr:
                        out.append(" " * wpad + f_)
                continue
            if stripped == "{PRE}":
                if p.get("pre"):
                    out.append(pad + p["pre"])
                continue
            text = line.lstrip()
            text = self._subst(text, mode)
            if "{OW}" in line:
                edit_seen = True
            if mode == "instr" and self.family == "ow":
                text = text.replace("{OWB}", f"_recow({1 if not edit_seen else 0}, ").replace(
                    "{OWE}", ")"
                )
            else:
                text = text.replace("{OWB}", "").replace("{OWE}", "")
            out.append(pad + text)
        return "\n".join(out) + "\n"

    def _marks(self, body, mode):
        import re

        outl = []
        for ln in body:
            if mode == "instr":
                ln = re.sub(r"@@R\(([^|]*)\|(\w+)\)", r'_rec(\1, "\2")', ln)
                ln = ln.replace("@@T(", "_tag(").replace(")@@", ")")
            else:
                ln = re.sub(r"@@R\(([^|]*)\|(\w+)\)", r"\1.\2", ln)
                ln = ln.replace("@@T(", "(").replace(")@@", ")")
            outl.append(ln)
        return outl

    def _instr_ow_line(self, s, edit_seen):
        # record assignments to origin_weight made by snippets
        head = "origin_weight = "
        st = s.lstrip()
        if st.startswith(head):
            ind = s[: len(s) - len(st)]
            return f"{ind}{head}_recow({1 if not edit_seen else 0}, {st[len(head) :]})"
        return s

    def _subst(self, text, mode):
        p = self.params
        if self.family == "001":
            B, A, F = p["B"], p["A"], p["flag"]
            if mode == "instr":
                text = text.replace("{READ}", f'_rec({B}, "{A}")')
                text = text.replace("{TAG(}", "_tag(").replace("{)TAG}", ")")
                text = text.replace("{TEST}", f'_chk(lambda: {F}, lambda: {B}, "{A}")')
            else:
                text = text.replace("{READ}", f"{B}.{A}")
                text = text.replace("{TAG(}", "").replace("{)TAG}", "")
                text = text.replace("{TEST}", F if mode == "orig" else f"{B}.{A}")
            text = text.replace("{CV}", p.get("cv", "o")).replace("{LP}", p.get("lp", "_o"))
        elif self.family == "007":
            has = 'hasattr(fc1_weight, "grad_added_to_main_grad")'
            text = text.replace("{HAS}", "_rec7(fc1_weight)" if mode == "instr" else has)
            if mode == "instr":
                w7 = "_chk7(lambda: fc1_weight)"
            else:
                w7 = "weight" if mode == "orig" else "fc1_weight"
            if "{ZEXPR}" in text:
                z = p["zexpr"].replace("{W7}", w7)
                text = text.replace("{ZEXPR}", z)
            text = text.replace("{W7}", w7)
        else:
            ow = {
                "orig": "weight",
                "manual": "origin_weight",
                "instr": "_chkow(lambda: origin_weight)",
            }[mode]
            text = text.replace("{OW}", ow)
        return text


def _pick_snips(rng, N, A, extra_harmful=None, harmful_bias=0.6, flag_snips=False):
    k = rng.choice([1, 1, 1, 2])
    res = []
    for _ in range(k):
        if flag_snips and rng.random() < 0.08:
            pool = FLAG_SNIPS
        elif rng.random() < harmful_bias:
            pool = dict(HARMFUL)
            if extra_harmful:
                pool.update(extra_harmful)
        else:
            pool = HARMLESS
        kind = rng.choice(sorted(pool))
        body = pool[kind](N, A)
        w = rng.choice(SNIP_WRAPS)
        res.append((body, kind, w))
    return res


def make_mutant(seed):
    rng = random.Random(seed)
    fam = rng.choices(["001", "007", "ow"], weights=[6, 3, 1.5])[0]
    tset = {"001": T001, "007": T007, "ow": TOW}[fam]
    tname = rng.choice(sorted(tset))
    tmpl = tset[tname]
    params = {}
    if fam == "001":
        root, B, A, pre = rng.choice(BASES)
        if tname == "method" and root == "op" and rng.random() < 0.5:
            root, B, A, pre = BASES[2]
        params.update(
            root=root, B=B, A=A, pre=pre, flag="acc" if tname == "copied" else "accumulate"
        )
        params["cv"] = rng.choice(["o", root, "o", "_x"])
        params["lp"] = rng.choice(["_o", root, "_o"])
        N = root
        extra = SELF_HARMFUL if root == "self" else None
    elif fam == "007":
        N, A, extra = "fc1_weight", "zero_out_wgrad", None
        params["zexpr"] = rng.choice(
            [
                'getattr({W7}, "zero_out_wgrad", False)',
                'bool(getattr({W7}, "zero_out_wgrad", False))',
                '[getattr({W7}, "zero_out_wgrad", False) for fc1_weight in ws][0]',
                '[getattr({W7}, "zero_out_wgrad", False) for _v in ws][0]',
                '(lambda fc1_weight: getattr({W7}, "zero_out_wgrad", False))(ws[0])',
            ]
        )
    else:
        N, A, extra = "origin_weight", "overwrite_main_grad", None
    nholes = tmpl.count("{H}")
    nwraps = tmpl.count("{W<}")
    holes = {}
    for i in range(nholes):
        if rng.random() < 0.35:
            holes[i] = _pick_snips(
                rng, N, A, extra, flag_snips=(fam == "001" and tname != "copied")
            )
    # cross-hole nonlocal closure: defined in one hole, called in a later one
    if nholes >= 2 and rng.random() < 0.12:
        i, j = sorted(rng.sample(range(nholes), 2))
        holes.setdefault(i, []).append(
            (["def _rb2():", f"    nonlocal {N}", f"    {N} = ops[2]"], "nonlocal_split_def", None)
        )
        holes.setdefault(j, []).append((["_rb2()"], "nonlocal_split_call", rng.choice(SNIP_WRAPS)))
    # occasionally also mutate an unrelated variable
    wraps = {
        i: (rng.randrange(len(WRAPPERS)) if rng.random() < 0.4 else None) for i in range(nwraps)
    }
    return Mutant(
        fam,
        tname,
        tmpl,
        params,
        {"holes": holes, "wraps": wraps, "snips": [s for v in holes.values() for s in v]},
        seed,
    )
