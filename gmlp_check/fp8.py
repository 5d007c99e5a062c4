"""The FP8 axis, declared as data: the quantization recipes Transformer Engine trains MoE models
in, what each one rounds, and the two contexts a case runs under (TE's ``autocast`` around every
forward, TE's ``quantized_model_init`` around construction for FP8 primary weights).

Transformer Engine is imported only when an FP8 case runs. A backend takes part in the axis by
declaring ``fp8_autocast = "transformer_engine"`` on the module its factory returns (the TE
adapters do; a user's module that runs TE inside may too): the checker then runs that module's
forward under TE's autocast. A module without the declaration is not quantized by the autocast,
so its FP8 cases are skipped as unsupported rather than passed vacuously.

What a recipe rounds (TE 2.20.2, transformer_engine/common/recipe): DelayedScaling and
Float8CurrentScaling default to the HYBRID format, E4M3 for the forward operands (inputs,
weights) and E5M2 for the gradients, with one scale per tensor (from the amax history, or from
the tensor itself); Float8BlockScaling rounds everything to E4M3 with one scale per 1x128 or
128x128 block; MXFP8 (E4M3, 32-element blocks) and NVFP4 need compute capability 10.0.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

# Unit roundoff (half an ulp, relative) of the FP8 element formats: E4M3 keeps 3 mantissa bits,
# E5M2 two.
UNIT_ROUNDOFF = {"e4m3": 2.0**-4, "e5m2": 2.0**-3, "e2m1": 2.0**-2}

# What the module must declare to take part (see the module docstring).
DECLARATION = ("fp8_autocast", "transformer_engine")


@dataclass(frozen=True)
class Recipe:
    name: str  # the value of the case axis ``fp8``
    te_class: str  # the class in transformer_engine.common.recipe
    forward_format: str  # what inputs and weights are rounded to
    backward_format: str  # what output gradients are rounded to
    scaling: str  # "tensor" or "block"
    availability: str  # the transformer_engine.pytorch function that says whether it runs here
    doc: str

    def rounding_sigma(self) -> float:
        """The standard deviation of the relative error that quantization leaves in a value
        of the MLP, in units of that value's RMS (see tolerance.py, FP8).

        A weight gradient of fc1 is the deepest value: on its way the forward rounds four
        operands (x and W1 in fc1, the activation and W2 in fc2: the activation's derivative
        depends on fc1's output) and the backward two gradients (dy in fc2's dgrad, dh in fc1's
        wgrad). A product of operands each off by a uniform relative error in [-u, u] is off by
        the sum of them, variance u^2/3 each; a dot product of K such products with independent
        errors keeps that relative variance in units of the RMS of its terms' sum. The other
        values (output, dgrad, fc2's gradients) pass fewer roundings, so this bounds them too.
        """
        u_fwd = UNIT_ROUNDOFF[self.forward_format]
        u_bwd = UNIT_ROUNDOFF[self.backward_format]
        return math.sqrt((4 * u_fwd**2 + 2 * u_bwd**2) / 3)


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            "delayed",
            "DelayedScaling",
            "e4m3",
            "e5m2",
            "tensor",
            "is_fp8_available",
            "per-tensor scales from the amax history (HYBRID: E4M3 forward, E5M2 backward)",
        ),
        Recipe(
            "current",
            "Float8CurrentScaling",
            "e4m3",
            "e5m2",
            "tensor",
            "is_fp8_available",
            "per-tensor scales from each tensor's own amax (HYBRID)",
        ),
        Recipe(
            "block",
            "Float8BlockScaling",
            "e4m3",
            "e4m3",
            "block",
            "is_fp8_block_scaling_available",
            "DeepSeek-V3-style blockwise scales (1x128 activations, 128x128 weights), E4M3",
        ),
        Recipe(
            "mxfp8",
            "MXFP8BlockScaling",
            "e4m3",
            "e5m2",
            "block",
            "is_mxfp8_available",
            "MXFP8: E8M0 scales per 32 elements (Blackwell)",
        ),
        Recipe(
            "nvfp4",
            "NVFP4BlockScaling",
            "e2m1",
            "e2m1",
            "block",
            "is_nvfp4_available",
            "NVFP4: E2M1 values, FP8 scales per 16 elements (Blackwell)",
        ),
    )
}
NONE = "none"
AXIS_VALUES = (NONE, *RECIPES)
# FP8 GEMMs want both dimensions of every operand divisible by 16 (TE's autocast docstring):
# FP8 cases split tokens in multiples of 16.
ROW_MULTIPLE = 16


def declares_fp8(module: object) -> bool:
    attr, value = DECLARATION
    return getattr(module, attr, None) == value


def _te():
    import transformer_engine.pytorch as te  # optional: only FP8 cases need it

    return te


def unavailable_reason(recipe: str) -> str | None:
    """Why ``recipe`` cannot run here, in TE's own words (None: it can). Not having TE at all
    is a reason too."""
    try:
        te = _te()
    except ImportError as exc:
        return f"Transformer Engine is not importable ({exc})"
    available, why = getattr(te, RECIPES[recipe].availability)(return_reason=True)
    return None if available else f"TE: {why}"


def make_recipe(recipe: str):
    from transformer_engine.common import recipe as te_recipe

    return getattr(te_recipe, RECIPES[recipe].te_class)()


@contextlib.contextmanager
def weights_init(recipe: str, fp8_weights: bool) -> Iterator[None]:
    """Construction of the fused module: inside TE's ``quantized_model_init`` for FP8 primary
    weights (the Parameters themselves are quantized tensors), else nothing."""
    if recipe == NONE or not fp8_weights:
        yield
        return
    with _te().quantized_model_init(enabled=True, recipe=make_recipe(recipe)):
        yield


class Autocast:
    """TE's autocast around each forward of one side, with one recipe object for the whole
    case, as a training loop holds one (DelayedScaling keeps its amax history in it)."""

    def __init__(self, recipe: str) -> None:
        self.recipe = None if recipe == NONE else make_recipe(recipe)

    def __call__(self) -> contextlib.AbstractContextManager:
        if self.recipe is None:
            return contextlib.nullcontext()
        return _te().autocast(enabled=True, recipe=self.recipe)


def markdown_table() -> str:
    """The docs' table of the recipes, generated from the declaration."""
    lines = [
        "| `fp8=` | TE recipe | forward / backward format | scales | rounding sigma | what it is |",
        "|---|---|---|---|---:|---|",
    ]
    for r in RECIPES.values():
        lines.append(
            f"| `{r.name}` | `{r.te_class}` | {r.forward_format.upper()} / "
            f"{r.backward_format.upper()} | per {r.scaling} | {r.rounding_sigma():.3f} | {r.doc} |"
        )
    return "\n".join(lines)
