"""The thirteenth session's review (a helper who tried to break GMLP056, GMLP057, GMLP058,
GMLP015's saved copies and dereferenced weak references, GMLP030's lookup on the saved
operand, GMLP038's inverted predicate, GMLP016's conditional ``out=`` and GMLP001/002's
definition anchor), kept as files under ``fixtures/review13`` with the reviewer's comment on
top of each saying what the code is and what was expected:

* ``fa-*``: correct code the first versions flagged (GMLP058 giving up its path search and
  reporting, a reference model's backward, a teardown helper; GMLP056 on a repeated local
  test, frozen weights, two loops; GMLP057 behind `weight.requires_grad`, a subscripted or
  local switch, `is True`; GMLP015 on an offload swap and a value snapshot; GMLP030 on a
  Parameter saved itself; GMLP038 on a negated disable switch); each must now stay clean of
  the reviewed rules;
* ``miss-*``: buggy code of the reviewed kinds; the table records which are caught (the
  others are left misses, named in each rule's "Not seen").
"""

from __future__ import annotations

from .review_cases import review_tests

REVIEWED = frozenset(
    {
        "GMLP001",
        "GMLP002",
        "GMLP015",
        "GMLP016",
        "GMLP030",
        "GMLP038",
        "GMLP056",
        "GMLP057",
        "GMLP058",
    }
)
CASES = "review13"

# file -> the codes reported on it (each once); files not named here report nothing
EXPECTED = {
    # other rules on the reviewer's correct code: `.grad =` without reading it (GMLP035),
    # main_grad handed through the saved tensors (GMLP034), and GMLP019, which like GMLP056
    # before its mend does not know that a local tested twice answers the same
    "fa-GMLP056-frozen-weights.py": {"GMLP035"},
    "fa-GMLP056-repeated-local-test.py": {"GMLP019", "GMLP035"},
    "fa-GMLP056-two-loops.py": {"GMLP035"},
    "fa-GMLP057-weight-requires-grad-guard.py": {"GMLP034"},
    # left a miss: the hooks fire before the work and the work still runs (GMLP019 reports
    # that path for another reason)
    "miss-GMLP056-fire-then-work.py": {"GMLP019", "GMLP035"},
    # caught since the review: a fetch by `get_main_grad()`, a backward through a chain
    "miss-GMLP057-get-main-grad.py": {"GMLP057"},
    "miss-GMLP058-call-receiver-backward.py": {"GMLP058"},
}
(
    test_every_expectation_names_a_case,
    test_case_reports_the_recorded_codes,
    test_correct_code_is_clean_of_the_reviewed_rules,
) = review_tests(CASES, EXPECTED, REVIEWED)
