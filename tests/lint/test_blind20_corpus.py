"""The twentieth blind corpus (variant_corpus_blind20.py, 16 development variants, and
variant_corpus_blind20_heldout.py, 8 held out) written by someone who read neither the rules
nor their tests (only CONTRACT.md, the two seed reports and issue #19"s class list), and did
not run the linter, from five repositories no earlier corpus used: AMD-AGI Primus-Turbo (its
FP8 / grouped GEMM autograd functions with a fused wgrad into main_grad through wrappers
handed `out=ctx.main_grad`, and its `_setup_fused_grad_accum`), mdy666 mdy_triton (Megatron
patches forked from Transformer Engine"s linear, layernorm linear and grouped linear, a
DDP start_sync_grad), radixark miles (GLM-5"s DSA attention and Inkling"s shared experts
under delayed wgrad), IEIT-Yuan Yuan2.0-M32 (its DDP grad-accumulation hook) and inclusionAI
AReaL (LoRA parameters and gradient_accumulation_fusion). Sources with commits are in the
corpus modules" docstrings; twins adapted where the real code lacks a feature say so.

Blind, with the rules at the session"s start (4c0bf35) and after the session"s first two
commits alike: **6 of 24** (development 2 of 16 and 2 near, held-out **4 of 8**). After the
checks written from its development part (GMLP016"s wrapper handed main_grad by every call;
GMLP046"s dropped fetch; GMLP032"s mark reached on the side of a conditional output"s test
where the output is None): development 4 of 16 and 3 near, held-out 4 of 8 (not read). After
the twenty-fourth session's GMLP066 (Yuan2.0-M32's hook folding `.grad` without asking the
flag) and GMLP068 (AReaL's fusion switch turned after the build): development 6 of 16 and 3
near, held-out 4 of 8 (not read).

``OUTCOME`` pins every variant"s result with the rules now. ``python -m
tests.lint.test_blind20_corpus`` prints the table.
"""

from __future__ import annotations

import sys

from .blind_outcomes import Outcomes, print_split_tables, split_corpus_tests
from .variant_corpus_blind20 import VARIANTS as DEVELOPMENT
from .variant_corpus_blind20_heldout import VARIANTS as HELD_OUT

VARIANTS = DEVELOPMENT + HELD_OUT

OUTCOME: Outcomes = {
    # -- development (blind: measured before anyone who writes rules read it)
    "primus_turbo_gemm_fp8_setup_on_quantized_weight": (
        "near",
        (("GMLP031", 87),),
        (("GMLP031", 86),),
    ),
    "primus_turbo_grouped_gemm_dummy_from_squeezed_view": ("missed", (), ()),
    "mdy_triton_grouped_linear_params_rebound_to_casts": ("missed", (), ()),
    "primus_turbo_gemm_weight_cast_before_setup": ("missed", (), ()),
    "mdy_triton_linear_flag_set_without_fusion": ("near", (("GMLP032", 38),), ()),
    "primus_turbo_setup_fused_grad_accum_flag_dropped": ("missed", (), ()),
    "primus_turbo_grouped_wgrad_copied_into_main_grad": ("caught", (("GMLP016", 28),), ()),
    "mdy_triton_grouped_linear_first_microbatch_overwrite": (
        "missed",
        (("GMLP003", 49),),
        (("GMLP003", 49),),
    ),
    "mdy_triton_start_sync_grad_registers_unfolded_grads": ("missed", (), (("GMLP019", 24),)),
    "yuan_ddp_param_hook_ignores_grad_added_flag": ("caught", (("GMLP066", 41),), ()),
    "miles_dsa_attention_backward_dw_skips_indexer": ("caught", (("GMLP014", 58),), ()),
    "miles_inkling_shared_experts_without_backward_dw": ("missed", (), ()),
    "mdy_triton_linear_dummy_on_local_accumulate": (
        "caught",
        (("GMLP002", 41), ("GMLP032", 40)),
        (("GMLP032", 40),),
    ),
    "mdy_triton_grouped_linear_ddp_handler_on_local_flag": ("caught", (("GMLP002", 46),), ()),
    "primus_turbo_grouped_linear_module_main_grad_not_exposed": ("caught", (("GMLP046", 32),), ()),
    "areal_lora_fusion_disabled_after_build": ("caught", (("GMLP068", 41),), ()),
    # -- held out (not read)
    "mdy_triton_layernorm_linear_offload_rewrap_flags_stand_in": ("caught", (("GMLP015", 35),), ()),
    "primus_turbo_grouped_gemm_contiguous_copy_of_weight": ("missed", (), ()),
    "yuan_linear_fused_wgrad_real_grad_handed_on": (
        "caught",
        (("GMLP003", 41), ("GMLP051", 49)),
        (("GMLP003", 41),),
    ),
    "mdy_triton_layernorm_linear_fp8_wgrad_slice_assigned": (
        "missed",
        (("GMLP003", 67),),
        (("GMLP003", 67),),
    ),
    "miles_multi_lora_reset_rearms_buckets_with_stale_flags": ("missed", (), ()),
    "miles_dsv4_attention_backward_dw_misses_wkv": ("near", (("GMLP014", 42),), ()),
    "yuan_linear_overwrite_dummy_on_local_accumulate": (
        "caught",
        (("GMLP002", 32), ("GMLP003", 3), ("GMLP016", 28), ("GMLP032", 30)),
        (("GMLP003", 3), ("GMLP016", 28), ("GMLP032", 30)),
    ),
    "primus_turbo_linear_module_hasattr_main_grad": ("caught", (("GMLP046", 3),), ()),
}

test_corpus_shape, test_variant_outcome_and_findings_are_the_recorded_ones = split_corpus_tests(
    DEVELOPMENT, HELD_OUT, OUTCOME
)


if __name__ == "__main__":
    print_split_tables(DEVELOPMENT, HELD_OUT)
    sys.exit(0)
