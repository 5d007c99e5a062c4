"""The twenty-sixth blind corpus (variant_corpus_blind26.py, 16 development variants, and
variant_corpus_blind26_heldout.py, 8 held out) written by someone who read neither the rules
nor their tests (only CONTRACT.md, the two seed reports and issue #19's class list), and did
not run the linter, from three repositories no earlier corpus used: linkedin Liger-Kernel
(the ``megatron-vp-flce`` branch's fused linear vocab-parallel cross entropy and its Megatron
drop-in), Dao-AILab quack (its linear and MLP autograd functions, which accumulate the
weight gradient themselves) and luoshuqing2001 hexa_moe (a Triton MoE whose expert backward
is written by hand). Sources with commits are in the corpus modules' docstrings.

Blind, with the rules of the session's start (f9ace7c): **8 of 24** (development 5 of 16, 3
near; held-out **3 of 8**, 1 near). After the session's changes (GMLP032 on a mark on the
way to a returned weight-gradient product, a loop writing on every pass and an erasure asked
only in overwrite mode no longer taken for missing writes; GMLP019 no longer on a local list
of work run now; GMLP007 on ``overwrite_main_grad`` read through a cast and on the mark of a
stand-in beside its ``*_og`` Parameter; GMLP031 in a marking weight-gradient helper; GMLP033
at the return of a helper that hands back the gradient it wrote; GMLP038 on the delay handed
to the base by position and on a store built in the ``apply`` call): see OUTCOME below and
docs/lint-semantics.md, "Twenty-ninth session", for the figures. Two lines of one held-out
variant were printed once by a formatter's diff (disclosed there; no rule was written from
them).

``OUTCOME`` pins every variant's result with the rules now. ``python -m
tests.lint.test_blind26_corpus`` prints the table.
"""

from __future__ import annotations

import sys

from .blind_outcomes import Outcomes, print_split_tables, split_corpus_tests
from .variant_corpus_blind26 import VARIANTS as DEVELOPMENT
from .variant_corpus_blind26_heldout import VARIANTS as HELD_OUT

VARIANTS = DEVELOPMENT + HELD_OUT

OUTCOME: Outcomes = {
    # -- development (blind: measured before anyone who writes rules read it)
    "liger_vpce_overwrite_flag_read_from_accum_dtype_copy": ("caught", (("GMLP007", 62),), ()),
    "quack_linear_flag_set_on_autocast_cast_weight": ("caught", (("GMLP007", 43),), ()),
    "quack_linear_returns_main_grad_as_dweight": ("caught", (("GMLP031", 44),), ()),
    "hexa_mlp_fc1_rebound_to_fresh_parameter": ("caught", (("GMLP015", 40),), ()),
    "quack_linear_fallback_path_sets_flag": ("caught", (("GMLP032", 38),), ()),
    "hexa_mlp_finish_writes_main_grad_without_flag": ("caught", (("GMLP033", 11),), ()),
    "hexa_experts_fc1_main_grad_copy_per_expert": (
        "caught",
        (("GMLP003", 45), ("GMLP003", 46), ("GMLP016", 41)),
        (("GMLP003", 45), ("GMLP003", 46)),
    ),
    "hexa_mlp_finish_overwrites_via_out_kwarg": ("caught", (("GMLP016", 10),), ()),
    "quack_grouped_backward_dw_fires_hooks_without_flag": ("missed", (), ()),
    "quack_grouped_zero_token_path_hooks_without_flag": ("near", (("GMLP002", 80),), ()),
    "quack_shared_expert_backward_dw_skips_base": ("near", (("GMLP038", 96),), ()),
    "quack_shared_expert_forward_uses_private_store": ("caught", (("GMLP038", 94),), ()),
    "liger_vpce_dummy_chosen_on_local_accumulate": (
        "caught",
        (("GMLP002", 68), ("GMLP002", 69)),
        (),
    ),
    "quack_linear_return_ifexp_on_local_accumulate": ("caught", (("GMLP002", 43),), ()),
    "liger_megatron_ce_no_main_grad_fetch": ("missed", (), ()),
    "quack_mlp_main_grad_exposed_after_op": ("missed", (), ()),
    # -- held out (not read)
    "hexa_data_centric_flags_gathered_expert_weights": ("missed", (), ()),
    "liger_vpce_returns_main_grad_in_backward_tuple": ("caught", (("GMLP031", 74),), ()),
    "liger_vpce_main_grad_written_real_grad_returned": (
        "near",
        (("GMLP033", 64), ("GMLP033", 66)),
        (),
    ),
    "hexa_experts_fc2_main_grad_subscript_assignment": (
        "caught",
        (("GMLP003", 45), ("GMLP003", 46), ("GMLP016", 42)),
        (("GMLP003", 45), ("GMLP003", 46)),
    ),
    "quack_mlp_backward_dw_hooks_before_flags": ("missed", (("GMLP038", 99),), (("GMLP038", 99),)),
    "quack_mlp_subclass_backward_dw_inverted_guard": (
        "missed",
        (("GMLP038", 99),),
        (("GMLP038", 99),),
    ),
    "quack_mlp_dummy_picked_by_tuple_index_on_local_flag": (
        "caught",
        (("GMLP002", 36), ("GMLP002", 37), ("GMLP038", 99)),
        (("GMLP038", 99),),
    ),
    "quack_linear_main_grad_set_on_data_alias": ("missed", (), ()),
}

test_corpus_shape, test_variant_outcome_and_findings_are_the_recorded_ones = split_corpus_tests(
    DEVELOPMENT, HELD_OUT, OUTCOME
)


if __name__ == "__main__":
    print_split_tables(DEVELOPMENT, HELD_OUT)
    sys.exit(0)
