"""Write a failing case out as one standalone Python file, to attach to an upstream bug report.

The file needs torch and the backend under test only, no gmlp_check: it builds the module,
loads the case's weights, inputs and output gradients (embedded, exactly as gmlp-check drew
them), attaches main_grad the way Megatron's engines do and runs the case's microbatches,
asserting what CONTRACT.md asks of the fused side against the weight gradients the fp32 reference
computed from the same data (embedded too). It exits with an AssertionError listing the
violations, or prints that the contract holds.

How it gets the backend's factory depends on where that lives (``factory_source``):
- anyone's ``module:factory``: imported by name;
- gmlp-check's fused package (``triton``, ``torch-grouped-mm``): imported by name, since that
  package is the backend under test there;
- gmlp-check's Transformer Engine adapters: the adapter and the gmlp_check modules it imports
  are embedded verbatim (repro_embed.py), so the file needs only torch and TE; likewise the
  modules of any package named with ``embed`` (a user's own adapter around a library).

It reproduces the backend's own behaviour: a fault injected by gmlp-check lives in gmlp_check,
so a run with --inject cannot be written out.
"""

from __future__ import annotations

import base64
import io
import re
import textwrap
from pathlib import Path

import torch

from . import backends, repro_embed
from .inputs import Sizes, case_seed, make_arena, make_inputs, make_state
from .matrix import Case
from .refimpl import GroupedMLP
from .refimpl.megatron import is_weight
from .refimpl.sentinels import uninitialized_memory_as_nan
from .repro_template import BODY, EMBED_LOADER, IMPORTS
from .results import CaseResult
from .side_observations import observe
from .tolerance import Precision, tolerance_for


def _reference_data(case: Case, sizes: Sizes, device: torch.device) -> dict[str, object]:
    """The case's data as gmlp-check drew it, and the reference's weight gradient of every
    weight in every microbatch (from its main_grad snapshots)."""
    generator = torch.Generator(device="cpu").manual_seed(case_seed(sizes.seed, case))
    reference = GroupedMLP(case.mlp_config(sizes, device).replace(dtype=torch.float32))
    shapes = {n: p.shape for n, p in reference.named_parameters()}
    state = make_state(shapes, case, sizes, device, generator)
    inputs = make_inputs(case, sizes, state, device, generator)
    arena = make_arena(case, shapes, device, generator)
    # Each side holds the values of the fused side's dtype, as the checker's run does.
    rounded = {n: v.to(case.torch_dtype).float() for n, v in state.items()}
    with torch.no_grad():
        for name, p in reference.named_parameters():
            p.copy_(rounded[name])
    before = {n: arena.region(n).clone() for n in shapes if is_weight(n)}
    with uninitialized_memory_as_nan():
        obs = observe(reference, case, inputs.upcast(), arena.clone())
    wgrads = []
    for m in range(case.microbatches):
        start = obs.state_at_start(m)
        after = obs.after_backward_dw[m].main_grad
        wgrads.append(
            {n: after[n] if case.mode_spec.overwrite else after[n] - start[n] for n in before}
        )
    return {
        "params": {n: v.cpu() for n, v in state.items()},
        "xs": [x.cpu() for x in inputs.xs],
        "probs": [None if p is None else p.cpu() for p in inputs.probs],
        "dys": [d.cpu() for d in inputs.dys],
        "splits": [list(s) for s in inputs.splits],
        "before": {n: v.cpu() for n, v in before.items()},
        "wgrads": [{n: w.cpu() for n, w in step.items()} for step in wgrads],
    }


# gmlp-check's own fused kernels: the backend under test when they run, imported by name.
FUSED_PACKAGE = "gmlp_check.fused"


def embed_root(target: str, embed: str | None) -> str | None:
    """The package whose modules the reproduction of ``target`` embeds, or None (imported by
    name): ``embed`` when given, gmlp_check for a factory of gmlp_check outside its fused
    package."""
    if embed is not None:
        return embed
    module = target.split(":")[0]
    inside = module.startswith("gmlp_check.")
    return "gmlp_check" if inside and not module.startswith(FUSED_PACKAGE + ".") else None


