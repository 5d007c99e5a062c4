"""The sixteenth session's review (a helper who tried to break GMLP030's rebinding check and
the new GMLP060), kept as files under ``fixtures/review16`` with a comment on top of each
saying what the code is and what was expected:

* ``fa-*``: correct code the first versions flagged (a restored name that never held the
  Parameter; a restore on another path, after ``continue``; a ``del`` or a tuple store taken
  for a read; an unrelated ``wait()``; a producer that asks, then writes and marks); each
  must now stay clean of the reviewed rules;
* ``hit-*`` / ``miss-*``: buggy code of the reviewed kinds, caught or left a miss (the misses
  are named in each rule's "Not seen").
"""

from __future__ import annotations

from .review_cases import review_tests

REVIEWED = frozenset({"GMLP030", "GMLP060", "GMLP061"})
CASES = "review16"

# file -> the codes reported on it (each once); files not named here report nothing
EXPECTED = {
    "hit-GMLP060-call-and-restore-in-with-blocks.py": {"GMLP060"},
    "hit-GMLP060-guarded-read.py": {"GMLP060"},
}
(
    test_every_expectation_names_a_case,
    test_case_reports_the_recorded_codes,
    test_correct_code_is_clean_of_the_reviewed_rules,
) = review_tests(CASES, EXPECTED, REVIEWED)
