"""Benchmark shapes: model-like grouped MLPs and how routed tokens spread over their experts.

A shape counts tokens before top-k routing; the grouped MLP sees ``rows = tokens * top_k``
rows, already permuted by expert. fc1 fuses gate and up projections (activation swiglu), so
its output has ``2 * ffn`` features.

Loads:
  uniform  rows split as evenly as possible: rows // G each, the first rows % G experts one more.
  skewed   deterministic Zipf-like: the last G // 4 experts get no rows at all; expert g of the
           others gets a share proportional to 1 / (g + 1). No expert gets more than ``tokens``
           rows (top-k routing sends a token to an expert at most once); what a capped expert
           cannot take is shared among the uncapped ones in the same proportions. Shares are
           rounded by largest remainder (ties to the lower index), so the sizes sum to ``rows``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

LOADS = ("uniform", "skewed")
# Weight layouts (--weights): one [G, out, in] grouped weight per layer, or G weights.
LAYOUTS = ("single", "discrete")


@dataclass(frozen=True)
class Shape:
    name: str
    experts: int
    hidden: int
    ffn: int
    tokens: int
    top_k: int
    model: str

    @property
    def rows(self) -> int:
        return self.tokens * self.top_k

    @property
    def fc1_out(self) -> int:
        return 2 * self.ffn  # swiglu: gate and up projections in one fc1

    def with_tokens(self, tokens: int) -> Shape:
        return replace(self, tokens=tokens)


PRESETS: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape("mixtral", 8, 4096, 14336, 16384, 2, "Mixtral-8x7B-like"),
        Shape("qwen3", 128, 2048, 768, 16384, 8, "Qwen3-30B-A3B-like"),
        Shape("deepseek", 256, 7168, 2048, 4096, 8, "DeepSeek-V3-like"),
        Shape("tiny", 4, 64, 32, 24, 2, "tiny, for CPU and CI"),
    )
}
MODEL_SHAPES = ("mixtral", "qwen3", "deepseek")


def split_sizes(shape: Shape, load: str) -> list[int]:
    """Rows per expert for the given load; they sum to ``shape.rows``."""
    if load == "uniform":
        base, extra = divmod(shape.rows, shape.experts)
        return [base + (1 if g < extra else 0) for g in range(shape.experts)]
    if load == "skewed":
        active = shape.experts - shape.experts // 4
        weights = [Fraction(1, g + 1) for g in range(active)]
        sizes = _capped_proportional(shape.rows, weights, cap=shape.tokens)
        return sizes + [0] * (shape.experts - active)
    raise ValueError(f"load: expected one of {', '.join(LOADS)}, got {load!r}")


def _capped_proportional(total: int, weights: list[Fraction], cap: int) -> list[int]:
    """Split ``total`` in proportion to ``weights`` with no part above ``cap`` (water-filling)."""
    if total > cap * len(weights):
        raise ValueError(f"cannot place {total} rows on {len(weights)} experts of at most {cap}")
    capped: set[int] = set()
    while True:
        free = [g for g in range(len(weights)) if g not in capped]
        remaining = total - cap * len(capped)
        weight_sum = sum(weights[g] for g in free)
        exact = {g: remaining * weights[g] / weight_sum for g in free}
        over = {g for g, share in exact.items() if share > cap}
        if not over:
            break
        capped |= over
    sizes = [cap] * len(weights)
    for g in free:
        sizes[g] = int(exact[g])  # floor: exact shares are non-negative
    shortfall = remaining - sum(sizes[g] for g in free)
    by_remainder = sorted(free, key=lambda g: (-(exact[g] - int(exact[g])), g))
    for g in by_remainder[:shortfall]:
        sizes[g] += 1
    return sizes