def factory_source(target: str, embed: str | None) -> tuple[str, list[str], list[str]]:
    """How the reproduction gets ``target``'s factory: the target it imports, what its header
    says about that, and the code that makes the target importable (none when imported by
    name)."""
    root = embed_root(target, embed)
    module, factory = target.split(":")
    if root is None:
        if module.startswith(FUSED_PACKAGE + "."):
            return (
                target,
                [
                    f"The backend under test is gmlp-check's own fused package ({FUSED_PACKAGE}):",
                    "it is imported by name; nothing else of gmlp_check is used.",
                ],
                [],
            )
        return target, ["The backend's factory is imported by name."], []
    if not (module == root or module.startswith(root + ".")):
        raise repro_embed.EmbedError(f"the factory {target} is not in the package {root}")
    modules = repro_embed.closure(target, root)
    prose = (
        f"The factory, {target}, is {root}'s adapter around the library under test. So that "
        f"this file does not need {root}, that module and the modules of {root} it imports "
        "are embedded below verbatim (EMBEDDED, one string per source line) and installed at "
        f"run time under the private package name {repro_embed.PRIVATE!r}; they import each "
        "other relatively, so not a byte of them is changed. A traceback's "
        "'<embedded M>, line N' is line N of M:"
    )
    note = [
        *textwrap.wrap(prose, 96),
        *(f"  {m.original} -> {m.private}" for m in modules),
    ]
    private = f"{repro_embed.private_name(module, root)}:{factory}"
    return private, note, [*repro_embed.render(modules), EMBED_LOADER]


def render(
    result: CaseResult,
    spec: str,
    sizes: Sizes,
    device: torch.device,
    precision: Precision,
    embed: str | None = None,
) -> str:
    """The source of the reproduction of ``result``'s case; its values are judged by the bound
    gmlp-check used for the fused side's ``precision`` (TF32, FP8 included). ``embed`` names a
    package whose modules the factory imports are embedded (by default gmlp_check's, for its
    adapters)."""
    case = result.case
    target, note, embedded = factory_source(backends.resolve(spec), embed)
    mode = case.mode_spec
    buffer = io.BytesIO()
    torch.save(_reference_data(case, sizes, device), buffer)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    lines = [data[i : i + 100] for i in range(0, len(data), 100)]
    tol = tolerance_for(precision, sizes.tokens * case.microbatches)
    kwargs = {
        k: v
        for k, v in case.mlp_config(sizes, device).as_kwargs().items()
        if k not in ("dtype", "device")  # written out on their own below
    }
    seen = "\n".join(f"  {line}" for line in result.explanation())
    header = [
        f'"""Reproduction of {case.id}',
        f"on --fused {spec} ({device.type}), written by gmlp-check. Run: python this_file.py",
        "It needs torch and the backend only; an AssertionError lists what breaks CONTRACT.md.",
        *note,
        "gmlp-check saw:",
        seen.replace('"""', "'''"),
        '"""',
        "",
        IMPORTS,
        f"BACKEND = {target!r}  # module:factory",
        f"MODULE_KWARGS = {kwargs!r}",
        f"DTYPE = torch.{str(case.torch_dtype).removeprefix('torch.')}",
        f"DEVICE = {str(device)!r}",
        f"INTO_MAIN_GRAD = {mode.accumulate_into_main_grad}",
        f"FSDP = {mode.fsdp}",
        f"OVERWRITE = {mode.overwrite}",
        f"ZERO_OUT = {case.zero_out}",
        f"DELAY = {case.delay}",
        f"RTOL, ATOL_FLOOR, ATOL_SCALE = {tol.rtol!r}, {tol.atol_floor!r}, {tol.scale_factor!r}",
        "DATA = (",
        *(f'    "{line}"' for line in lines),
        ")",
        *embedded,
    ]
    return "\n".join(header) + "\n" + BODY


# A written file above this size gets a hint: its data is embedded at the run's sizes (at
# gmlp-check's CUDA defaults an fp32 case is about 36 MB), which makes it awkward to attach.
LARGE_BYTES = 8 * 2**20


def size_hint(path: Path) -> str | None:
    """How to get a smaller reproduction, when ``path`` is a large one."""
    size = path.stat().st_size
    if size <= LARGE_BYTES:
        return None
    return (
        f"{size / 2**20:.0f} MiB: the case's data is embedded at this run's sizes; rerun with "
        "smaller --experts/--hidden/--ffn/--tokens for a smaller file"
    )


def file_name(case_id: str) -> str:
    return "repro_" + re.sub(r"[^A-Za-z0-9]+", "_", case_id).strip("_") + ".py"


def write(
    directory: Path,
    result: CaseResult,
    spec: str,
    sizes: Sizes,
    device: torch.device,
    precision: Precision,
    embed: str | None = None,
) -> Path:
    """Write the reproduction of ``result`` into ``directory``; its path."""
    text = render(result, spec, sizes, device, precision, embed)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file_name(result.case.id)
    partial = path.with_suffix(".partial")
    try:
        partial.write_text(text)
        partial.replace(path)
    except BaseException:
        # A full disk or an interrupt mid-write leaves no half-written reproduction behind.
        partial.unlink(missing_ok=True)
        raise
    return path
