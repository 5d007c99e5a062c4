"""GPU probe (development, kept for the record of docs/gpu-runs/h200-session-2026-12-01):
what TE 2.20.2's four backends do with main_grad under each FP8 recipe. Run with TE on a GPU:
python scripts/gpu/fp8_probe.py OUT.jsonl. One JSON line per (backend, recipe, FP8 weights,
overwrite): TE's error, or per weight the flag, the .grad handed on and main_grad's increment
against the same backend's plain .grad (inc_vs_own) and a run without FP8 (inc_vs_bf16)."""

import importlib
import json
import sys
import traceback

import torch
import transformer_engine.pytorch as te
from transformer_engine.common import recipe as R

from gmlp_check.backends import BUILTIN

RECIPES = {
    "delayed": lambda: R.DelayedScaling(),
    "current": lambda: R.Float8CurrentScaling(),
    "block": lambda: R.Float8BlockScaling(),
    "mxfp8": lambda: R.MXFP8BlockScaling(),
    "nvfp4": lambda: R.NVFP4BlockScaling(),
}
AVAIL = {
    "delayed": te.is_fp8_available,
    "current": te.is_fp8_available,
    "block": te.is_fp8_block_scaling_available,
    "mxfp8": te.is_mxfp8_available,
    "nvfp4": te.is_nvfp4_available,
}
SPLITS = [32, 0, 48, 16]
E, H, F = 4, 128, 256


def factory(name):
    mod, fn = BUILTIN[name][0].split(":")
    return getattr(importlib.import_module(mod), fn)


def build(name, recipe, primary, into):
    kw = dict(
        num_experts=E,
        hidden=H,
        ffn=F,
        activation="swiglu",
        bias=False,
        single_grouped_weight=False,
        accumulate_into_main_grad=into,
        delay_wgrad_compute=False,
        dtype=torch.bfloat16,
        device="cuda",
    )
    if primary:
        with te.quantized_model_init(enabled=True, recipe=recipe):
            return factory(name)(**kw)
    return factory(name)(**kw)


def run(m, recipe, x, dy, fp8=True):
    with te.autocast(enabled=fp8, recipe=recipe):
        y = m(x, SPLITS, None)
    y.backward(dy)


def main():
    out = open(sys.argv[1], "w")  # noqa: SIM115 (a probe: the file lives as long as the run)
    torch.manual_seed(0)
    x0 = torch.randn(sum(SPLITS), H, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(sum(SPLITS), H, device="cuda", dtype=torch.bfloat16)
    for rname, make_recipe in RECIPES.items():
        ok, why = AVAIL[rname](return_reason=True)
        if not ok:
            out.write(json.dumps(dict(recipe=rname, available=False, reason=why)) + "\n")
            continue
        for name in ("te-ops", "te-grouped-linear", "te-sequential", "megatron-te-grouped-mlp"):
            for primary in (False, True):
                for overwrite in (False, True):
                    rec = dict(backend=name, recipe=rname, primary=primary, overwrite=overwrite)
                    try:
                        recipe = make_recipe()
                        m = build(name, recipe, primary, True)
                        plain = build(name, make_recipe(), primary, False)
                        plain.load_state_dict(m.state_dict())
                        ws = {n: p for n, p in m.named_parameters() if "weight" in n}
                        rec["param_types"] = sorted({type(p).__name__ for p in ws.values()})
                        sentinel = 0.0 if overwrite else 1.0
                        for p in ws.values():
                            p.main_grad = torch.full(
                                p.shape,
                                5.0 if overwrite else sentinel,
                                dtype=torch.float32,
                                device="cuda",
                            )
                            p.grad_added_to_main_grad = False
                            p.overwrite_main_grad = overwrite
                        x = x0.clone().requires_grad_(True)
                        run(m, recipe, x, dy)
                        x2 = x0.clone().requires_grad_(True)
                        run(plain, make_recipe(), x2, dy)
                        hi = build(name, None, False, False) if not primary else None
                        if hi is not None:
                            hi.load_state_dict(m.state_dict())
                            x3 = x0.clone().requires_grad_(True)
                            run(hi, None, x3, dy, fp8=False)
                        pp = dict(plain.named_parameters())
                        hp = dict(hi.named_parameters()) if hi else {}
                        facts = {}
                        for n, p in ws.items():
                            inc = p.main_grad - (0.0 if overwrite else sentinel)
                            g = pp[n].grad
                            f = dict(
                                flag=getattr(p, "grad_added_to_main_grad", None),
                                grad=None
                                if p.grad is None
                                else [str(p.grad.dtype), float(p.grad.float().abs().max())],
                            )
                            if g is not None:
                                g = g.float()
                                f["inc_vs_own"] = float((inc - g).norm() / max(g.norm(), 1e-30))
                                f["own_norm"] = float(g.norm())
                            if n in hp and hp[n].grad is not None:
                                h = hp[n].grad.float()
                                f["inc_vs_bf16"] = float((inc - h).norm() / max(h.norm(), 1e-30))
                            facts[n] = f
                        rec["weights"] = facts
                        rec["dx_vs_plain"] = float(
                            (x.grad.float() - x2.grad.float()).norm() / x2.grad.float().norm()
                        )
                    except Exception as e:
                        rec["error"] = f"{type(e).__name__}: {str(e)[:600]}"
                        rec["tb"] = traceback.format_exc()[-1500:]
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
                    print(name, rname, primary, overwrite, rec.get("error", "ok")[:200], flush=True)


main()
