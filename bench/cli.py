"""`gmlp-check bench`: the click command."""

from __future__ import annotations

import contextlib
import shlex
import sys
import time

import click
import torch
from rich.console import Console

from gmlp_check.capacity import gib
from gmlp_check.devices import resolve_device
from gmlp_check.errors import UsageError
from gmlp_check.files import OutputError, check_output, write_output
from gmlp_check.matrix import DTYPES, torch_dtype
from gmlp_check.options import flags_argv
from gmlp_check.streams import progress_bar, stdout_to_stderr

from . import report, runner, targets, timed_backends
from .phases import PHASES, Workload
from .shapes import LAYOUTS, LOADS, MODEL_SHAPES, PRESETS, split_sizes
from .timing import RepeatPolicy, clock_for

EXAMPLES = """\b
Examples:
  gmlp-check bench                      # CPU: the tiny shape, figures not comparable
  gmlp-check bench --device cuda --shape all --format json --output bench.json --plot bench.png
  gmlp-check bench --device cuda --shape qwen3 --load skewed --impl triton,torch-grouped-mm \\
      --phases step,wgrad-accumulate,wgrad-baseline
  gmlp-check bench --from bench.json --plot bench.png   # redraw (or print) a saved run

\b
Exit status: 0 every measurement ran or was skipped as unavailable on this device (the reason
is in the report); 1 a backend raised while being timed (status "error");
2 usage or environment error (unknown shape, --tokens <= 0 or too many to fit in memory,
--device cuda without a GPU, an --impl spec that cannot be loaded, a --from file that is not a
bench document, an --output or --plot path that cannot be written); 130 on Ctrl-C and 143 on
SIGTERM (--output keeps the workloads that finished, "complete": false).
"""


def _split(value: str | tuple[str, ...] | None) -> list[str]:
    """The names of comma-separated and/or repeated values, each once, in order."""
    if value is None:
        return []
    raw = value if isinstance(value, tuple) else (value,)
    names = [n.strip() for chunk in raw for n in chunk.split(",") if n.strip()]
    return list(dict.fromkeys(names))


def _comma_list(allowed: tuple[str, ...], option: str):
    """A click callback: comma-separated and/or repeated values, checked against ``allowed``."""

    def parse(ctx, param, value):
        names = _split(value)
        for name in names:
            if name not in allowed:
                raise click.BadParameter(
                    f"expected a comma-separated list of {', '.join(allowed)}; got {name!r}",
                    param_hint=option,
                )
        return names or None

    return parse


def _backend_spec(name: str) -> str:
    """The module:factory spec a backend name stands for; a usage error naming --impl
    when it cannot be loaded."""
    try:
        backend = timed_backends.check_name(name)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--impl") from None
    return "gmlp_check.refimpl:GroupedMLP" if backend is None else backend.spec


def _backend_specs(ctx, param, value) -> dict[str, str] | None:
    """A click callback: the backends named by --impl, each with its spec."""
    return {name: _backend_spec(name) for name in _split(value)} or None


