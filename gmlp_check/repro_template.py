"""The body of a standalone reproduction (``repro.py`` fills the header and the data in).

It is Python source kept as a string: the written file must import nothing but torch and the
backend under test, so nothing here may import gmlp_check either. It checks what
CONTRACT.md asks of the fused side after every step, before any engine's hook would run:
main_grad (before + W, or W), grad_added_to_main_grad, the dummy .grad (present, the
weight's shape and dtype, no alias of main_grad, zero under zero_out_wgrad), main_grad
untouched without output into main_grad, and, with delayed weight gradients, main_grad
unchanged by backward and the reduce hooks fired once by backward_dw().
"""

IMPORTS = """import base64
import importlib
import io
import sys

import torch
"""

# Installed only when the file embeds modules (repro_embed.py): serves EMBEDDED's sources, and
# the packages in PACKAGES, under their private names, as if they were files on sys.path.
EMBED_LOADER = r'''

import importlib.abc
import importlib.machinery
import linecache


class _Embedded(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the modules embedded in this file (EMBEDDED, name -> source) and their packages
    (PACKAGES; one that is not in EMBEDDED is empty)."""

    def find_spec(self, name, path=None, target=None):
        if name not in EMBEDDED and name not in PACKAGES:
            return None
        spec = importlib.machinery.ModuleSpec(name, self, is_package=name in PACKAGES)
        spec.origin = ORIGINS.get(name)
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        source = EMBEDDED.get(module.__name__)
        if source is None:
            return
        filename = ORIGINS[module.__name__]
        # Tracebacks through embedded code show its lines.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), module.__dict__)


sys.meta_path.insert(0, _Embedded())
'''

BODY = r'''

def _load():
    data = torch.load(io.BytesIO(base64.b64decode(DATA)), weights_only=True)
    return data


def _close(actual, expected):
    """Within the tolerance gmlp-check used; a NaN anywhere fails."""
    actual, expected = actual.double(), expected.double()
    if bool(actual.isnan().any()) or bool(expected.isnan().any()):
        return False
    rms = float(expected.pow(2).mean().sqrt()) if expected.numel() else 0.0
    atol = max(ATOL_FLOOR, ATOL_SCALE * rms)
    return bool(((actual - expected).abs() <= atol + RTOL * expected.abs()).all())


def _overlaps(a, b):
    start_a, start_b = a.data_ptr(), b.data_ptr()
    end_a = start_a + a.numel() * a.element_size()
    end_b = start_b + b.numel() * b.element_size()
    return a.numel() > 0 and b.numel() > 0 and start_a < end_b and start_b < end_a


def _attach(weights, buffers):
    """main_grad as Megatron DDP or Megatron-FSDP attaches it."""
    for name, p in weights.items():
        region = buffers[name]
        if FSDP:
            p.get_main_grad = lambda region=region, p=p: region.view(p.shape)
            p.__fsdp_param__ = True
            if OVERWRITE:
                p.overwrite_main_grad = True
        else:
            p.main_grad = region.view(p.shape)
        p.grad_added_to_main_grad = False
        if ZERO_OUT:
            p.zero_out_wgrad = True


def main():
    data = _load()
    module_name, factory_name = BACKEND.split(":")
    factory = getattr(importlib.import_module(module_name), factory_name)
    module = factory(**MODULE_KWARGS, dtype=DTYPE, device=DEVICE)
    params = dict(module.named_parameters())
    with torch.no_grad():
        for name, value in data["params"].items():
            params[name].copy_(value.to(DEVICE))
    weights = {n: p for n, p in params.items() if n.rsplit(".", 1)[-1].startswith("weight")}
    buffers = {n: data["before"][n].clone().to(DEVICE) for n in weights}
    _attach(weights, buffers)
    fired = []
    module.register_wgrad_accumulation_and_reduce_hooks(lambda: fired.append(True))
    problems = []
    for mb in range(len(data["xs"])):
        start = {n: b.clone() for n, b in buffers.items()}
        for p in weights.values():
            p.grad = None
            p.grad_added_to_main_grad = False
            if FSDP and OVERWRITE and "main_grad" in vars(p):
                p.main_grad = None  # Megatron-FSDP frees the reduced bucket every microbatch
        x = data["xs"][mb].to(DEVICE, DTYPE).requires_grad_(True)
        probs = data["probs"][mb]
        if probs is not None:
            probs = probs.to(DEVICE, DTYPE).requires_grad_(True)
        y = module(x, data["splits"][mb], probs)
        y.backward(data["dys"][mb].to(DEVICE, DTYPE))
        if DELAY:
            for name in weights:
                if not torch.equal(buffers[name].nan_to_num(), start[name].nan_to_num()):
                    problems.append(f"mb {mb + 1} {name}: main_grad changed by backward()")
            count = len(fired)
            module.backward_dw()
            if len(fired) != count + 1:
                problems.append(
                    f"mb {mb + 1}: backward_dw() fired the reduce hooks "
                    f"{len(fired) - count} times, expected once"
                )
        else:
            module.backward_dw()
        for name, p in weights.items():
            wgrad = data["wgrads"][mb][name].to(DEVICE)
            where = f"mb {mb + 1} {name}"
            if not INTO_MAIN_GRAD:
                if not torch.equal(buffers[name].nan_to_num(), start[name].nan_to_num()):
                    problems.append(f"{where}: main_grad written without output into main_grad")
                if p.grad is None or not _close(p.grad.float(), wgrad.view(p.shape)):
                    problems.append(f"{where}: .grad is not the weight gradient")
                continue
            expected = wgrad if OVERWRITE else start[name] + wgrad
            if not _close(buffers[name], expected):
                problems.append(
                    f"{where}: main_grad is not "
                    f"{'W' if OVERWRITE else 'before + W'} (max |err| "
                    f"{float((buffers[name].double() - expected.double()).abs().max()):.3g})"
                )
            if getattr(p, "grad_added_to_main_grad", None) is not True:
                problems.append(f"{where}: grad_added_to_main_grad not set")
            grad = p.grad
            if grad is None:
                problems.append(f"{where}: no dummy .grad handed back")
            elif tuple(grad.shape) != tuple(p.shape) or grad.dtype != p.dtype:
                problems.append(f"{where}: .grad is {list(grad.shape)} {grad.dtype}")
            elif _overlaps(grad, buffers[name]):
                problems.append(f"{where}: .grad shares memory with main_grad")
            elif ZERO_OUT and bool((grad.float() != 0).any()):
                problems.append(f"{where}: the dummy .grad is not zero under zero_out_wgrad")
    for line in problems:
        print(line)
    assert not problems, f"{len(problems)} violation(s) of the main_grad contract"
    print("the main_grad contract holds for this case")


if __name__ == "__main__":
    sys.exit(main())
'''
