"""The scenario matrix, declared as data: the axes a case varies and the parts of the default
matrix, from which case ids, ``--list``, the pytest suite and the README's matrix table are
generated (in the spirit of PyTorch's OpInfo).

A ``Case`` is one configuration of the module and of the Megatron parameters around it. Its
``id`` (``mode=...,delay=...,...``) is used for ``-k`` selection, rerun commands, pytest ids and
JSON reports, so it never depends on sizes, seeds or the order the matrix was built in.

The default matrix is not the full cross product (thousands of cases). Its parts cross the
flags that decide where a weight gradient goes fully, sweep activations x dtypes x bias with
the modes and the weight layout rotating through them, and run the split edge cases (T=0, no
empty expert, every token to one expert) for every mode. Every listed value appears, and every
contract row runs with experts that received no tokens.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING

from gmlp_check.refimpl.activation_names import ACTIVATION_NAMES

if TYPE_CHECKING:
    import torch

    from gmlp_check.refimpl.config import MLPConfig

    from .inputs import Sizes

from . import fp8


@dataclass(frozen=True)
class Mode:
    """How weight gradients reach main_grad, and which Megatron flavour owns the parameters."""

    name: str
    accumulate_into_main_grad: bool  # the op-level setting the modules are built with
    fsdp: bool  # Megatron-FSDP parameters: lazy get_main_grad(), main_grad None until fetched
    overwrite: bool  # param.overwrite_main_grad
    description: str


MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode("off", False, False, False, "plain autograd .grad; Megatron DDP adds it in its hook"),
        Mode("accumulate-ddp", True, False, False, "Megatron DDP fused wgrad accumulation (+=)"),
        Mode(
            "overwrite-fsdp", True, True, True, "Megatron-FSDP: lazy get_main_grad, overwrite (=)"
        ),
        Mode("accumulate-fsdp", True, True, False, "Megatron-FSDP: lazy get_main_grad, +="),
    )
}

# dtype name -> the name of its torch.dtype. Names only: the matrix is read by the options and
# the pytest plugin, which must not import torch before a run asks for it.
DTYPES: dict[str, str] = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
}


def torch_dtype(name: str) -> torch.dtype:
    """The torch.dtype of a dtype name of the matrix."""
    import torch  # here, not at the top: see DTYPES

    return getattr(torch, DTYPES[name])


# The dtypes a run tries on each device when none are named; a backend may refuse some (it
# raises NotImplementedError). bf16 is not tried on CPU: Triton's interpreter computes bf16
# dot products wrongly, so CPU runs would prove nothing about our kernels there.
DEVICE_DTYPES: dict[str, tuple[str, ...]] = {
    "cpu": ("fp32", "fp16"),
    "cuda": ("bf16", "fp16", "fp32"),
}

SPLIT_PATTERNS: dict[str, str] = {
    "ragged-empty": "ragged sizes, two experts (one if G=2) receive no tokens",
    "aligned-empty": "as ragged-empty, every size a multiple of 16 (what FP8 GEMMs take)",
    "ragged": "ragged sizes, every expert receives tokens",
    "all-to-one": "every token goes to one expert, all others are empty",
    "t0": "T=0: no tokens at all",
}


@dataclass(frozen=True)
class Axis:
    """One setting a case varies: its key in the id, its Case field and its values."""

    key: str
    field: str
    values: tuple[object, ...]
    doc: str
    # An axis added after ids were first published has a default: an id leaves it out at that
    # value, so every earlier id still names the same case.
    default: object = None

    @property
    def optional(self) -> bool:
        return self.default is not None


AXES: tuple[Axis, ...] = (
    Axis("mode", "mode", tuple(MODES), "where weight gradients go (see the modes table)"),
    Axis("delay", "delay", (False, True), "delay_wgrad_compute: weight gradients in backward_dw()"),
    Axis("zero", "zero_out", (False, True), "zero_out_wgrad on the parameters"),
    Axis("single", "single", (False, True), "one [G, out, in] weight instead of G weights"),
    Axis("bias", "bias", (False, True), "per-expert biases"),
    Axis("act", "activation", ACTIVATION_NAMES, "the activation"),
    Axis("dtype", "dtype", tuple(DTYPES), "the fused side's dtype (the reference runs fp32)"),
    Axis("splits", "splits", tuple(SPLIT_PATTERNS), "how tokens are split among experts"),
    Axis("mb", "microbatches", (1, 2), "microbatches run without a reset in between"),
    Axis(
        "fp8",
        "fp8",
        fp8.AXIS_VALUES,
        "Transformer Engine FP8 recipe the fused side's forward runs under (`none`: no FP8)",
        default=fp8.NONE,
    ),
    Axis(
        "fp8w",
        "fp8_weights",
        (False, True),
        "FP8 primary weights (TE's quantized_model_init); with `fp8=none` always 0",
        default=False,
    ),
)
AXIS_BY_FIELD: dict[str, Axis] = {a.field: a for a in AXES}


@dataclass(frozen=True)
class Case:
    mode: str
    delay: bool
    zero_out: bool
    single: bool
    bias: bool
    activation: str
    dtype: str
    splits: str
    microbatches: int
    fp8: str = fp8.NONE
    fp8_weights: bool = False

    def __post_init__(self) -> None:
        for axis in AXES:
            value = getattr(self, axis.field)
            if axis.field == "microbatches":
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
                expected = "an int >= 1"
            else:
                ok = value in axis.values and type(value) is type(axis.values[0])
                expected = f"one of {', '.join(map(_id_value, axis.values))}"
            if not ok:
                raise ValueError(f"{axis.key}: expected {expected}, got {value!r}")
        if self.fp8_weights and self.fp8 == fp8.NONE:
            raise ValueError("fp8w: expected 0 with fp8=none (FP8 weights need a recipe)")

    @property
    def id(self) -> str:
        return ",".join(
            f"{a.key}={_id_value(getattr(self, a.field))}"
            for a in AXES
            if not (a.optional and getattr(self, a.field) == a.default)
        )

    @classmethod
    def from_id(cls, case_id: str) -> Case:
        """Parse an id written by ``Case.id`` (every key but the optional ones, any order)."""
        expected = ",".join(f"{a.key}=..." for a in AXES if not a.optional)
        values: dict[str, str] = {}
        for part in case_id.split(","):
            key, sep, value = part.partition("=")
            if not sep or key in values:
                raise ValueError(f"case id: expected {expected}, got {case_id!r}")
            values[key] = value
        required = {a.key for a in AXES if not a.optional}
        if not required <= set(values) <= {a.key for a in AXES}:
            raise ValueError(f"case id: expected {expected}, got {case_id!r}")
        return cls(**{a.field: _parse_value(a, values[a.key]) for a in AXES if a.key in values})

    @property
    def mode_spec(self) -> Mode:
        return MODES[self.mode]

    @property
    def torch_dtype(self) -> torch.dtype:
        return torch_dtype(self.dtype)

    def config(self) -> dict[str, object]:
        """The case as JSON-ready key/values (field names, not id keys)."""
        return asdict(self)

    def mlp_config(self, sizes: Sizes, device: torch.device | str) -> MLPConfig:
        """The configuration of the fused side's module in this case."""
        from gmlp_check.refimpl.config import MLPConfig  # torch: see DTYPES

        return MLPConfig(
            num_experts=sizes.experts,
            hidden=sizes.hidden,
            ffn=sizes.ffn,
            activation=self.activation,
            bias=self.bias,
            single_grouped_weight=self.single,
            accumulate_into_main_grad=self.mode_spec.accumulate_into_main_grad,
            delay_wgrad_compute=self.delay,
            dtype=self.torch_dtype,
            device=device,
        )

    @property
    def quantized(self) -> bool:
        """The fused side runs under an FP8 recipe."""
        return self.fp8 != fp8.NONE


