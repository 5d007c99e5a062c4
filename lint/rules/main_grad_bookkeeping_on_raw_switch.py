"""GMLP048: bookkeeping told the raw switch while the GEMM is told a narrowed value of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

narrowed_switches = LazyModule("..analysis.narrowed_switches", __package__)

CODE = "GMLP048"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="main-grad-bookkeeping-on-raw-switch",
    summary=(
        "A function asks a helper of the file for a narrowed form of a switch (None where the "
        "switch is off and in further cases) and hands that to one call, but hands the raw "
        "switch to another: the two disagree exactly where the helper narrowed it."
    ),
    flags=(
        "`A.S` (or `getattr(A, 'S')`, or a local bound to it) handed to a call in a function "
        "that binds `L = helper(A, ...)` and hands `L` on, where the file's `helper` returns "
        "None / False first when `A.S` is off and again on another path"
    ),
    explanation="""
        Blind corpus 7, class 3 (flags without the rest), from Primus's quantized linear:
        `fuse_pattern = _fuse_wgrad_accum_pattern(self.config, weight)` is None when
        `config.gradient_accumulation_fusion` is off and also for the FP8 block / MXFP8 /
        FP4 recipes whose GEMM has no accumulating epilogue. The GEMM is handed
        `fuse_pattern`; the bridge that skips the separate main_grad add and marks
        `grad_added_to_main_grad` must be handed the same decision (`fuse_pattern is not
        None`). Handed `self.config.gradient_accumulation_fusion` instead, it skips the add
        for those recipes although the GEMM accumulated nothing: their weight gradient is
        lost.

        Seen (analysis/narrowed_switches.py): top-level helpers of the file whose body
        starts with `if not P.S: return None` (or `not getattr(P, "S", ...)`, `return
        False`) and returns None / False on a later path as well; in a function, a local
        bound to a call of such a helper that is handed to some call, and the raw switch
        `A.S` (A what the helper was handed for P) handed to another call, by keyword or
        position, spelled `A.S`, `getattr(A, "S", ...)` or through a local every binding of
        which is that.

        Not seen: helpers that are methods or in another file, narrowings that do not start
        with the early return, and the raw switch stored on an object (`ctx.fuse = A.S`)
        rather than handed to a call.
    """,
    fix="""
        Hand every consumer the narrowed decision (`fuse_pattern is not None`). No automatic
        fix: how the narrowed value reads as a boolean depends on the helper.
    """,
    fix_summary="none (hand on the narrowed value)",
    valid=(
        Example(
            """
            def _pattern(config, weight):
                if not config.gradient_accumulation_fusion:
                    return None
                if weight.dtype not in (torch.bfloat16, torch.float16):
                    return None
                return "megatron"

            def forward(self, x, weight):
                assert hasattr(weight, "main_grad")
                pattern = _pattern(self.config, weight)
                x = bridge(x, weight, fuse=pattern is not None)
                return gemm(x, weight, accum_pattern=pattern)
            """
        ),
    ),
    invalid=(
        Example(
            """
            def _pattern(config, weight):
                if not config.gradient_accumulation_fusion:
                    return None
                if weight.dtype not in (torch.bfloat16, torch.float16):
                    return None
                return "megatron"

            def forward(self, x, weight):
                assert hasattr(weight, "main_grad")
                pattern = _pattern(self.config, weight)
                x = bridge(x, weight, fuse=self.config.gradient_accumulation_fusion)
                return gemm(x, weight, accum_pattern=pattern)
            """,
            line=11,
        ),
    ),
)


MESSAGE = (
    "`{switch}` is handed on here, while this function hands `{local}` (from `{helper}`, "
    "which is off where `{switch}` is off and in further cases) to another call: where they "
    "differ this consumer acts as if the other accumulated into main_grad when it did not; "
    "hand it the narrowed value"
)


def check(context: ModuleContext, out: Collector) -> None:
    if "return" not in context.source:
        return
    helpers = context.shared(narrowed_switches.narrowing_helpers)
    if not helpers:
        return
    for unit in context.units:
        if unit.survey.calls & helpers.keys():
            for use in narrowed_switches.raw_uses(unit, helpers):
                message = MESSAGE.format(switch=use.switch, local=use.narrowed, helper=use.helper)
                out.report(CODE, use.value, message)
