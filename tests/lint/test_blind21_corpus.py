"""The twenty-first blind corpus (variant_corpus_blind21.py, 16 development variants, and
variant_corpus_blind21_heldout.py, 8 held out) written by someone who read neither the rules
nor their tests (only CONTRACT.md, the two seed reports and issue #19's class list), and did
not run the linter, from four repositories no earlier corpus used: OpenSQZ MegatronApp (its
Megatron-core fork: the linear's fused wgrad, DDP's backward hook, Megatron-FSDP's gradient
bookkeeping, CUDA-graph replay, Mamba and shared-expert layers under delayed wgrad),
ChenQiaoling00 Seq1F1B (a Megatron fork's linear and legacy DDP hook), axonn-ai axonn (its
asynchronous linear with deferred weight-gradient accumulation) and NVIDIA-NeMo RL (the
Megatron policy worker's setup). Sources with commits are in the corpus modules' docstrings;
twins adapted where the real code lacks a feature say so.

Blind, with the rules of the session's start (257db99): **6 of 24** (development 6 of 16,
held-out **0 of 8** and 1 near). After the session's checks (GMLP066, GMLP067, GMLP068, and
GMLP016 / GMLP001 / GMLP040 no longer reporting three development twins): development 8 of
16, held-out 0 of 8 and 1 near (not read).

``OUTCOME`` pins every variant's result with the rules now. ``python -m
tests.lint.test_blind21_corpus`` prints the table.
"""

from __future__ import annotations

import sys

from .blind_outcomes import Outcomes, print_split_tables, split_corpus_tests
from .variant_corpus_blind21 import VARIANTS as DEVELOPMENT
from .variant_corpus_blind21_heldout import VARIANTS as HELD_OUT

VARIANTS = DEVELOPMENT + HELD_OUT

OUTCOME: Outcomes = {
    # -- development (blind: measured before anyone who writes rules read it)
    "axonn_async_linear_defers_wgrad_to_gathered_weight": ("missed", (), ()),
    "megatronapp_fsdp_update_main_grads_sets_model_param_grad": ("missed", (), ()),
    "axonn_linear_forward_casts_weight_before_async_linear": ("missed", (), ()),
    "megatronapp_fsdp_meta_reset_params_not_remapped": ("missed", (), ()),
    "megatronapp_linear_flag_set_on_unfused_path": ("caught", (("GMLP032", 80),), ()),
    "seq1f1b_linear_fused_path_returns_real_wgrad": ("caught", (("GMLP051", 49),), ()),
    "megatronapp_fsdp_grad_acc_always_copies": ("caught", (("GMLP016", 16),), ()),
    "seq1f1b_legacy_ddp_hook_copies_grad": ("caught", (("GMLP016", 44),), ()),
    "megatronapp_cudagraph_replay_drops_flag_restore": ("missed", (), ()),
    "megatronapp_ddp_hook_ignores_grad_added_flag": ("missed", (), ()),
    "megatronapp_shared_experts_backward_dw_only_when_overlapped": (
        "caught",
        (("GMLP067", 36),),
        (),
    ),
    "megatronapp_mamba_mixer_without_backward_dw": ("missed", (), ()),
    "seq1f1b_linear_returned_wgrad_on_accumulate_flag": ("caught", (("GMLP002", 32),), ()),
    "megatronapp_linear_dummy_and_flag_on_accumulate": ("caught", (("GMLP002", 39),), ()),
    "megatronapp_fsdp_main_grad_bound_before_bucket_freed": ("missed", (), ()),
    "nemo_rl_peft_adapters_attached_after_ddp_wrap": ("caught", (("GMLP068", 37),), ()),
    # -- held out (not read)
    "seq1f1b_embedding_allreduce_on_fp32_copy": ("missed", (), ()),
    "megatronapp_cudagraph_capture_rebinds_main_grad": ("missed", (), ()),
    "megatronapp_cudagraph_groundtruth_flag_forced_true": ("missed", (), ()),
    "axonn_deferred_accumulate_overwrites_main_grad": (
        "missed",
        (("GMLP019", 14),),
        (("GMLP019", 14),),
    ),
    "megatronapp_zero_grad_buffer_resets_flag_under_cuda_graph": ("missed", (), ()),
    "megatronapp_te_grouped_mlp_backward_dw_skips_fc1": ("near", (("GMLP014", 14),), ()),
    "megatronapp_cudagraph_placeholder_on_local_fusion_flag": ("missed", (), ()),
    "nemo_rl_quant_worker_fusion_check_defaults_off": ("missed", (), ()),
}

test_corpus_shape, test_variant_outcome_and_findings_are_the_recorded_ones = split_corpus_tests(
    DEVELOPMENT, HELD_OUT, OUTCOME
)


if __name__ == "__main__":
    print_split_tables(DEVELOPMENT, HELD_OUT)
    sys.exit(0)
