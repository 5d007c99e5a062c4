"""The data of a case: sizes, token splits, weights, inputs, output gradients and main_grad
contents, identical for both sides and reproducible from the seed and the case id alone.

Every host-side tensor is made on the CPU explicitly (a training script may have set
``torch.set_default_device("cuda")``) and then moved to the run's device.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass

import torch

from .buffers import Arena
from .fp8 import ROW_MULTIPLE
from .matrix import SPLIT_PATTERNS, Case
from .refimpl.megatron import is_weight


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

    def to_json(self) -> dict[str, int]:
        return asdict(self)


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
    if pattern == "aligned-empty":
        # ragged-empty in units of ROW_MULTIPLE rows: every expert's rows a multiple of it.
        units = split_sizes("ragged-empty", experts, tokens // ROW_MULTIPLE, microbatch)
        return [u * ROW_MULTIPLE for u in units]
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


def case_seed(seed: int, case: Case, rank: int = 0) -> int:
    """A seed per case, global seed and data-parallel rank, stable across runs and independent
    of matrix order, so a case rerun alone sees exactly the data it saw in the full matrix."""
    key = f"{seed}:{case.id}" if rank == 0 else f"{seed}:{case.id}:rank{rank}"
    return zlib.crc32(key.encode())


@dataclass
class Inputs:
    state: dict[str, torch.Tensor]  # weights and biases, in the case dtype
    xs: list[torch.Tensor]
    probs: list[torch.Tensor | None]
    dys: list[torch.Tensor]
    splits: list[list[int]]

    def upcast(self) -> Inputs:
        """The same values in fp32, for the reference."""

        def up(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(torch.float32)

        return Inputs(
            {k: v.to(torch.float32) for k, v in self.state.items()},
            [up(x) for x in self.xs],
            [up(p) for p in self.probs],
            [up(d) for d in self.dys],
            self.splits,
        )


def input_scale(case: Case) -> float:
    """Standard deviation of x. Clamped QGeGLU gets inputs large enough to reach its clamp
    (|h| > 7) in fp32. In half precision an h within an ulp of the limit may land on either
    side of the clamp in the two implementations and flip the derivative, so there the inputs
    stay small and the clamp is left to fp32."""
    if case.activation == "clamped_qgeglu" and case.dtype == "fp32":
        return 8.0
    return 1.0


def make_state(
    shapes: dict[str, torch.Size], case: Case, sizes: Sizes, device: torch.device, gen
) -> dict[str, torch.Tensor]:
    """Weights and biases, uniform in +-1/sqrt(fan_in), in the case dtype."""
    state = {}
    for name, shape in shapes.items():
        fan_in = shape[-1] if is_weight(name) else sizes.hidden
        bound = 1.0 / fan_in**0.5
        values = (torch.rand(shape, generator=gen, device="cpu") * 2 - 1) * bound
        state[name] = values.to(dtype=case.torch_dtype, device=device)
    return state


def make_inputs(
    case: Case,
    sizes: Sizes,
    state: dict[str, torch.Tensor],
    device: torch.device,
    generator: torch.Generator,
) -> Inputs:
    dtype = case.torch_dtype
    xs, probs, dys, splits = [], [], [], []
    uses_probs = case.activation == "scaled_swiglu"
    for mb in range(case.microbatches):
        sizes_mb = split_sizes(case.splits, sizes.experts, sizes.tokens, mb)
        t = sum(sizes_mb)
        cpu = {"generator": generator, "device": "cpu"}
        x = torch.randn(t, sizes.hidden, **cpu) * input_scale(case)
        dy = torch.randn(t, sizes.hidden, **cpu)
        p = torch.rand(t, **cpu) * 0.9 + 0.1 if uses_probs else None
        xs.append(x.to(dtype=dtype, device=device))
        dys.append(dy.to(dtype=dtype, device=device))
        probs.append(None if p is None else p.to(dtype=dtype, device=device))
        splits.append(sizes_mb)
    return Inputs(state, xs, probs, dys, splits)


def make_arena(
    case: Case, shapes: dict[str, torch.Size], device: torch.device, generator: torch.Generator
) -> Arena:
    """main_grad for every parameter: NaN sentinels where the contract says each element must
    be written (weights in overwrite mode), random 'before' values where it must accumulate or
    stay untouched (weights otherwise, and biases, whose .grad the DDP hook adds)."""
    arena = Arena(shapes, device)
    for name in shapes:
        sentinel = is_weight(name) and case.mode_spec.overwrite
        arena.fill(name, "nan" if sentinel else "random", generator)
    return arena
