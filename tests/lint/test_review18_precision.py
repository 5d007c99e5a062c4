"""The eighteenth session's review (a helper who tried to break the session's four
extensions: GMLP033 through locals and conditional expressions, GMLP037's casts, Paddle's
saved tensors and helpers two calls deep, GMLP015's copy on one arm of a conditional
expression, GMLP051's returned products), kept as files under ``fixtures/review18`` with a
comment on top of each saying what it is:

* ``fa-*``: correct code (the first versions flagged six: a conditional expression returned
  whole, the gradient rebound to None after the write, a copy and the main_grad read on
  exclusive arms of one flag, the product in a returned choice); each must stay clean of the
  reviewed rules;
* ``known-fa-*``: correct code still flagged by GMLP005, a rule older than the session (an
  input gradient set to None read as the weight's missing dummy);
* ``hit-*`` / ``miss-*``: buggy code of the reviewed kinds (odd syntax among it), caught or
  left a miss (nested conditional expressions, ``paddle.cast(g, dt)`` as a function, a walrus
  alias in a return, saved tensors indexed through a local, a cast copy saved in forward; a
  returned product converted was a miss, caught after the review).
"""

from __future__ import annotations

from .review_cases import review_tests

REVIEWED = frozenset({"GMLP015", "GMLP033", "GMLP037", "GMLP051"})
CASES = "review18"

# file -> the codes reported on it (each once); files not named here report nothing
EXPECTED = {
    "hit-015-cast-fn.py": {"GMLP015"},
    "hit-015-getattr-flag.py": {"GMLP015"},
    "hit-015-ifexp-body-copy.py": {"GMLP015"},
    "hit-015-ifexp-clone.py": {"GMLP015"},
    "hit-015-tuple-target.py": {"GMLP015"},
    "hit-033-grad-attr-alias.py": {"GMLP033"},
    "hit-033-iadd-contig.py": {"GMLP033"},
    "hit-033-ifexp-other-flag.py": {"GMLP033"},
    "hit-033-tuple-target.py": {"GMLP033"},
    "hit-033-write-under-if-ifexp-else.py": {"GMLP033"},
    "hit-037-ctx-attr-hasattr.py": {"GMLP037"},
    "hit-037-ifexp-arg.py": {"GMLP037"},
    "hit-037-keyword-helper2.py": {"GMLP037"},
    "hit-037-local-copy.py": {"GMLP037"},
    "hit-037-paddle-cast-fn.py": {"GMLP037"},
    "hit-051-cast-return.py": {"GMLP051"},
    "hit-051-else-no-mark.py": {"GMLP051"},
    "hit-051-paddle.py": {"GMLP016", "GMLP051"},
    "hit-051-starred.py": {"GMLP051"},
    "hit-051-tensor-matmul.py": {"GMLP051"},
    "hit-051-torch-matmul-paren.py": {"GMLP016", "GMLP051"},
    "hit-odd-annassign.py": {"GMLP033"},
    "hit-odd-match.py": {"GMLP033"},
    "known-fa-005-needs-input-grad.py": {"GMLP005"},
    "known-fa-odd-global-nonlocal.py": {"GMLP005"},
}
(
    test_every_expectation_names_a_case,
    test_case_reports_the_recorded_codes,
    test_correct_code_is_clean_of_the_reviewed_rules,
) = review_tests(CASES, EXPECTED, REVIEWED)
