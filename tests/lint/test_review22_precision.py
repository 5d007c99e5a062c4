"""The twenty-second session's review (a helper who tried to break the session's checks:
helpers of the file followed for writes, reads and books in GMLP003, 005, 007, 015, 017,
032 and 051; GMLP046's positive existence test and dropped fetch; GMLP050's TE base and
own-parameter fetches; GMLP016's wrapper handed main_grad; GMLP032's mark on the None side
of a conditional output; the GMLP031, GMLP012 and GMLP014 false-alarm mends), kept as files
under ``fixtures/review22`` (79 cases) with a line on top naming each:

* ``fa-*``: correct code; the first versions flagged 13 of them with the reviewed rule
  (a defensive helper that may not write, read as GMLP051's write; a class fetching its
  children besides its own parameters; a helper falling back to ``.grad``; a wrapper switch
  every call hands a literal; a positive existence test where the attribute surely exists;
  ``parameters_split`` and frozen weights under a TE base), mended but for the three kept as
  ``known-fa-*`` (an ``empty`` dummy zeroed later under a ``zero_out_wgrad`` test, an older
  GMLP003 limit; a guarded read of a scratch clone, GMLP015; a bare ``get_main_grad()`` of
  the file's own getter that binds main_grad itself, GMLP046);
* ``hit-*`` (one correct case the reviewer judged a real GMLP003 bug) and ``miss-*``: buggy
  code of the reviewed kinds, caught or left a miss; ``amb-*``: judged either way.
No input crashed the linter.
"""

from __future__ import annotations

from .review_cases import review_tests

REVIEWED = frozenset(
    {
        "GMLP003",
        "GMLP005",
        "GMLP007",
        "GMLP012",
        "GMLP014",
        "GMLP015",
        "GMLP016",
        "GMLP017",
        "GMLP031",
        "GMLP032",
        "GMLP046",
        "GMLP050",
        "GMLP051",
    }
)
CASES = "review22"

# file -> the codes reported on it (each once); files not named here report nothing
EXPECTED = {
    "amb-32b-gmlp016-wrapper-switch-fuse-flag.py": {"GMLP016"},
    "fa-38-gmlp031-grad-in-else.py": {"GMLP035"},
    "fa-38b-gmlp031-grad-not-alias.py": {"GMLP035"},
    "hit-35-gmlp003-ifexp-out-dummy-skips-zero-out.py": {"GMLP003"},
    "known-fa-02b-gmlp003-empty-then-zeros-like.py": {"GMLP003"},
    "known-fa-16-gmlp015-master-param-helper.py": {"GMLP015"},
    "known-fa-23-gmlp046-bare-fetch-other-method-binds.py": {"GMLP046"},
    "miss-03-gmlp032-helper-reads-only.py": {"GMLP032"},
    "miss-05-gmlp007-helper-fc1-flag.py": {"GMLP007"},
    "miss-08b-gmlp005-helper-narrowed-guard.py": {"GMLP005"},
    "miss-09-gmlp003-helper-empty-dummy.py": {"GMLP003"},
    "miss-11-gmlp051-helper-then-real.py": {"GMLP051"},
    "miss-14-gmlp015-rebind-then-helper.py": {"GMLP015"},
    "miss-14b-gmlp015-rebind-helper-kw.py": {"GMLP015"},
    "miss-18-gmlp017-helper-only-main-grad.py": {"GMLP017"},
    "miss-18b-gmlp017-helper-reads-flag.py": {"GMLP017"},
    "miss-24-gmlp046-underscore-drop.py": {"GMLP046"},
    "miss-25-gmlp046-dunder-dict-positive.py": {"GMLP046"},
    "miss-25b-gmlp046-hasattr-and-none.py": {"GMLP046"},
    "miss-25c-gmlp046-bare-in-if.py": {"GMLP046"},
    "miss-29-gmlp050-lnlinear-misses-weight.py": {"GMLP050"},
    "miss-31-gmlp050-recurse-false-only.py": {"GMLP050"},
    "miss-34-gmlp016-wrapper-copy.py": {"GMLP016"},
    "miss-34c-gmlp016-wrapper-kw-local.py": {"GMLP016"},
    "miss-36-gmlp032-ifexp-mark-ungated.py": {"GMLP032"},
    "miss-39-gmlp031-grad-under-positive.py": {"GMLP031", "GMLP035"},
    "miss-39b-gmlp031-helper-returns-out.py": {"GMLP031"},
    "miss-40c-gmlp012-te-gemm.py": {"GMLP012"},
    "miss-41b-gmlp014-display-run-and-freeze.py": {"GMLP014"},
}
(
    test_every_expectation_names_a_case,
    test_case_reports_the_recorded_codes,
    test_correct_code_is_clean_of_the_reviewed_rules,
) = review_tests(CASES, EXPECTED, REVIEWED)
