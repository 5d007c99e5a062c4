"""The eleventh blind corpus (variant_corpus_blind11.py, 16 development variants, and
variant_corpus_blind11_heldout.py, 8 held out) written by someone who read neither the rules
nor their tests (only CONTRACT.md, the two seed reports and issue #19's class list), from
the heads of Transformer Engine, Megatron-LM and four repositories not used by earlier
corpora (FlagOpen/FlagScale, alibaba/Megatron-LLaMA, microsoft/Megatron-DeepSpeed,
hpcaitech/ColossalAI), the third variant of each class held out before anything was
measured.

Blind, with the rules at 4c22bb6 (the twelfth session's start): **12 of 24 caught**
(development 10 of 16 with 1 near, held-out 2 of 8). After the session's rules and their
review (e95003c, which were written from corpus 10 and from this corpus's development
part): development 14 of 16, **held-out 2 of 8 unchanged** (measured, not read). The
held-out eight were then read (no rule written from them; why each stays missed is in
docs/lint-semantics.md, twelfth session). Since the fifteenth session the held-out
`grad_weight if wgrad_compute else None` is caught (3 of 8): by a check written from blind
corpus 14's development part, 021ai's fork of the same Megatron-LM function, without
looking at this variant again.

Two twins carry findings, both judged true at the heads the twins are taken from
(docs/lint-history-split.toml): GMLP035 on Transformer Engine's GroupedLinear op
``backward_dw`` assigning the popped wgrad over ``.grad``, and GMLP009 on Megatron-LM's
``_ensure_main_grad`` forcing ``overwrite_main_grad`` on.

``OUTCOME`` pins every variant's result with the rules now, so a rule change that moves one
makes these tests fail and the figures get revisited. ``python -m tests.lint.test_blind11_corpus``
prints the table.
"""

from __future__ import annotations

import sys

from .blind_outcomes import Outcomes, print_split_tables, split_corpus_tests
from .variant_corpus_blind11 import VARIANTS as DEVELOPMENT
from .variant_corpus_blind11_heldout import VARIANTS as HELD_OUT

VARIANTS = DEVELOPMENT + HELD_OUT

OUTCOME: Outcomes = {
    # -- development (the first two per class; read, and written from where said)
    # missed blind; caught since: a conditional expression handed to get_dummy_wgrads_for_params
    "blind11-te-opsgl-dummy-on-materialized-weights": ("caught", (("GMLP030", 67),), ()),
    "blind11-te-gl-ddp-bookkeeping-on-saved-weights": ("caught", (("GMLP037", 74),), ()),
    "blind11-mlm-te-ops-basic-linear-rewrapped-weight": ("caught", (("GMLP015", 39),), ()),
    "blind11-mlm-experts-register-fresh-expert-param": ("caught", (("GMLP015", 16),), ()),
    "blind11-mlm-gtp-async-rs-flag-before-add": ("missed", (), ()),
    "blind11-flagscale-aglinear-real-grad-after-fused-write": ("caught", (("GMLP051", 67),), ()),
    # missed blind; caught since: a local that is main_grad or the weight's .grad
    "blind11-llama-fp16-wgrad-matmul-out": ("caught", (("GMLP016", 51),), ()),
    # missed blind; caught since: a gradient hook copying .grad into main_grad
    "blind11-mds-param-hook-copy-into-main-grad": ("caught", (("GMLP016", 25),), ()),
    "blind11-mlm-gtp-finalize-raw-grad-accum-hook": ("caught", (("GMLP017", 25),), ()),
    "blind11-te-opsgl-delay-branch-before-dummy": (
        "caught",
        (("GMLP024", 54), ("GMLP035", 24)),
        (("GMLP035", 24),),
    ),
    "blind11-mlm-tegroupedlinear-backward-dw-config-flag": ("caught", (("GMLP021", 52),), ()),
    # near blind (at the build); since at the method named for the layer
    "blind11-mlm-gdn-backward-dw-out-proj-copy-paste": ("caught", (("GMLP014", 43),), ()),
    "blind11-te-gl-grouped-tensor-dummy-on-local-accumulate": ("caught", (("GMLP001", 71),), ()),
    "blind11-te-fused-grouped-mlp-dummy-condexpr-local-flag": ("caught", (("GMLP001", 43),), ()),
    # left: TE's ops fetch main_grad from Megatron-FSDP themselves (get_main_grad_from_param),
    # so the writer's claim that the shipped code is buggy is not taken up
    "blind11-mlm-shared-experts-fused-swiglu-no-main-grad": ("missed", (), ()),
    "blind11-mlm-experts-ensure-main-grad-hasattr": (
        "caught",
        (("GMLP009", 30), ("GMLP046", 27)),
        (("GMLP009", 30),),
    ),
    # -- held out: measured blind twice (2 of 8, at 4c22bb6 and e95003c), then read
    "blind11-colossalai-wgradstore-view-as-origin": ("missed", (), ()),
    "blind11-te-base-apply-snapshot-after-swap": ("missed", (), ()),
    "blind11-te-opsgl-grouped-tensor-flag-on-delay": ("missed", (), ()),
    "blind11-mlm-drain-embedding-wgrad-copy": ("caught", (("GMLP016", 19),), ()),
    "blind11-mlm-gtp-cascade-raw-hook": ("caught", (("GMLP017", 47),), ()),
    "blind11-colossalai-zbv-fused-accum-wrong-w-pass": ("missed", (), ()),
    # caught since the fifteenth session by GMLP024's dropped dummy, written from blind
    # corpus 14's development part (021ai's fork of this code), not from this variant
    "blind11-mlm-linear-return-grad-on-wgrad-compute": ("caught", (("GMLP024", 65),), ()),
    "blind11-mlm-tefusedmlp-grouped-linear-no-main-grad": ("missed", (), ()),
}

test_corpus_shape, test_variant_outcome_and_findings_are_the_recorded_ones = split_corpus_tests(
    DEVELOPMENT, HELD_OUT, OUTCOME
)


if __name__ == "__main__":
    print_split_tables(DEVELOPMENT, HELD_OUT)
    sys.exit(0)
