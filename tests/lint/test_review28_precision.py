"""The twenty-eighth session's review (a helper who tried to break the session's changes:
GMLP001 left alone on a conditional accumulator input, GMLP016 through a local bound to
main_grad or None, GMLP032 on a mark in an autograd forward, GMLP030 on a detached copy kept
on ctx, GMLP067 on a store popped on one side of a where-it-goes switch, GMLP038 on a store
withheld from the op and a pop's result dropped, GMLP058 on a set-up before a sharding
wrapper and on main_grad given to another module), kept as files under
``fixtures/review28`` with a comment block on top naming each:

* ``fa-*``: correct code; the first versions flagged 21 of them (one in three Transformer
  Engine forks' heads: GMLP058 taking test helpers named ``*fsdp*`` for a sharding wrapper),
  all mended: dummies shaped like a detached copy, main_grad put back on a restored copy,
  helpers named for FSDP, a set-up after the wrap in the same ``if``, the other side of the
  switch popping through ``super()`` or a method or after an early return, an op that
  stores only the unfused work, a store handed on another call or on the delay-on branch,
  an activation store, a class refusing the delay without fusion, stored work handing
  ``.grad`` over itself, a forward that is the deferred wgrad pass, main_grad restored from
  its own backup;
* ``open-fa-*``: correct code flagged at the session's start too (GMLP007 on TE's CPU-offload
  restore reading the flag from the kept Parameter);
* ``ok-*``: correct look-alikes, never flagged (a GMLP035 on TE's own ``.grad =`` idiom is
  the older rule's);
* ``crash-*``: a pop under an ``elif``, on which the first version of GMLP067's new check
  failed (found while rereading the diff);
* ``miss-*``: buggy code of the reviewed kinds, the caught ones pinned below (GMLP001 on
  ``addmm(..., out=main_grad if acc else None)``, which the first version of the exemption
  let through; GMLP016 on a slice assignment through the None-or-main_grad local; GMLP038
  on a dropped pop under Megatron's ``gradient_accumulation_fusion``), the rest listed as
  misses in docs/lint-semantics.md.
"""

from __future__ import annotations

from .review_cases import review_tests

REVIEWED = frozenset(
    {"GMLP001", "GMLP016", "GMLP030", "GMLP032", "GMLP037", "GMLP038", "GMLP058", "GMLP067"}
)
CASES = "review28"

# file -> the codes reported on it (each once); files not named here report nothing
EXPECTED = {
    "crash-GMLP067-pop-under-elif.py": {"GMLP067"},
    "fa-GMLP067-else-pops-in-helper.py": {"GMLP035"},
    "fa-GMLP067-fused-pop-then-early-return.py": {"GMLP035"},
    "miss-GMLP001-addmm-input-and-out-choice.py": {"GMLP001"},
    "miss-GMLP016-slice-assign-through-optional-local.py": {"GMLP016"},
    "miss-GMLP038-dropped-pop-gradient-accumulation-fusion.py": {"GMLP038"},
    "ok-GMLP067-te-ops-pop-then-switch.py": {"GMLP035"},
    "open-fa-GMLP007-main-grad-reattached-to-detached-copy.py": {"GMLP007"},
}
(
    test_every_expectation_names_a_case,
    test_case_reports_the_recorded_codes,
    test_correct_code_is_clean_of_the_reviewed_rules,
) = review_tests(CASES, EXPECTED, REVIEWED)
