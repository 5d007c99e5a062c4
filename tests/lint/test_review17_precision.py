"""The seventeenth session's review (a helper who tried to break the session's three checks:
GMLP015 following a copy into a helper of the file that marks it, GMLP032 taking a gradient
overwritten unused for a dropped one, GMLP053 a copy of main_grad bound back), kept as files
under ``fixtures/review17`` with a comment on top of each saying what the code is, what was
expected, and what the review changed:

* ``fa-*``: correct code the first versions flagged (a container rebound between the store
  and the call, another key of a dict or list, a helper resolving the Parameter itself, a
  test's own Parameter, a gradient cast or viewed before it is added, a ``match`` before a
  test of the same value, a scratch copy swapped in and restored, a helper handing back the
  buffer); each must now stay clean of the reviewed rules;
* ``known-fa-*``: correct code still flagged, named on the rules' pages (a helper's mark
  under a test of an argument; the flag set in place on a test's own new Parameter, reported
  before this session too);
* ``hit-*`` / ``miss-*``: buggy code of the reviewed kinds (odd syntax among it), caught or
  left a miss.
"""

from __future__ import annotations

from .review_cases import review_tests

REVIEWED = frozenset({"GMLP015", "GMLP032", "GMLP053"})
CASES = "review17"

# file -> the codes reported on it (each once); files not named here report nothing
EXPECTED = {
    "known-fa-GMLP015-helper-marks-only-when-fused.py": {"GMLP015", "GMLP032"},
    "known-fa-GMLP015-unit-test-fresh-param.py": {"GMLP015"},
    "hit-GMLP015-deep-expression.py": {"GMLP015"},
    "hit-GMLP015-keyword-helper-method.py": {"GMLP015"},
    "hit-GMLP015-loop-var-over-container.py": {"GMLP015"},
    "hit-GMLP015-odd-syntax-no-crash.py": {"GMLP015"},
    "hit-GMLP015-tuple-unpacked-copy.py": {"GMLP015"},
    "hit-GMLP032-overwritten-by-dummy.py": {"GMLP003", "GMLP032", "GMLP051"},
    "hit-GMLP053-mtp-embedding-reduce.py": {"GMLP053"},
    "hit-GMLP053-odd-syntax-no-crash.py": {"GMLP053"},
}
(
    test_every_expectation_names_a_case,
    test_case_reports_the_recorded_codes,
    test_correct_code_is_clean_of_the_reviewed_rules,
) = review_tests(CASES, EXPECTED, REVIEWED)
