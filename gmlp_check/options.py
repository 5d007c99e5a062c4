"""The options of a differential run, declared once: ``gmlp-check diff`` and ``mutants`` take
them as command-line options and the pytest plugin as ``--gmlp-<name>``; both parse into one
``RunOptions`` that ``session.Checker`` is built from."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields

import click

from gmlp_check.refimpl.activation_names import ACTIVATION_NAMES

from . import fp8
from .backends import BUILTIN
from .engines.availability import MEGATRON_CHOICES
from .engines.configs import CONFIGS, DEFAULT_CONFIGS
from .matrix import DTYPES, MODES


@dataclass(frozen=True)
class Option:
    name: str  # --name on the command line, --gmlp-name under pytest, RunOptions.<dest>
    help: str
    kind: type = str
    default: object = None
    choices: tuple[str, ...] | None = None
    multiple: bool = False
    metavar: str | None = None
    short: str | None = None  # an extra short flag on the command line (-k)

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def parsed_default(self) -> object:
        """The value a run gets when the option is not given (a repeatable one: none)."""
        return () if self.multiple else self.default


FUSED = Option(
    "fused",
    f"The fused side: {', '.join(BUILTIN)}, or package.module:factory (a callable taking the "
    "reference's keyword arguments).",
    default="triton",
    metavar="SPEC",
)
INJECT = Option(
    "inject",
    "Run the fused side with a known bug injected (see `gmlp-check faults`).",
    metavar="FAULT",
)
MATRIX: tuple[Option, ...] = (
    Option(
        "device",
        "auto: the GPU if there is one, else the CPU through Triton's interpreter.",
        default="auto",
        choices=("auto", "cuda", "cpu"),
    ),
    Option("mode", "Only these modes (repeatable).", choices=tuple(MODES), multiple=True),
    Option(
        "dtype",
        "Dtypes to run (repeatable; the first is the default for the contract part). Default: "
        "fp32, fp16 on CPU; bf16, fp16, fp32 on CUDA; those the fused side supports.",
        choices=tuple(DTYPES),
        multiple=True,
    ),
    Option(
        "activation", "Activations to run (repeatable).", choices=ACTIVATION_NAMES, multiple=True
    ),
    Option(
        "fp8",
        "Transformer Engine FP8 recipes to run (repeatable; none: no FP8 cases). Default: on "
        "CUDA every recipe, for a fused side that declares FP8 compute (the TE backends); on "
        "the CPU none.",
        choices=fp8.AXIS_VALUES,
        multiple=True,
        metavar="RECIPE",
    ),
    Option(
        "k",
        "Select cases whose id matches EXPR: substrings combined with and/or/not, e.g. "
        "-k 'mode=overwrite and delay=1'. A full case id runs that case.",
        metavar="EXPR",
        short="-k",
    ),
    Option("experts", "Experts G [CPU 4, CUDA 8].", kind=int),
    Option("hidden", "Hidden size [CPU 16, CUDA 256].", kind=int),
    Option("ffn", "FFN size per expert [CPU 12, CUDA 320].", kind=int),
    Option("tokens", "Tokens T per microbatch [CPU 20, CUDA 1000].", kind=int),
    Option("seed", "Data seed.", kind=int, default=0),
)
ENGINE: tuple[Option, ...] = (
    Option(
        "megatron",
        "The Megatron data-parallel engine around the modules: emulated (gmlp_check.refimpl."
        "megatron, CPU or CUDA), real (megatron-core 0.19.2 DistributedDataParallel and "
        "Megatron-FSDP, CUDA only), auto: real where megatron-core imports and the run is on "
        "CUDA, else emulated.",
        default="auto",
        choices=MEGATRON_CHOICES,
    ),
    Option(
        "nproc",
        "Data-parallel ranks for the real engines, one process per GPU (torch.distributed, "
        "NCCL). Outside torchrun gmlp-check starts the N workers itself. [1; WORLD_SIZE under "
        "torchrun]",
        kind=int,
        metavar="N",
    ),
    Option(
        "engine-configs",
        "Real engine configurations to run each case under (repeatable; a case runs those of "
        f"its mode's flavour). Default: {', '.join(DEFAULT_CONFIGS)}.",
        choices=tuple(CONFIGS),
        multiple=True,
        metavar="NAME",
    ),
)
# Not a pytest plugin option: a test session compiles as it goes.
COMPILE_WORKERS = Option(
    "compile-workers",
    "Processes that compile the fused side's kernels for the selected cases before the run "
    "(0: none). Default: on CUDA, for a backend that compiles on first use (triton), one per "
    "CPU but one, at most 16, once per machine and source version (Triton's cache keeps the "
    "kernels).",
    kind=int,
    metavar="N",
)
DIFF: tuple[Option, ...] = (FUSED, INJECT, *MATRIX, *ENGINE)


def _default(dest: str):
    """The declared default of the option whose value RunOptions holds as ``dest``."""
    return next(o for o in (*DIFF, COMPILE_WORKERS) if o.dest == dest).parsed_default


@dataclass(frozen=True)
class RunOptions:
    """Parsed values of every option above (sizes None: the device's default)."""

    fused: str = _default("fused")
    inject: str | None = _default("inject")
    device: str = _default("device")
    mode: tuple[str, ...] = _default("mode")
    dtype: tuple[str, ...] = _default("dtype")
    activation: tuple[str, ...] = _default("activation")
    fp8: tuple[str, ...] = _default("fp8")
    k: str | None = _default("k")
    experts: int | None = _default("experts")
    hidden: int | None = _default("hidden")
    ffn: int | None = _default("ffn")
    tokens: int | None = _default("tokens")
    seed: int = _default("seed")
    megatron: str = _default("megatron")
    nproc: int | None = _default("nproc")
    engine_configs: tuple[str, ...] = _default("engine_configs")
    compile_workers: int | None = _default("compile_workers")

    @classmethod
    def from_values(cls, values: dict[str, object]) -> RunOptions:
        """From parsed values by dest (lists as tuples); keys that are no option are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(
            **{k: (tuple(v) if isinstance(v, list) else v) for k, v in values.items() if k in known}
        )


def click_options(options: Sequence[Option]) -> Callable:
    """A decorator adding ``options`` to a click command."""

    def decorate(fn: Callable) -> Callable:
        for o in reversed(options):
            flags = [o.short] if o.short else [f"--{o.name}"]
            kind = click.Choice(list(o.choices)) if o.choices else o.kind
            fn = click.option(
                *flags,
                o.dest,
                type=kind,
                multiple=o.multiple,
                default=o.parsed_default,
                show_default=o.default is not None and not o.multiple,
                metavar=o.metavar,
                help=o.help,
            )(fn)
        return fn

    return decorate


def add_pytest_options(group, options: Sequence[Option], no_default: Option | None = None) -> None:
    """Add ``--gmlp-<name>`` for each option to a pytest option group (``no_default`` gets
    None as its default)."""
    for o in options:
        kwargs: dict[str, object] = {"help": o.help, "dest": f"gmlp_{o.dest}"}
        if o.multiple:
            kwargs.update(action="append", default=[])
        else:
            kwargs["default"] = None if o is no_default else o.default
        if o.choices:
            kwargs["choices"] = o.choices
        if o.kind is int:
            kwargs["type"] = int
        if o.metavar:
            kwargs["metavar"] = o.metavar
        group.addoption(f"--gmlp-{o.name}", **kwargs)


def values_from_pytest(config, options: Sequence[Option]) -> dict[str, object]:
    return {o.dest: config.getoption(f"gmlp_{o.dest}") for o in options}


def to_argv(options: Sequence[Option], values: dict[str, object]) -> list[str]:
    """The command-line arguments that give ``values`` (click's parsed values, by dest) back:
    what a launcher hands its workers so that they parse exactly what the user gave."""
    return flags_argv(
        (
            o.short or f"--{o.name}",
            tuple(values.get(o.dest) or ()) if o.multiple else values.get(o.dest),
        )
        for o in options
    )


def flags_argv(flags: Iterable[tuple[str, object]]) -> list[str]:
    """``flag value`` for each (flag, value): none for a value of None, one per item of a tuple
    (a repeatable option). What ``to_argv`` gives a launcher's workers and what the benchmark
    writes as the command that reproduces its run."""
    argv: list[str] = []
    for flag, value in flags:
        if value is None:
            continue
        for item in value if isinstance(value, tuple) else (value,):
            argv += [flag, str(item)]
    return argv