def _fail(message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(2)


def _check_outputs(paths: dict[str, str | None]) -> None:
    """Every output path (option -> path) writable, before anything is measured."""
    for option, path in paths.items():
        if path is not None:
            try:
                check_output(option, path)
            except OutputError as error:
                raise click.UsageError(str(error)) from None


def _write_outputs(files: dict[str, tuple[str | None, bytes]]) -> None:
    """Write each output after the report was printed: a failure now is one line, exit 2."""
    for option, (path, data) in files.items():
        if path is not None:
            try:
                write_output(option, path, data)
            except OutputError as error:
                _fail(str(error))
            click.echo(f"wrote {path}", err=True)


def _check_fits(workloads: list[Workload], device: str) -> None:
    """Refuse --tokens that can never fit on the device, before anything is allocated."""
    from gmlp_check.capacity import device_bytes, needed_bytes

    need = max(
        needed_bytes(
            w.shape.experts,
            w.shape.hidden,
            w.shape.ffn,
            w.shape.rows,
            w.dtype.itemsize,
            sides=1,  # one backend at a time
            snapshots=0,
        )
        for w in workloads
    )
    have = device_bytes(torch.device(device))
    if need > have:
        raise click.BadParameter(
            f"a workload of these sizes needs at least {gib(need)} and the {device} device "
            f"has {gib(have)}; give fewer tokens",
            param_hint="--tokens",
        )


@click.command("bench", epilog=EXAMPLES)
@click.option(
    "--shape",
    type=click.Choice([*PRESETS, "all"]),
    default=None,
    help="Shape preset, or 'all' for mixtral, qwen3 and deepseek. [default: all on CUDA, "
    "tiny on CPU]",
)
@click.option(
    "--load",
    type=click.Choice([*LOADS, "both"]),
    default="both",
    show_default=True,
    help="How routed rows spread over experts (skewed: Zipf-like, a quarter of experts empty).",
)
@click.option(
    "--tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Tokens before top-k routing, replacing each preset's count (rows = tokens x top-k).",
)
@click.option(
    "--impl",
    "backend_specs",
    multiple=True,
    callback=_backend_specs,
    help="Backends, comma-separated or repeated: refimpl, torch-grouped-mm, triton, or "
    "a 'package.module:factory' spec. [default: all three]",
)
@click.option(
    "--phases",
    "phase_names",
    default=",".join(PHASES),
    show_default=True,
    callback=_comma_list(PHASES, "--phases"),
    help="Phases to time, comma-separated.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cuda", "cpu"]),
    default="auto",
    show_default=True,
    help="auto: CUDA when available, else CPU.",
)
@click.option(
    "--dtype",
    "dtype_name",
    type=click.Choice(list(DTYPES)),
    default=None,
    help="Module dtype. [default: bf16 on CUDA, fp32 on CPU (Triton's interpreter has no "
    "correct bf16 dot)]",
)
@click.option(
    "--weights",
    type=click.Choice([*LAYOUTS, "both"]),
    default="single",
    show_default=True,
    help="single: one [G, out, in] weight per layer (single_grouped_weight); discrete: G "
    "weights; both: each workload once per layout, in one run.",
)
@click.option(
    "--warmup",
    type=click.IntRange(min=1),
    default=None,
    help="Untimed runs per phase before timing; the first autotunes. [default: 2 CUDA, 1 CPU]",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=None,
    help="Timed repeats per phase. [default: 3 to 20, as many as fit in ~0.5 s per phase]",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="stdout: a table, or the JSON document (with --output, the file gets the document "
    "and stdout the table).",
)
@click.option(
    "--output",
    # A str, not a Path: Path("out/") drops the slash that says "a directory".
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the JSON document to this file.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a PNG comparison plot (needs matplotlib).",
)
@click.option(
    "--from",
    "from_file",
    type=click.Path(dir_okay=False),  # a str: click would make '' the current directory
    default=None,
    help="Measure nothing: read a JSON document an earlier run wrote and print its table "
    "(or, with --plot, draw it; with --format json, print it).",
)
@click.option(
    "--progress/--no-progress",
    default=True,
    show_default=True,
    help="Progress bar on stderr (shown on a terminal only).",
)
def bench(
    shape: str | None,
    load: str,
    tokens: int | None,
    backend_specs: dict[str, str] | None,
    phase_names: list[str] | None,
    device: str,
    dtype_name: str | None,
    weights: str,
    warmup: int | None,
    repeats: int | None,
    output_format: str,
    output: str | None,
    plot: str | None,
    from_file: str | None,
    progress: bool,
) -> None:
    """Time refimpl, torch-grouped-mm and triton phase by phase on model-sized MoE shapes.

    Phases: forward, dgrad, wgrad-accumulate, wgrad-overwrite (fp32 main_grad), step
    (forward + backward, accumulating) and wgrad-baseline (a bf16 torch._grouped_mm
    weight-gradient GEMM that writes no main_grad). Reports median ms, TFLOP/s (model FLOPs),
    GB/s for the weight-gradient phases and the ratios between backends. On CPU the
    figures are wall-clock at the tiny shape and labelled not comparable.
    """
    _check_outputs({"--output": output, "--plot": plot})
    if plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            _fail("--plot needs matplotlib: python -m pip install 'gmlp-check[plot]'")
    if from_file is not None:
        from .saved import show

        show(from_file, plot, output_format)
        return
    try:
        device = resolve_device(device).type
    except UsageError as error:
        _fail(str(error))
    if shape is None:
        shape = "all" if device == "cuda" else "tiny"
    shape_names = list(MODEL_SHAPES) if shape == "all" else [shape]
    if device == "cpu" and shape != "tiny":
        raise click.BadParameter(
            f"{shape!r} is model-sized and runs on CUDA only; on CPU use --shape tiny",
            param_hint="--shape",
        )
    backend_specs = backend_specs or {
        name: _backend_spec(name) for name in timed_backends.default_backends()
    }
    backend_names = list(backend_specs)
    phase_names = phase_names or list(PHASES)
    dtype_name = dtype_name or ("bf16" if device == "cuda" else "fp32")
    dtype = torch_dtype(dtype_name)
    loads = list(LOADS) if load == "both" else [load]
    layouts = list(LAYOUTS) if weights == "both" else [weights]
    torch_device = torch.device(device)

    workloads = []
    for name in shape_names:
        preset = PRESETS[name]
        sized = preset.with_tokens(tokens) if tokens is not None else preset
        for load_name in loads:
            for layout in layouts:
                workloads.append(
                    Workload(
                        sized,
                        load_name,
                        split_sizes(sized, load_name),
                        dtype,
                        torch_device,
                        single_grouped_weight=layout == "single",
                    )
                )
    _check_fits(workloads, device)
    policy = RepeatPolicy(warmup=warmup or (2 if device == "cuda" else 1), repeats=repeats)
    clock = clock_for(torch_device)

    shapes = {w.shape.name: w.shape for w in workloads}
    settings = {
        "device": device,
        "dtype": str(dtype).removeprefix("torch."),
        "weights": weights,
        "layouts": layouts,
        "activation": "swiglu",
        "bias": False,
        "shapes": shape_names,
        "loads": loads,
        "tokens": tokens,
        "impls": backend_names,
        "specs": backend_specs,
        "phases": phase_names,
        "warmup": policy.warmup,
        "repeats": policy.repeats,
        "min_repeats": policy.min_repeats,
        "max_repeats": policy.max_repeats,
        "target_s": policy.target_s,
        "repeat_policy": policy.describe(),
        "inputs": "x and dy fixed across repeats (not rotated); L2 flushed (CUDA) and device "
        "synchronised before each timed repeat",
    }
    command = _canonical_command(
        device, shape, load, tokens, backend_names, phase_names, dtype_name, weights, warmup,
        repeats,
    )  # fmt: skip
    env = report.environment(torch_device, clock.name)
    started = time.perf_counter()

    def build_document(results: list[runner.Result], complete: bool) -> dict:
        return report.document(
            command=command,
            env=env,
            settings=settings,
            workloads=workloads,
            results=results,
            targets=targets.evaluate(
                results,
                shapes,
                PRESETS,
                loads,
                layouts=layouts,
                comparable=clock.comparable,
                dtype=dtype,
            ),
            wall_s=time.perf_counter() - started,
            comparable=clock.comparable,
            complete=complete,
        )

    def checkpoint(results: list[runner.Result]) -> None:
        # A run stopped part-way (a time limit, a crash) still leaves the workloads it finished.
        # A failed write here is not fatal: the final write reports it, after the table.
        if output is not None:
            with contextlib.suppress(OutputError):
                write_output("--output", output, report.json_bytes(build_document(results, False)))

    with stdout_to_stderr():  # an --impl factory that prints must not break --format json
        results = _run_with_progress(
            workloads, backend_names, phase_names, clock, policy, progress, checkpoint
        )
    doc = build_document(results, complete=True)
    if output_format == "json" and output is None:
        report.print_json(doc)
    else:  # the table; also when --output took the JSON document off stdout
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 180))
        report.print_tables(doc, console)
    files = {"--output": (output, report.json_bytes(doc) if output is not None else b"")}
    if plot is not None:
        from .plot import render_png

        files["--plot"] = (plot, render_png(doc))
    _write_outputs(files)
    sys.exit(1 if any(r.status == "error" for r in results) else 0)


def _run_with_progress(workloads, backend_names, phase_names, clock, policy, show, checkpoint):
    total = runner.planned_steps(workloads, backend_names, phase_names)
    console = Console(stderr=True) if show else Console(stderr=True, quiet=True)
    with progress_bar(console) as bar:
        task = bar.add_task("starting", total=total, case="")
        started = [False]

        def on_step(description: str) -> None:
            if started[0]:
                bar.advance(task)
            started[0] = True
            bar.update(task, description=description)

        results = runner.run(
            workloads, backend_names, phase_names, clock, policy, on_step, checkpoint
        )
        bar.update(task, completed=total)
    return results


def _canonical_command(
    device, shape, load, tokens, backend_names, phase_names, dtype_name, weights, warmup, repeats
) -> str:
    """The command that reproduces this run, with every choice spelled out."""
    flags = [
        ("--device", device), ("--shape", shape), ("--load", load),
        ("--impl", ",".join(backend_names)), ("--phases", ",".join(phase_names)),
        ("--dtype", dtype_name), ("--weights", weights),
        ("--tokens", tokens), ("--warmup", warmup), ("--repeats", repeats),
    ]  # fmt: skip
    return shlex.join(["gmlp-check", "bench", *flags_argv(flags)])
