"""The twenty-ninth session's review (a helper who tried to break the session's changes:
GMLP032 on a mark on the way to a returned weight-gradient product, and its writing loops,
overwrite-only erasures and ``setattr`` put-backs; GMLP019 on a local list of work run now;
GMLP007 on a flag read through a cast and on the mark of a stand-in beside its ``*_og``
Parameter; GMLP031 in a marking weight-gradient helper; GMLP033 at a helper handing back the
gradient it wrote; GMLP038 on the delay handed by position and on a store built in the
``apply`` call), kept as files under ``fixtures/review29`` with a comment line on top naming
each:

* ``fa-*``: correct code; the first versions flagged 12 of them, all mended: an input
  gradient returned beside a weight not spelled as one (``grad_output @ w_t``), a router's
  gradient returned after the experts' loop, their overwrite-only erasure or a skip for
  nothing to write, the flag copied onto the cast before it is read, a helper returning
  main_grad as a GEMM's output buffer (plainly or through a conditional expression), a
  helper handing the gradient back only on its unwritten path or with the write switched
  off, a store built in the call with the delay off; and two flagged at the session's start
  too (an erasure asked through a local holding the flag; a ``while`` loop writing every
  expert);
* ``ok-*``: correct look-alikes, never flagged by the final rules;
* ``hit-*``: buggy code caught;
* ``miss-*``: buggy code: six the first versions lost and the session's start caught (a loop
  that only erases, a loop over a filtered comprehension, an erasure beside a computed
  gradient, a comprehension, generator or unpacked copy of a store), all caught again and
  pinned below; the rest listed as misses in docs/lint-semantics.md (two of them caught by
  the first version of GMLP031, which now asks for a ``backward`` of the file handing the
  helper's result on).
"""

from __future__ import annotations

from .review_cases import review_tests

REVIEWED = frozenset({"GMLP007", "GMLP019", "GMLP031", "GMLP032", "GMLP033", "GMLP038"})
CASES = "review29"

# file -> the codes reported on it (each once); files not named here report nothing
EXPECTED = {
    "hit-GMLP007-flag-from-bf16-cast.py": {"GMLP007"},
    "hit-GMLP007-og-main-grad-mark-on-converted.py": {"GMLP007"},
    "hit-GMLP019-list-call-copy-of-store.py": {"GMLP019"},
    "hit-GMLP032-fallback-marks-then-returns-product.py": {"GMLP032"},
    "hit-GMLP032-setattr-putback-is-no-write.py": {"GMLP008", "GMLP032"},
    "hit-GMLP033-helper-result-bound-to-new-name.py": {"GMLP033"},
    "hit-GMLP038-grandchild-inline-delayed-store.py": {"GMLP038"},
    "hit-GMLP038-positional-delay-override-drops-pop.py": {"GMLP038"},
    "miss-GMLP019-comprehension-copy-of-store.py": {"GMLP019"},
    "miss-GMLP019-generator-over-store-queue.py": {"GMLP019"},
    "miss-GMLP019-unpacked-store-display.py": {"GMLP019"},
    "miss-GMLP032-loop-only-zeroes-empty-experts.py": {"GMLP032"},
    "miss-GMLP032-loop-over-nonempty-experts-in-overwrite-mode.py": {"GMLP032"},
    "miss-GMLP032-overwrite-erasure-drops-computed-wgrad.py": {"GMLP032"},
}
(
    test_every_expectation_names_a_case,
    test_case_reports_the_recorded_codes,
    test_correct_code_is_clean_of_the_reviewed_rules,
) = review_tests(CASES, EXPECTED, REVIEWED)
