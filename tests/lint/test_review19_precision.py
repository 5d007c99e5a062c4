"""The nineteenth session's review (a helper who tried to break the session's extensions:
GMLP016's computed switches and accumulation records, GMLP005's narrowed guard, GMLP023's
conditional-expression hand-offs and the store's off side, GMLP002's delay-mode gate,
GMLP053's copy stashed on ``ctx``), kept as files under ``fixtures/review19`` with a comment
on top of each saying what it is:

* ``fa-*``: correct code (the first versions flagged eleven realistic ones, all mended: a
  switch computed into a local from the test that guards the copy, a NaN fix-up reading the
  buffer it masks, a chunk loop's ``accumulate=i > 0``, a record read and set through an
  alias or two loop variables, a reset before the record, a parameter's
  ``auto_grad_accumulation`` beside a copy into its data, ``needs_input_grad`` / ``trainable``
  / ``is not None`` beside the flag test, ``deferral_limit_reached`` and
  ``split_bw_disabled`` taken for a store's on switch); each must stay clean of the
  reviewed rules;
* ``known-fa-*``: correct code still flagged: ``is_leaf`` beside the flag test, one local
  rebound to another buffer, and GMLP023's and GMLP016's older shapes;
* ``hit-*`` / ``miss-*``: buggy code of the reviewed kinds, caught or left a miss (a
  destination spelled two ways, a record set by ``setattr`` or written through a local view,
  a narrowing in a nested ``if``, the switch read through a local, both arms handing off,
  ``.to(..., copy=True)``, the stash's owner spelled otherwise, ``defer`` in a gate);
* ``crash-*``: odd syntax (walrus, ``match``, ``async``, nested conditional expressions,
  lambdas, continuations); must lint without error.
"""

from __future__ import annotations

from .review_cases import review_tests

REVIEWED = frozenset({"GMLP002", "GMLP005", "GMLP016", "GMLP023", "GMLP053"})
CASES = "review19"

# file -> the codes reported on it (each once); files not named here report nothing
EXPECTED = {
    "crash-odd-nested-ifexp-match-lambda.py": {"GMLP002", "GMLP006", "GMLP018", "GMLP023"},
    "crash-odd-walrus-match-async.py": {"GMLP016"},
    "fa-002-fuse-gate-delay-none.py": {"GMLP024"},
    "hit-002-zb-if-else.py": {"GMLP002", "GMLP003"},
    "hit-002-zb-ifexp.py": {"GMLP002"},
    "hit-005-expert-param.py": {"GMLP005"},
    "hit-005-sequence-parallel.py": {"GMLP005", "GMLP006"},
    "hit-005-shared-embedding.py": {"GMLP005"},
    "hit-016-fastllm-mm.py": {"GMLP016"},
    "hit-016-gemm-accumulate-false.py": {"GMLP016"},
    "hit-016-index-copy-rows.py": {"GMLP016"},
    "hit-016-self-copy.py": {"GMLP016"},
    "hit-023-if-swapped.py": {"GMLP023"},
    "hit-023-ifexp-assign-swapped.py": {"GMLP023"},
    "hit-023-ifexp-swapped.py": {"GMLP023"},
    "hit-023-not-enabled-put.py": {"GMLP023"},
    "hit-053-ctx-clone.py": {"GMLP053"},
    "hit-053-torch-clone-local.py": {"GMLP053"},
    "hit-rec-ctx-spelled.py": {"GMLP016"},
    "hit-rec-other-object.py": {"GMLP016"},
    "known-fa-005-is-leaf.py": {"GMLP005"},
    "known-fa-016-rebound-local.py": {"GMLP016"},
    "known-fa-023-if-then-if.py": {"GMLP023"},
    "known-fa-023-ifexp-none-then-if.py": {"GMLP023"},
    "known-fa-023-match-case.py": {"GMLP023"},
    # (known-fa-053-ctx-clone-copy-back.py: clean since the twenty-eighth session, which
    # reads a copy from main_grad's own snapshot as a restore)
}
(
    test_every_expectation_names_a_case,
    test_case_reports_the_recorded_codes,
    test_correct_code_is_clean_of_the_reviewed_rules,
) = review_tests(CASES, EXPECTED, REVIEWED)
