"""Quick bf16 sanity of both built-in backends on a GPU; prints one JSON object.

    PYTHONPATH=. python tests/fused/gpu_sanity.py [--out sanity.json]

For each backend: forward+backward of one realistic MoE step in output-into-main-grad
overwrite mode, the largest error of y, dx and main_grad relative to refimpl run in fp32
(each normalised by the reference's largest magnitude), and the median time of a step after
warm-up (CUDA events). A measurement to read, not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from gmlp_check import backends, refimpl

# The built-in backends of this repository (the others adapt third-party code).
OURS = [
    name for name, (target, _) in backends.BUILTIN.items() if target.startswith("gmlp_check.fused.")
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args()
    torch.manual_seed(0)
    splits = [1100, 0, 700, 1300, 3, 900, 1000, 1189]
    tokens, hidden, ffn = sum(splits), 2048, 1024
    kwargs = dict(
        num_experts=len(splits),
        hidden=hidden,
        ffn=ffn,
        activation="swiglu",
        accumulate_into_main_grad=True,
        dtype=torch.bfloat16,
        device="cuda",
    )
    x = torch.randn(tokens, hidden, device="cuda").bfloat16()
    dy = torch.randn(tokens, hidden, device="cuda").bfloat16()
    report = {
        "device": torch.cuda.get_device_name(),
        "tokens": tokens,
        "hidden": hidden,
        "ffn": ffn,
        "experts": len(splits),
        "backends": {},
    }
    for spec in OURS:
        torch.manual_seed(0)
        mlp = backends.load(spec).build(**kwargs)
        ref = refimpl.GroupedMLP(**{**kwargs, "dtype": torch.float32})
        ref.load_state_dict({k: v.float() for k, v in mlp.state_dict().items()})
        results = {}
        for name, module, inp, grad in (("ref", ref, x.float(), dy.float()), (spec, mlp, x, dy)):
            buffers = []
            for p in module.parameters():
                p.main_grad = torch.full((p.numel(),), float("nan"), device="cuda")
                p.overwrite_main_grad = True
                buffers.append(p.main_grad)
            xx = inp.clone().requires_grad_()
            y = module(xx, splits)
            y.backward(grad)
            results[name] = (y.float(), xx.grad.float(), torch.cat(buffers))
        errors = {}
        for i, what in enumerate(("y", "dx", "main_grad")):
            r, f = results["ref"][i], results[spec][i]
            errors[what] = ((f - r).abs().max() / r.abs().max()).item()
        errors["main_grad_nan"] = bool(results[spec][2].isnan().any())
        times = []
        for _ in range(12):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            xx = x.clone().requires_grad_()
            start.record()
            mlp(xx, splits).backward(dy)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        flops = 3 * 2 * tokens * hidden * (2 * ffn + ffn)  # fwd + dgrad + wgrad of fc1 and fc2
        median = statistics.median(times[2:])
        report["backends"][spec] = {**errors, "step_ms": median, "tflops": flops / median / 1e9}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