def _id_value(value: object) -> str:
    return str(int(value)) if isinstance(value, bool) else str(value)


def _parse_value(axis: Axis, raw: str) -> object:
    kind = type(axis.values[0])
    if kind is bool:
        if raw not in ("0", "1"):
            raise ValueError(f"case id: {axis.key} must be 0 or 1, got {raw!r}")
        return raw == "1"
    if kind is int:
        if not raw.isdigit():
            raise ValueError(f"case id: {axis.key} must be an integer, got {raw!r}")
        return int(raw)
    return raw


# The default matrix ------------------------------------------------------------------------
# A value "first" in ``fixed`` stands for the first selected value of that axis (the run's
# default dtype and activation); the default activation is swiglu where it is selected.
FIRST = "first"


@dataclass(frozen=True)
class Part:
    """One block of the default matrix.

    ``cross`` lists what is crossed fully, outermost first: a field (every selected value of
    its axis) or a tuple of fields with the rows they take together. ``rotate`` gives a field
    whose value cycles with the crossed positions: value index = sum(weight * index of the
    crossed field) modulo the number of values. ``fixed`` holds the remaining fields."""

    name: str
    doc: str
    cross: tuple[str | tuple[tuple[str, ...], tuple[tuple[object, ...], ...]], ...]
    fixed: Mapping[str, object]
    rotate: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


