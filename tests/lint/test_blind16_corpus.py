"""The sixteenth blind corpus (variant_corpus_blind16.py, 16 development variants, and
variant_corpus_blind16_heldout.py, 8 held out) written by someone who read neither the rules
nor their tests (only CONTRACT.md, the two seed reports and issue #19's class list), from
code of frameworks outside the PyTorch Megatron family: PaddlePaddle's PaddleFleet (its own
`main_grad`, `grad_added_to_main_grad` and backward-hook bookkeeping) and Paddle's
zero-bubble `WeightGradStore`, and ServiceNow's Fast-LLM (`grad_buffer` in main_grad's
place, `param_grad_is_zero` in the overwrite switch's), the third variant of each class held
out as written. Sources with commits are in the corpus module's docstring; where a class had
no grounding there (no CUDA-graph replay touching main_grad, no `backward_dw` class
hierarchy, no `overwrite_main_grad`), the variants use the nearest mechanism the sources have.

Blind, with the rules of b01ecdd (the seventeenth session's start) and of ea6d598 (after
the session's three checks, written before this corpus existed): **3 of 24** both times
(development 2 of 16, held-out 1 of 8). The other frameworks' idioms are where the rules
transfer worst: Paddle's `paddle.matmul(..., transpose_x=True)` and `PyLayer`, Fast-LLM's
buffers under other names. One held-out twin carries a finding (GMLP008, a rule older than
the session), not judged: the held-out part is not read.

Then one development miss was read: PaddleFleet's FP8 weight-gradient path setting
`weight.grad_added_to_main_grad = hasattr(weight, "grad_added_to_main_grad")` beside the real
gradient it hands back. Such an assignment is now a mark for every rule that reads marks
(`wgrad.marked_subject`; no file at the heads of the 33 mirrors spells it on anything but
`ctx`), and GMLP032 reports it: development 3 of 16.

The eighteenth session read a second: PaddleFleet's expert path adding the weight gradient into
main_grad, marking under `hasattr`, then binding `grad_weight = dummy if hasattr(...) else
wgrad.astype(dtype)` (class 7: the seed's choice in a conditional expression). GMLP033 now
follows a hand-off through a local bound to the gradient or to a choice with it in an arm,
and takes `astype` / `cast` as conversions. And a third: Paddle's zero-bubble linear handing
its autograd function `self.weight.astype(input.dtype)` (a new tensor, whatever the dtype),
whose backward restores it with `ctx.saved_tensor()` and hands it to the file's wgrad helper,
which reads `weight.main_grad`: GMLP037 now takes `astype` / `cast` for copies, Paddle's
`saved_tensor()` for the saved tensors, and a parameter handed on to a helper of the file
that reads its main_grad (one level). A fourth: a forward rebinding `weight = weight if
weight.dtype == input.dtype else weight.astype(input.dtype)` before reading its main_grad:
GMLP015 takes a conditional expression keeping the weight in one arm and copying it in the
other. A fifth: PaddleFleet's shared expert returning `paddle.matmul(hidden_states, do1,
transpose_x=True)` (w1's and w2's weight gradients, both) after
`paddle._C_ops.fused_linear_param_grad_add(hidden_states, do1, w1.main_grad, None, True,
False)` accumulated the same products: GMLP051 now takes a returned product as it is
computed, a kernel named for adding a parameter's gradient for a GEMM into the buffer it is
handed, and no longer counts `None` / `True` / `False` among a GEMM's operands. Development
7 of 16; held out (still not read) 2 of 8:
a held-out variant is now caught by GMLP015, which takes the same copies.

The nineteenth session read three more, each taken for its class: Fast-LLM's
`torch.mm(lhs, rhs, out=weight.grad_buffer)` where the function's other branches hand that
buffer computed switches (`accumulate=not param_get_and_unset_is_zero(weight)`, `beta=beta`):
GMLP016 takes a computed switch for the function's own choice; PaddleFleet's bookkeeping
guard narrowed with `and not getattr(weight, "is_expert_param", False)`, its `else` handing
back None: GMLP005 reports a condition beside the flag test that is not when main_grad was
written; Paddle's zero-bubble backward with the arms of `compute() if WeightGradStore.enabled
else WeightGradStore.put(...)` swapped: GMLP023 reads a conditional expression's arms and
reports a hand-off where the receiving store's own switch says it is off. Development 10 of
16; held out (still not read) 2 of 8, unchanged.

``OUTCOME`` pins every variant's result with the rules now. ``python -m
tests.lint.test_blind16_corpus`` prints the table.
"""

