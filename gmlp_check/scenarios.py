"""The scenario matrix: which configurations of a grouped MLP the differential checker runs.

A ``Case`` is one configuration of the module and of the Megatron parameters around it. Its
``id`` is a stable, human-readable string (``mode=...,delay=...,...``) used for ``-k``
selection, rerun commands, pytest ids and JSON reports, so it must never depend on sizes,
seeds or the order in which the matrix was built.

The default matrix is not the full cross product (that is thousands of cases). It crosses
the flags that decide where a weight gradient goes (mode, delay, zero_out_wgrad,
single/discrete) fully, at the default activation and the first dtype; sweeps activations x
dtypes x bias with the modes rotating through them; and adds the split edge cases (T=0, no
empty expert, every token to one expert) for every mode. Every listed value appears, and every
contract row runs with experts that received no tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields

import torch

from refimpl import ACTIVATIONS


@dataclass(frozen=True)
class Mode:
    """How weight gradients reach main_grad, and which Megatron flavour owns the parameters."""

    name: str
    output_into_main_grad: bool  # the op-level accumulate_into_main_grad
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

DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}

# Triton's interpreter computes bf16 dot products wrongly, so bf16 is a GPU-only dtype.
DEVICE_DTYPES: dict[str, tuple[str, ...]] = {
    "cpu": ("fp32", "fp16"),
    "cuda": ("bf16", "fp16", "fp32"),
}

ACTIVATION_NAMES: tuple[str, ...] = tuple(ACTIVATIONS)

SPLIT_PATTERNS: dict[str, str] = {
    "ragged-empty": "ragged sizes, two experts (one if G=2) receive no tokens",
    "ragged": "ragged sizes, every expert receives tokens",
    "all-to-one": "every token goes to one expert, all others are empty",
    "t0": "T=0: no tokens at all",
}

DEFAULT_ACTIVATION = "swiglu"
DEFAULT_SPLITS = "ragged-empty"
DEFAULT_MICROBATCHES = 2


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

    # (key in the id, field name); the order is part of the id format.
    ID_KEYS = (
        ("mode", "mode"),
        ("delay", "delay"),
        ("zero", "zero_out"),
        ("single", "single"),
        ("bias", "bias"),
        ("act", "activation"),
        ("dtype", "dtype"),
        ("splits", "splits"),
        ("mb", "microbatches"),
    )

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {self.mode!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation: expected one of {', '.join(ACTIVATIONS)}, got {self.activation!r}"
            )
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype: expected one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.splits not in SPLIT_PATTERNS:
            raise ValueError(
                f"splits: expected one of {', '.join(SPLIT_PATTERNS)}, got {self.splits!r}"
            )
        if not isinstance(self.microbatches, int) or self.microbatches < 1:
            raise ValueError(f"mb: expected an int >= 1, got {self.microbatches!r}")

    @property
    def id(self) -> str:
        parts = []
        for key, name in self.ID_KEYS:
            value = getattr(self, name)
            parts.append(f"{key}={int(value) if isinstance(value, bool) else value}")
        return ",".join(parts)

    @classmethod
    def from_id(cls, case_id: str) -> Case:
        """Parse an id written by ``Case.id`` (all keys, any order)."""
        expected = ",".join(f"{key}=..." for key, _ in cls.ID_KEYS)
        values: dict[str, str] = {}
        for part in case_id.split(","):
            key, sep, value = part.partition("=")
            if not sep or key in values:
                raise ValueError(f"case id: expected {expected}, got {case_id!r}")
            values[key] = value
        if set(values) != {key for key, _ in cls.ID_KEYS}:
            raise ValueError(f"case id: expected {expected}, got {case_id!r}")
        kwargs: dict[str, object] = {}
        types = {f.name: f.type for f in fields(cls)}
        for key, name in cls.ID_KEYS:
            raw = values[key]
            if types[name] in (bool, "bool"):
                if raw not in ("0", "1"):
                    raise ValueError(f"case id: {key} must be 0 or 1, got {raw!r}")
                kwargs[name] = raw == "1"
            elif types[name] in (int, "int"):
                if not raw.isdigit():
                    raise ValueError(f"case id: {key} must be an integer, got {raw!r}")
                kwargs[name] = int(raw)
            else:
                kwargs[name] = raw
        return cls(**kwargs)

    @property
    def mode_spec(self) -> Mode:
        return MODES[self.mode]

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def config(self) -> dict[str, object]:
        """The case as JSON-ready key/values (field names, not id keys)."""
        return asdict(self)

    def module_kwargs(self) -> dict[str, object]:
        """Keyword arguments of refimpl.GroupedMLP that this case fixes (sizes come from Sizes)."""
        return {
            "activation": self.activation,
            "bias": self.bias,
            "single_grouped_weight": self.single,
            "accumulate_into_main_grad": self.mode_spec.output_into_main_grad,
            "delay_wgrad_compute": self.delay,
        }


@dataclass(frozen=True)
class Sizes:
    experts: int
    hidden: int
    ffn: int
    tokens: int
    seed: int = 0

    def __post_init__(self) -> None:
        # Errors name the CLI option, since that is where sizes come from.
        limits = {"experts": 2, "hidden": 1, "ffn": 1, "tokens": 1, "seed": 0}
        why = {
            "experts": " (the matrix needs an empty and a non-empty expert)",
            "tokens": " (per microbatch; T=0 is a case of its own)",
        }
        for name, low in limits.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(
                    f"--{name}: expected an int >= {low}{why.get(name, '')}, got {value!r}"
                )

    def as_options(self) -> list[str]:
        return [
            f"--experts={self.experts}",
            f"--hidden={self.hidden}",
            f"--ffn={self.ffn}",
            f"--tokens={self.tokens}",
            f"--seed={self.seed}",
        ]


# Tiny on CPU: Triton's interpreter runs kernels about a thousand times slower than a GPU.
# On CUDA: big enough for several blocks per GEMM, ragged tails and sizes that are not a
# multiple of a block, small enough that the matrix runs in well under a minute.
DEVICE_SIZES: dict[str, Sizes] = {
    "cpu": Sizes(experts=4, hidden=16, ffn=12, tokens=20),
    "cuda": Sizes(experts=8, hidden=256, ffn=320, tokens=1000),
}


def split_sizes(pattern: str, experts: int, tokens: int, microbatch: int = 0) -> list[int]:
    """Tokens per expert for one microbatch; later microbatches rotate which experts are empty."""
    if pattern not in SPLIT_PATTERNS:
        raise ValueError(f"splits: expected one of {', '.join(SPLIT_PATTERNS)}, got {pattern!r}")
    if pattern == "t0":
        return [0] * experts
    if pattern == "all-to-one":
        sizes = [0] * experts
        sizes[(experts - 1 + microbatch) % experts] = tokens
        return sizes
    if pattern == "ragged-empty":
        empty = {1, experts - 1} if experts >= 3 else {experts - 1}
    else:
        empty = set()
    empty = {(g + microbatch) % experts for g in empty}
    # Uneven but deterministic shares (1..4), so neighbouring experts get different row counts.
    shares = [0 if g in empty else 1 + (3 * g + microbatch) % 4 for g in range(experts)]
    total = sum(shares)
    sizes = [tokens * s // total for s in shares]
    # Hand the remainder out one row at a time to the non-empty experts, largest share first.
    order = sorted((g for g in range(experts) if shares[g]), key=lambda g: (-shares[g], g))
    for i in range(tokens - sum(sizes)):
        sizes[order[i % len(order)]] += 1
    return sizes


def default_matrix(
    dtypes: Sequence[str],
    activations: Sequence[str] = ACTIVATION_NAMES,
    modes: Sequence[str] = tuple(MODES),
) -> list[Case]:
    """The default scenario matrix for the given dtypes, activations and modes (in order).

    The first dtype and activation are the defaults used where a part does not sweep them."""
    for what, given, known in (
        ("dtype", dtypes, DTYPES),
        ("activation", activations, ACTIVATIONS),
        ("mode", modes, MODES),
    ):
        if not given:
            raise ValueError(f"{what}: expected at least one value")
        unknown = [v for v in given if v not in known]
        if unknown:
            raise ValueError(f"{what}: expected values from {', '.join(known)}, got {unknown}")
    dtype0 = dtypes[0]
    act0 = DEFAULT_ACTIVATION if DEFAULT_ACTIVATION in activations else activations[0]
    cases: list[Case] = []

    # Part 1: every combination of the flags that decide where a weight gradient goes.
    for mode in modes:
        for delay in (False, True):
            for zero_out in (False, True):
                for single in (False, True):
                    cases.append(
                        Case(
                            mode,
                            delay,
                            zero_out,
                            single,
                            False,
                            act0,
                            dtype0,
                            DEFAULT_SPLITS,
                            DEFAULT_MICROBATCHES,
                        )
                    )

    # Part 2: numerics. Activations x dtypes x bias, one microbatch, modes and weight layout
    # rotating so every dtype meets every mode.
    for a, activation in enumerate(activations):
        for d, dtype in enumerate(dtypes):
            for b, bias in enumerate((False, True)):
                # 2a + b + d runs through every residue for each dtype as a and b vary.
                mode = modes[(2 * a + b + d) % len(modes)]
                single = (a + d) % 2 == 1
                cases.append(
                    Case(mode, False, False, single, bias, activation, dtype, DEFAULT_SPLITS, 1)
                )

    # Part 3: split edge cases for every mode; T=0 also through the delayed path.
    for mode in modes:
        for delay in (False, True):
            cases.append(
                Case(mode, delay, False, False, False, act0, dtype0, "t0", DEFAULT_MICROBATCHES)
            )
        for pattern, single in (("ragged", False), ("all-to-one", True)):
            cases.append(
                Case(mode, False, False, single, True, act0, dtype0, pattern, DEFAULT_MICROBATCHES)
            )

    return list(dict.fromkeys(cases))  # drop duplicates, keep order


def describe_values(cases: Iterable[Case]) -> dict[str, list[object]]:
    """Every value each field takes in a set of cases (for coverage checks and help)."""
    values: dict[str, list[object]] = {f.name: [] for f in fields(Case)}
    for case in cases:
        for name, value in asdict(case).items():
            if value not in values[name]:
                values[name].append(value)
    return values


def build_cases(
    device_type: str,
    dtypes: Sequence[str] = (),
    activations: Sequence[str] = (),
    modes: Sequence[str] = (),
    keyword: str | None = None,
) -> list[Case]:
    """The cases a run selects: the default matrix for the device's dtypes (or the given
    ones), narrowed by a ``-k`` expression. A ``-k`` that is a complete case id selects that
    case whatever the other options, so a rerun command always finds its case."""
    from .selection import compile_expression

    if keyword:
        try:
            return [Case.from_id(keyword.strip())]
        except ValueError:
            pass
    cases = default_matrix(
        tuple(dtypes) or DEVICE_DTYPES[device_type],
        tuple(activations) or ACTIVATION_NAMES,
        tuple(modes) or tuple(MODES),
    )
    if keyword:
        matcher = compile_expression(keyword)
        cases = [c for c in cases if matcher(c.id)]
    return cases
