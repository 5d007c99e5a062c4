"""The blind8 corpus (variant_corpus_blind8.py) measured against the rules as they were at
58c69b9, the base of branch h-blind8, by someone who read neither the rules nor their tests.

``OUTCOME`` records, per variant, what that single blind run gave: whether a finding of any
rule landed on one of the buggy snippet's ``# bug`` lines (caught), and the (code, line)
findings on the correct twin (false alarms). The tests pin those outcomes, so a change in the
rules that catches a missed variant, loses a caught one or moves a twin finding makes them
fail and the figures in the corpus docstring get revisited.

``python -m tests.lint.test_blind8_corpus`` prints the per-variant and per-class table.
"""

from __future__ import annotations

import sys

import pytest

from .blind_outcomes import Outcomes, print_table, recorded_form, shape_problems
from .variant_corpus_blind8 import VARIANTS

# name: (outcome, findings on the buggy snippet, findings on the twin), findings as (code, line).
# "caught": a finding on a ``# bug`` line; "near": a finding elsewhere in the buggy snippet that
# the twin lacks and whose message names the bug (judged by hand); "missed": neither.
OUTCOME: Outcomes = {
    # 1: which object
    # missed blind; caught since 2026-12-05 (not blind): GMLP030 on a marking call handed a
    # tensor restored from the saved tensors while main_grad is taken from weight_param
    "blind8-te-backward-linear-add-dummy-for-saved-weight": ("caught", (("GMLP030", 44),), ()),
    # Missed blind at 58c69b9; caught after the round (not blind): overwrite_main_grad read
    # from a name that is a quantized copy on the FP8 path only (overwrite_flag_reads).
    "blind8-te-layernorm-linear-overwrite-flag-from-weightmat": (
        "caught",
        (("GMLP007", 46),),
        (),
    ),
    # GMLP003 on both: the shortened dummy is not zero-filled under zero_out_wgrad (the real
    # HYGON code does zero-fill it); true on the snippet, not about this variant's class.
    "blind8-hygon-aglinear-saves-transposed-flux-weight": (
        "missed",
        (("GMLP003", 59),),
        (("GMLP003", 59),),
    ),
    # 2: parameter rebound
    # missed blind; caught since 2026-12-05 (not blind): GMLP015's module slot follows the
    # weight through a local, and a fresh Parameter on one path of a slot meant for the weight
    "blind8-bridge-lora-a-op-weight-rewrapped": ("caught", (("GMLP015", 31),), ()),
    "blind8-hygon-vocab-output-shared-weight-cast-to-input-dtype": (
        "missed",
        (("GMLP003", 13),),
        (("GMLP003", 13),),
    ),
    "blind8-megatron-te-ops-basic-linear-dequantized-fp8-weight": (
        "caught",
        (("GMLP015", 21),),
        (),
    ),
    # 3: flags without writes
    "blind8-hygon-vocab-output-flag-hoisted-past-fusion-check": ("caught", (("GMLP032", 58),), ()),
    "blind8-megatron-gtp-async-reduce-scatter-marks-before-accumulate": (
        "caught",
        (("GMLP006", 18),),
        (),
    ),
    # Missed blind; caught after the 2026-12-05 round (not blind): GMLP049, the flag set only
    # under a test that it is already true.
    "blind8-te-layernorm-linear-flag-value-read-for-hasattr": (
        "caught",
        (("GMLP049", 48),),
        (),
    ),
    # 4: overwrite without asking
    # missed blind; caught since 2026-12-05 (not blind): GMLP016 on a hard-coded replacing
    # write (te_general_gemm never accumulates) outside every test that asks, in a producer
    # that asks elsewhere
    "blind8-hygon-aglinear-te-gemm-outside-fsdp-branch": ("caught", (("GMLP016", 25),), ()),
    # Missed blind; caught after the 2026-12-05 round (not blind): GMLP016 takes a copy of a
    # value named for the weight gradient into main_grad as producer code whatever the name.
    "blind8-megatron-gtp-drain-copies-into-main-grad": (
        "caught",
        (("GMLP016", 19),),
        (),
    ),
    "blind8-hygon-vocab-output-unfused-fallback-slice-assigns": (
        "caught",
        (("GMLP003", 29), ("GMLP016", 16)),
        (("GMLP003", 29),),
    ),
    # 5: hooks without bookkeeping
    "blind8-megatron-gtp-drain-calls-grad-accum-hook-directly": ("caught", (("GMLP017", 33),), ()),
    "blind8-megatron-layer-node-fires-wgrad-hooks-without-delay": ("missed", (), ()),
    # 6: delayed wgrad across classes
    "blind8-megatron-dw-wrapper-shared-expert-gate-de-morgan": ("missed", (), ()),
    # near blind (on the subclass's ``class`` line, naming in_proj's dropped delayed wgrad);
    # since 2026-12-05 GMLP020 reports at the overriding method's ``def``
    "blind8-megatron-gdn2-lowrank-gate-overrides-in-proj-dw": (
        "caught",
        (("GMLP020", 62),),
        (),
    ),
    # 7: the seed shape in other syntax
    "blind8-te-backward-linear-scale-early-return-on-local": ("caught", (("GMLP002", 39),), ()),
    "blind8-te-userbuffers-backward-closure-reads-local": ("caught", (("GMLP002", 26),), ()),
    "blind8-te-basic-linear-op-backward-return-ifexp": ("caught", (("GMLP001", 40),), ()),
    # 8: integration without main_grad
    "blind8-megatron-fused-impl-pre-hooks-snapshot-at-build": ("missed", (), ()),
    "blind8-megatron-shared-expert-replay-skips-kwargs-pre-hooks": ("missed", (), ()),
}

BY_NAME = {v.name: v for v in VARIANTS}


def test_corpus_shape():
    assert 16 <= len(VARIANTS) <= 24
    assert shape_problems(VARIANTS, OUTCOME, (2, 3)) == []


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_variant_outcome_and_findings_are_the_recorded_ones(name):
    assert recorded_form(BY_NAME[name]) == OUTCOME[name]


if __name__ == "__main__":
    print_table(VARIANTS)
    sys.exit(0)