from __future__ import annotations

import sys

from .blind_outcomes import Outcomes, print_split_tables, split_corpus_tests
from .variant_corpus_blind16 import VARIANTS as DEVELOPMENT
from .variant_corpus_blind16_heldout import VARIANTS as HELD_OUT

VARIANTS = DEVELOPMENT + HELD_OUT

OUTCOME: Outcomes = {
    # -- development (blind: measured before anyone who writes rules read it)
    "blind16-paddlefleet-shared-expert-ctx-fp8-weight": (
        "near",
        # the hook fired through the restored copy (line 34) since the twenty-fifth session
        (("GMLP030", 28), ("GMLP030", 31), ("GMLP030", 34)),
        (),
    ),
    "blind16-paddle-zero-bubble-cast-weight": ("caught", (("GMLP037", 70),), ()),
    "blind16-paddle-zero-bubble-return-main-grad": ("caught", (("GMLP031", 65),), ()),
    "blind16-paddlefleet-linear-forward-weight-copy": ("caught", (("GMLP015", 7),), ()),
    "blind16-paddlefleet-linear-fp8-wgrad-flag": ("caught", (("GMLP032", 32),), ()),
    "blind16-paddlefleet-shared-expert-real-grad-returned": (
        "caught",
        (("GMLP051", 48), ("GMLP051", 48)),
        (),
    ),
    # GMLP016: the sibling branches' computed switches decide grad_buffer's mode
    "blind16-fastllm-linear-mm-out-grad-buffer": ("caught", (("GMLP016", 29),), ()),
    "blind16-paddlefleet-kitchen-gemm-no-accumulate": ("missed", (), ()),
    "blind16-fastllm-accumulate-hook-keeps-grad": ("missed", (), ()),
    # GMLP005: the bookkeeping's guard also asks is_expert_param, its else hands back None
    "blind16-paddlefleet-linear-expert-no-dummy": ("caught", (("GMLP005", 37),), ()),
    "blind16-paddle-weight-grad-store-flush-clears": ("missed", (), ()),
    # GMLP023: the hand-off runs where `WeightGradStore.enabled` says the store is off
    "blind16-paddle-split-bw-matmul-swapped-store": ("caught", (("GMLP023", 55),), ()),
    "blind16-paddlefleet-linear-dummy-on-wgrad-compute": ("caught", (("GMLP005", 38),), ()),
    "blind16-paddlefleet-linear-expert-real-or-dummy": ("caught", (("GMLP033", 55),), ()),
    "blind16-paddlefleet-expert-down-main-grad-local": ("caught", (("GMLP063", 8),), ()),
    "blind16-paddlefleet-shared-expert-skip-none-main-grad": ("missed", (), ()),
    # -- held out (blind: measured at the same time, not read)
    "blind16-paddlefleet-shared-expert-caller-fp8": ("missed", (), ()),
    "blind16-paddlefleet-linear-backward-weight-copy": ("caught", (("GMLP015", 14),), ()),
    "blind16-fastllm-chunk-weight-unzeroed": ("missed", (), ()),
    "blind16-paddle-grad-weight-fn-assign": ("missed", (), ()),
    "blind16-paddlefleet-linear-flag-value-guard": ("caught", (("GMLP049", 37),), ()),
    "blind16-paddle-split-bw-matmul-cache-rebound": ("missed", (), ()),
    "blind16-paddlefleet-linear-sp-return-gated": ("missed", (), ()),
    "blind16-paddlefleet-linear-no-get-main-grad": ("missed", (), (("GMLP008", 37),)),
}

test_corpus_shape, test_variant_outcome_and_findings_are_the_recorded_ones = split_corpus_tests(
    DEVELOPMENT, HELD_OUT, OUTCOME
)


if __name__ == "__main__":
    print_split_tables(DEVELOPMENT, HELD_OUT)
    sys.exit(0)