DEFAULT_PARTS: tuple[Part, ...] = (
    Part(
        "contract",
        "every combination of the flags that decide where a weight gradient goes",
        cross=("mode", "delay", "zero_out", "single"),
        fixed={
            "bias": False,
            "activation": FIRST,
            "dtype": FIRST,
            "splits": "ragged-empty",
            "microbatches": 2,
        },
    ),
    Part(
        "numerics",
        "activations x dtypes x bias, one microbatch, modes and weight layout rotating so that "
        "every dtype meets every mode",
        cross=("activation", "dtype", "bias"),
        rotate={
            "mode": {"activation": 2, "bias": 1, "dtype": 1},
            "single": {"activation": 1, "dtype": 1},
        },
        fixed={"delay": False, "zero_out": False, "splits": "ragged-empty", "microbatches": 1},
    ),
    Part(
        "splits",
        "the split edge cases for every mode: T=0 (also delayed), no empty expert, every token "
        "to one expert",
        cross=(
            "mode",
            (
                ("delay", "splits", "single", "bias"),
                (
                    (False, "t0", False, False),
                    (True, "t0", False, False),
                    (False, "ragged", False, True),
                    (False, "all-to-one", True, True),
                ),
            ),
        ),
        fixed={"zero_out": False, "activation": FIRST, "dtype": FIRST, "microbatches": 2},
    ),
    Part(
        "fp8",
        "every selected FP8 recipe x high-precision or FP8 primary weights x every mode, in "
        "bf16 with 16-aligned splits (empty experts included); only for backends that declare "
        "FP8 compute, on CUDA",
        cross=("fp8", "fp8_weights", "mode"),
        fixed={
            "delay": False,
            "zero_out": False,
            "single": False,
            "bias": False,
            "activation": FIRST,
            "dtype": "bf16",
            "splits": "aligned-empty",
            "microbatches": 2,
        },
    ),
)

DEFAULT_ACTIVATION = "swiglu"


