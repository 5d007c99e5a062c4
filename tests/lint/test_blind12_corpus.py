"""The twelfth blind corpus (variant_corpus_blind12.py, 16 development variants, and
variant_corpus_blind12_heldout.py, 8 held out) written by someone who read neither the rules
nor their tests (only CONTRACT.md, the two seed reports and issue #19's class list), from the
heads of five repositories none of the earlier corpora's headers name (Ascend/MindSpeed-LLM,
Victarry's, pggPL's and ROCm's Transformer Engine forks, ROCm's Paddle layers included, and
deepspeedai/Megatron-DeepSpeed), the third variant of each class held out before anything
was measured. Written during the twelfth session and measured at its end; no rule was
written from it.

Blind, with the rules at 4c22bb6 (the session's start): 7 of 24 (development 6 of 16 with 3
near, held-out 1 of 8 with 4 near). With the session's final rules (bd70ca8): **8 of 24**
(development 6 of 16, **held-out 2 of 8**): Megatron-DeepSpeed's DDP hook copying `.grad`
into main_grad, caught by GMLP016's hook check written from corpus 11's microsoft fork of the
same code.

Read at the thirteenth session's start, held-out part included, and made development
material (not blind since): development 13 of 16 with 2 near, held-out 7 of 8 with the
thirteenth session's rules (GMLP056-058, and GMLP015, GMLP030, GMLP038, GMLP016, GMLP001/002
extended). Left: the graphed `backward_dw` firing every module's hooks without asking
`need_backward_dw()`, the MindSpeed-LLM LoRA stand-in named `weights2_b` beside
`original_weight2_b` and `LayerNormMLP.backward_dw` dropping fc1's pop (both near), and
the FSDP `main_grad_func` taken without `get_main_grad`.

Six twins carry findings. GMLP035 (five: Transformer Engine's `backward_dw` assigning the
popped wgrad over `.grad`, in Victarry's fork) is judged true at the heads of the forks
carrying that code (docs/lint-history-split.toml; TE issue #3437). GMLP003 on the
MindSpeed-LLM fast-MLP twin is the shortening's: the real function picks `torch.zeros` under
`zero_out_wgrad` and its head lints clean.

``OUTCOME`` pins every variant's result with the rules now. ``python -m
tests.lint.test_blind12_corpus`` prints the table.
"""

from __future__ import annotations

import sys

from .blind_outcomes import Outcomes, print_split_tables, split_corpus_tests
from .variant_corpus_blind12 import VARIANTS as DEVELOPMENT
from .variant_corpus_blind12_heldout import VARIANTS as HELD_OUT

VARIANTS = DEVELOPMENT + HELD_OUT

OUTCOME: Outcomes = {
    # -- development (blind: nothing was written from this corpus)
    "blind12-mindspeedllm-lora-gmm-rearranged-weight": (
        "near",
        (("GMLP006", 28), ("GMLP032", 28)),
        (),
    ),
    "blind12-pggpl-backward-linear-add-saved-w": ("caught", (("GMLP030", 8),), ()),
    "blind12-rocmte-paddle-return-main-grad": ("caught", (("GMLP031", 19),), ()),
    "blind12-victarryte-grouped-linear-detached-origin": ("caught", (("GMLP015", 9),), ()),
    "blind12-mindspeedllm-fastmlp-flag-on-unfused-path": ("caught", (("GMLP032", 26),), ()),
    "blind12-rocmte-linear-flag-truthiness": ("caught", (("GMLP049", 19),), ()),
    "blind12-rocmte-paddle-wgrad-accumulate-false": ("caught", (("GMLP016", 18),), ()),
    "blind12-mindspeedllm-fastmlp-matmul-out-main-grad": ("caught", (("GMLP016", 10),), ()),
    "blind12-victarryte-graph-backward-dw-all-modules": ("missed", (), ()),
    "blind12-victarryte-base-backward-dw-hooks-on-early-return": (
        "caught",
        (("GMLP035", 9), ("GMLP056", 3)),
        (("GMLP035", 8),),
    ),
    "blind12-victarryte-layernorm-mlp-backward-dw-fc1-dropped": (
        "near",
        (("GMLP035", 12),),
        (("GMLP035", 18), ("GMLP035", 19)),
    ),
    "blind12-victarryte-ops-grouped-linear-need-backward-dw": (
        "caught",
        (("GMLP035", 19), ("GMLP038", 3)),
        (("GMLP035", 19),),
    ),
    "blind12-victarryte-backward-linear-scale-ifexp": ("caught", (("GMLP001", 30),), ()),
    "blind12-victarryte-backward-linear-add-return": ("caught", (("GMLP002", 27),), ()),
    "blind12-victarryte-bench-init-main-grads-after-steps": ("caught", (("GMLP058", 23),), ()),
    "blind12-pggplte-bench-init-main-grads-fwd-only": ("caught", (("GMLP058", 19),), ()),
    # -- held out (blind)
    "blind12-victarryte-grouped-linear-ddp-saved-weights": ("caught", (("GMLP037", 31),), ()),
    "blind12-mindspeedllm-fastmlp-forward-weight-copy": (
        "caught",
        (("GMLP003", 26), ("GMLP015", 8)),
        (("GMLP003", 25),),
    ),
    "blind12-victarryte-layernorm-mlp-fc1-flag-frozen": ("caught", (("GMLP057", 2),), ()),
    "blind12-megatrondeepspeed-param-hook-copy": ("caught", (("GMLP016", 5),), ()),
    "blind12-victarryte-layernorm-mlp-backward-dw-empty-store": (
        "caught",
        (("GMLP035", 12), ("GMLP035", 13), ("GMLP056", 6)),
        (("GMLP035", 11), ("GMLP035", 12)),
    ),
    "blind12-victarryte-linear-subclass-backward-dw-override": (
        "caught",
        (("GMLP035", 11), ("GMLP056", 6)),
        (("GMLP035", 9),),
    ),
    "blind12-rocmte-linear-dummy-ifexp-first-microbatch": (
        "caught",
        (("GMLP001", 18), ("GMLP002", 18)),
        (),
    ),
    "blind12-victarryte-linear-main-grad-func-fsdp": ("missed", (), ()),
}

test_corpus_shape, test_variant_outcome_and_findings_are_the_recorded_ones = split_corpus_tests(
    DEVELOPMENT, HELD_OUT, OUTCOME
)


if __name__ == "__main__":
    print_split_tables(DEVELOPMENT, HELD_OUT)
    sys.exit(0)
