"""The twenty-first session's review (a helper who tried to break the session's checks:
GMLP065's W pass gated on a window switch, GMLP017 on a tensor's post-hook list called as
one, GMLP032's bookkeeping helper that marks and returns the gradient it was handed,
GMLP030's copy handed to a weight-gradient store, GMLP050's fetch over a listed few of the
parameters an op is handed), kept as files under ``fixtures/review21`` with a comment on
top of each saying what it is:

* ``fa-*``: correct code; the first versions flagged all 29 (a pass run inside the
  window through another method, a callback, a table, ``getattr`` or a ``@contextmanager``;
  another object's attribute of the same name; hook-list predicates, getters and
  teardowns, a ``.grad`` set before the hooks or through a helper; a caller's dummy handed
  to a helper that returns it or None; a mark and a return under opposite tests; the FP8
  input or gathered output gradient handed to the store beside the weight; biases, a
  parameter fetched on its own, and calls that are no fused op), all mended; each must stay
  clean of the reviewed rules; ``fa-054`` is contrived (a ``finally`` return) and reports
  another rule's finding;
* ``known-fa-*``: correct code still flagged (a frozen parameter the op is handed);
* ``ok-*``: correct code the first versions left alone;
* ``hit-*`` / ``miss-*``: buggy code of the reviewed kinds (odd syntax among it: CRLF, tabs,
  walrus, ``match``, ``async``, semicolons), caught or left a miss.
No input crashed the linter.
"""

from __future__ import annotations

from .review_cases import review_tests

REVIEWED = frozenset({"GMLP017", "GMLP030", "GMLP032", "GMLP050", "GMLP065"})
CASES = "review21"

# file -> the codes reported on it (each once); files not named here report nothing
EXPECTED = {
    "fa-054-032-finally-overrides-return.py": {"GMLP006"},
    "hit-007-065-dualpipe-gate.py": {"GMLP065"},
    "hit-011-065-try-finally-tabs-crlf.py": {"GMLP065"},
    "hit-013-065-async-methods.py": {"GMLP065"},
    "hit-017-065-one-line-gate.py": {"GMLP065"},
    "hit-018-065-semicolon-window.py": {"GMLP065"},
    "hit-026-017-msamp-swapped.py": {"GMLP017"},
    "hit-027-017-other-name-swapped.py": {"GMLP017", "GMLP035"},
    "hit-031-017-walrus-crlf.py": {"GMLP017"},
    "hit-045-032-fastmoe-mark-above-return.py": {"GMLP032"},
    "hit-048-032-setattr-mark-tabs.py": {"GMLP032"},
    "hit-049-032-tuple-kwonly.py": {"GMLP032"},
    "hit-050-032-loop-over-experts.py": {"GMLP032"},
    "hit-051-032-nested-helper.py": {"GMLP032"},
    "hit-064-030-store-gets-quantized-weight.py": {"GMLP030", "GMLP037"},
    "hit-065-030-keyword-arg.py": {"GMLP030"},
    "hit-068-030-walrus-then-name.py": {"GMLP030", "GMLP037"},
    "hit-073-030-tabs-weightmat.py": {"GMLP030"},
    "hit-085-050-megablocks-glu.py": {"GMLP050"},
    "hit-089-050-inline-setattr-crlf.py": {"GMLP050"},
    "hit-090-050-attribute-chain-owner.py": {"GMLP050"},
    "known-fa-083-050-frozen-v1.py": {"GMLP050"},
    "miss-030-017-attribute-chain.py": {"GMLP035"},
    "miss-066-030-inside-partial.py": {"GMLP037"},
    "miss-070-030-store-alias.py": {"GMLP037"},
}
(
    test_every_expectation_names_a_case,
    test_case_reports_the_recorded_codes,
    test_correct_code_is_clean_of_the_reviewed_rules,
) = review_tests(CASES, EXPECTED, REVIEWED)