@dataclass(frozen=True)
class MatrixSelection:
    """The values of the axes a run selects (dtype, activation, mode); the rest take all."""

    dtypes: tuple[str, ...]
    activations: tuple[str, ...] = ACTIVATION_NAMES
    modes: tuple[str, ...] = tuple(MODES)
    fp8: tuple[str, ...] = ()  # FP8 recipes; none selected: the fp8 part has no cases

    def __post_init__(self) -> None:
        for option, given, known in (
            ("--dtype", self.dtypes, DTYPES),
            ("--activation", self.activations, ACTIVATION_NAMES),
            ("--mode", self.modes, MODES),
        ):
            if not given:
                raise ValueError(f"{option}: expected at least one value")
            unknown = [v for v in given if v not in known]
            if unknown:
                raise ValueError(
                    f"{option}: expected values from {', '.join(known)}, got {unknown}"
                )
        unknown = [v for v in self.fp8 if v not in fp8.RECIPES]
        if unknown:
            known = ", ".join(fp8.RECIPES)
            raise ValueError(f"--fp8: expected values from {known}, got {unknown}")

    def values(self, field_name: str) -> tuple[object, ...]:
        chosen = {
            "dtype": self.dtypes,
            "activation": self.activations,
            "mode": self.modes,
            "fp8": self.fp8,
        }
        return chosen.get(field_name, AXIS_BY_FIELD[field_name].values)

    def first(self, field_name: str) -> object:
        values = self.values(field_name)
        if field_name == "activation" and DEFAULT_ACTIVATION in values:
            return DEFAULT_ACTIVATION
        return values[0]


def _part_cases(part: Part, selection: MatrixSelection) -> Iterator[Case]:
    dims: list[tuple[tuple[str, ...], tuple[tuple[object, ...], ...]]] = []
    for entry in part.cross:
        if isinstance(entry, str):
            dims.append(((entry,), tuple((v,) for v in selection.values(entry))))
        else:
            dims.append(entry)
    for position in itertools.product(*(range(len(rows)) for _, rows in dims)):
        values: dict[str, object] = {}
        index: dict[str, int] = {}
        for (names, rows), i in zip(dims, position):
            values.update(zip(names, rows[i]))
            index.update(dict.fromkeys(names, i))
        for name, weights in part.rotate.items():
            choices = selection.values(name)
            values[name] = choices[sum(w * index[f] for f, w in weights.items()) % len(choices)]
        for name, value in part.fixed.items():
            values[name] = selection.first(name) if value == FIRST else value
        yield Case(**values)


def default_matrix(selection: MatrixSelection, parts: Sequence[Part] = DEFAULT_PARTS) -> list[Case]:
    """The cases of the default matrix for a selection, in declaration order, no duplicates."""
    cases = [case for part in parts for case in _part_cases(part, selection)]
    return list(dict.fromkeys(cases))


def describe_values(cases: Sequence[Case]) -> dict[str, list[object]]:
    """Every value each field takes in a set of cases (for coverage checks and help)."""
    values: dict[str, list[object]] = {f.name: [] for f in fields(Case)}
    for case in cases:
        for name, value in asdict(case).items():
            if value not in values[name]:
                values[name].append(value)
    return values


def markdown_parts(parts: Sequence[Part] = DEFAULT_PARTS) -> str:
    """The README's table of the default matrix's parts, generated from the declaration."""

    def crossed(entry) -> str:
        if isinstance(entry, str):
            return f"`{AXIS_BY_FIELD[entry].key}`"
        names, rows = entry
        keys = ",".join(AXIS_BY_FIELD[n].key for n in names)
        return f"({keys}) in {{" + "; ".join(",".join(map(_id_value, r)) for r in rows) + "}"

    lines = ["| part | crossed | rotating | fixed | what it covers |", "|---|---|---|---|---|"]
    for part in parts:
        rotating = ", ".join(f"`{AXIS_BY_FIELD[n].key}`" for n in part.rotate) or "-"
        fixed = ", ".join(
            f"`{AXIS_BY_FIELD[n].key}={'first' if v == FIRST else _id_value(v)}`"
            for n, v in part.fixed.items()
        )
        cross = " x ".join(crossed(e) for e in part.cross)
        lines.append(f"| {part.name} | {cross} | {rotating} | {fixed} | {part.doc} |")
    return "\n".join(lines)


def markdown_axes() -> str:
    """The README's table of the axes (the keys of a case id)."""
    lines = ["| key | values | meaning |", "|---|---|---|"]
    for axis in AXES:
        values = ", ".join(f"`{_id_value(v)}`" for v in axis.values)
        lines.append(f"| `{axis.key}` | {values} | {axis.doc} |")
    return "\n".join(lines)
