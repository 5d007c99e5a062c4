"""The twenty-third blind corpus (variant_corpus_blind23.py, 16 development variants, and
variant_corpus_blind23_heldout.py, 8 held out) written by someone who read neither the rules
nor their tests (only CONTRACT.md, the two seed reports and issue #19's class list), and did
not run the linter, from four repositories no earlier corpus used: flagos-ai
TransformerEngine-FL (a multi-backend fork of Transformer Engine: the grouped linear, its
delayed wgrad, the op-fuser BasicLinear), moguizhizi MindSpeed-MM (vendored MindSpeed NPU
grouped-matmul MoE code and its pipeline WeightGradStore), yemokoo Megatron-LM (CUDA-graph
replay, the custom FSDP's gradient hook) and GeodesicResearch geodesic-megatron (a
Megatron-Bridge fork's op-fuser LoRA linear). Sources with commits are in the corpus modules'
docstrings.

Blind, with the rules of the session's start (8382398): **6 of 24** (development 5 of 16,
held-out **1 of 8**; three development and one held-out variant "near": a finding off the
bug's line). After the session's changes (GMLP014 on a flush helper nothing calls, GMLP016 on
a product into main_grad in any function, `gmm` as a GEMM's name, GMLP032 on a kernel that
returns the weight gradient, GMLP067 on a store popped inline and a wgrad-accumulation
switch, GMLP015 on a fresh Parameter stored into a weight list or given to an accumulating
op, GMLP038 on a class that builds its own store, GMLP046 on a fetch made on the first call
only or in a helper nothing calls):
development 13 of 16, held-out 1 of 8 (not read; their names were printed once with
the blind measurement's table, their sources never).

``OUTCOME`` pins every variant's result with the rules now. ``python -m
tests.lint.test_blind23_corpus`` prints the table.
"""

from __future__ import annotations

import sys

from .blind_outcomes import Outcomes, print_split_tables, split_corpus_tests
from .variant_corpus_blind23 import VARIANTS as DEVELOPMENT
from .variant_corpus_blind23_heldout import VARIANTS as HELD_OUT

VARIANTS = DEVELOPMENT + HELD_OUT

OUTCOME: Outcomes = {
    # -- development (blind: measured before anyone who writes rules read it)
    "te_fl_grouped_linear_overwrite_flag_read_from_quantized_weight": (
        "caught",
        (("GMLP007", 37),),
        (),
    ),
    "mindspeed_mm_gmm_bookkeeping_checked_on_weight_view": ("caught", (("GMLP007", 45),), ()),
    "te_fl_grouped_linear_offloaded_weight_rewrapped_in_fresh_parameter": (
        "caught",
        (("GMLP015", 25),),
        (),
    ),
    "geodesic_fused_lora_a_op_weight_rebound_to_detached_parameter": (
        "caught",
        (("GMLP015", 65),),
        (),
    ),
    "mindspeed_mm_gmm_unfused_path_marks_grad_added": (
        "caught",
        (("GMLP005", 74), ("GMLP032", 75)),
        (),
    ),
    "mindspeed_mm_allgather_gmlp_fc2_written_and_returned": ("caught", (("GMLP051", 30),), ()),
    "megatron_yemokoo_custom_fsdp_hook_copies_grad_whatever_strategy": (
        "caught",
        (("GMLP016", 30),),
        (),
    ),
    "mindspeed_mm_weight_grad_store_matmul_out_main_grad": ("caught", (("GMLP016", 36),), ()),
    "megatron_yemokoo_cudagraph_replay_leaves_grad_added_unset": (
        "near",
        (("GMLP022", 32),),
        (("GMLP022", 38),),
    ),
    "megatron_yemokoo_cudagraph_input_grads_without_dummy_wgrads": (
        "missed",
        (),
        (("GMLP022", 38),),
    ),
    "te_fl_grouped_linear_backward_dw_skips_store_when_fused": (
        "caught",
        (("GMLP035", 45), ("GMLP067", 37)),
        (("GMLP035", 43),),
    ),
    "te_fl_linear_backward_dw_override_only_fires_hooks": (
        "caught",
        (("GMLP035", 25), ("GMLP038", 62)),
        (("GMLP035", 25),),
    ),
    "te_fl_grouped_linear_dummy_in_comprehension_on_local_flag": (
        "caught",
        (("GMLP002", 115),),
        (),
    ),
    "te_fl_basic_linear_early_return_on_local_accumulate_flag": ("caught", (("GMLP002", 65),), ()),
    "geodesic_fused_lora_forward_never_exposes_main_grad": ("near", (("GMLP046", 89),), ()),
    "geodesic_fused_lora_main_grad_exposed_only_on_first_forward": (
        "caught",
        (("GMLP046", 107),),
        (),
    ),
    # -- held out (not read)
    "mindspeed_mm_all2all_gmlp_zero_out_wgrad_read_from_view": ("missed", (), ()),
    "megatron_yemokoo_linear_grad_accum_returns_main_grad_as_grad": (
        "caught",
        (("GMLP031", 54),),
        (),
    ),
    "mindspeed_mm_moe_linear_wgrad_accumulated_into_main_grad_clone": ("missed", (), ()),
    "megatron_yemokoo_cudagraph_warmup_zeroes_main_grad": ("missed", (), ()),
    "megatron_yemokoo_cudagraph_grad_added_recorded_before_capture": ("missed", (), ()),
    "te_fl_layernorm_mlp_backward_dw_delegates_to_single_pop_base": (
        "missed",
        (("GMLP035", 19),),
        (("GMLP035", 19), ("GMLP035", 71), ("GMLP035", 72)),
    ),
    "te_fl_backward_linear_add_output_flag_from_local_accumulate": ("near", (("GMLP002", 67),), ()),
    "te_fl_grouped_linear_main_grad_never_fetched_from_fsdp": ("missed", (), ()),
}

test_corpus_shape, test_variant_outcome_and_findings_are_the_recorded_ones = split_corpus_tests(
    DEVELOPMENT, HELD_OUT, OUTCOME
)


if __name__ == "__main__":
    print_split_tables(DEVELOPMENT, HELD_OUT)
    sys.exit(0)
