"""The twenty-seventh session's review (a helper who tried to break the session's changes:
GMLP030 on a list of saved tensors handed to TE's dummy-making helper, GMLP015 on a weight
rebound to a padding or aligning helper's result and on TE's state helpers read through
dequantized copies, GMLP002 on a dummy made only under the delay mode, GMLP016 on a reshaped
weight gradient copied over main_grad, GMLP032 on kernels returning the weight gradient,
GMLP038 on stored work taken and never run, GMLP058 on parameters left out of every set-up),
kept as files under ``fixtures/review27`` with a line on top naming each:

* ``fa-*``: correct code; the first versions flagged 12 of them (an ``else`` or a second loop
  or helper setting the quantized parameters up; a set of parameters to ignore, a
  de-duplicating ``seen`` set; Parameters saved and restored themselves; alignment and
  padding helpers of the file that hand the weight back; an ``elif`` making the dummies on
  the immediate path, an immediate path returning early; a dequeued item's callable run by
  the override itself), all mended;
* ``open-fa-*``: correct code flagged at the session's start too (GMLP003 on a dummy helper
  of the file that does zero-fill, GMLP016 on an out-of-place accumulate copied back and on
  a reference oracle of the overwrite row);
* ``ok-*``: correct look-alikes, never flagged;
* ``miss-*``: buggy code of the reviewed kinds, the caught ones pinned below, the rest listed
  as misses in docs/lint-semantics.md;
* ``crash-*``: odd inputs (one-line bodies, CRLF, tabs and a walrus, 3.12 syntax, 60 nested
  ``if``s, odd one-line classes): none crashed; each reports the findings pinned here.
"""

from __future__ import annotations

from .review_cases import review_tests

REVIEWED = frozenset({"GMLP002", "GMLP015", "GMLP016", "GMLP030", "GMLP032", "GMLP038", "GMLP058"})
CASES = "review27"

# file -> the codes reported on it (each once); files not named here report nothing
EXPECTED = {
    "crash-070-GMLP002-crlf.py": {"GMLP002", "GMLP016"},
    "crash-071-GMLP038-tabs-walrus.py": {"GMLP002", "GMLP038"},
    "crash-072-py312-syntax.py": {"GMLP002", "GMLP038"},
    "crash-073-deeply-nested.py": {"GMLP002", "GMLP058"},
    "crash-074-empty-and-odd.py": {"GMLP038"},
    "miss-007-GMLP058-early-continue-quantized.py": {"GMLP058"},
    "miss-045-GMLP016-view-as.py": {"GMLP016"},
    "miss-047-GMLP016-unflatten.py": {"GMLP016"},
    "miss-068-GMLP038-unrelated-pop-hides-dequeue.py": {"GMLP038"},
    "open-fa-039-GMLP003-in-file-dummy-helper-zeroes.py": {"GMLP003"},
    "open-fa-042-GMLP016-out-of-place-accumulate.py": {"GMLP016"},
    "open-fa-043-GMLP016-refimpl-overwrite-oracle.py": {"GMLP016"},
}
(
    test_every_expectation_names_a_case,
    test_case_reports_the_recorded_codes,
    test_correct_code_is_clean_of_the_reviewed_rules,
) = review_tests(CASES, EXPECTED, REVIEWED)
