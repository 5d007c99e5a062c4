"""The twentieth session's review (a helper who tried to break the session's checks: GMLP062's
mode whose weight gradient goes nowhere, GMLP063's main_grad fallback, GMLP064's `.grad` kept
after the move, GMLP036's returned choice after a hand-off, GMLP051 on a `.grad` buffer,
the conditional-expression provenance, the new file triggers), kept as files under
``fixtures/review20`` with a comment on top of each saying what it is:

* ``fa-*``: correct code; the first versions flagged twelve (an input or bias gradient taken
  for the weight's in a returned choice or a None arm; a frozen LoRA / int8 base, an expert
  with no tokens or another stream's wgrad taken for a dropped mode; a fallback converted and
  handed back; a free decided by the same local as the add; Transformer Engine's
  `_get_weight_tensors` list taken for copies), all mended; each must stay clean of the
  reviewed rules;
* ``known-fa-*``: correct code still flagged (a scratch stand-in scaled in place; a copy
  arm whose later test rules it out);
* ``hit-*`` / ``miss-*``: buggy code of the reviewed kinds (odd syntax among it: CRLF, tabs,
  walrus, ``match``, ``async``, nested conditional expressions), caught or left a miss.
"""

from __future__ import annotations

from .review_cases import review_tests

REVIEWED = frozenset(
    {
        "GMLP015",
        "GMLP023",
        "GMLP030",
        "GMLP036",
        "GMLP037",
        "GMLP051",
        "GMLP062",
        "GMLP063",
        "GMLP064",
    }
)
CASES = "review20"

# file -> the codes reported on it (each once); files not named here report nothing
EXPECTED = {
    # correct for the rules it probed (GMLP063, GMLP036); its helper's `mm(out=buf)` over
    # main_grad in a file that never asks is a true GMLP016 since the twenty-sixth session
    # (a product into main_grad is judged whatever the function's name)
    "fa-103-odd-tabs.py": {"GMLP016"},
    "fa-te-dequantized-weight-list.py": {"GMLP019", "GMLP035"},
    "hit-011-062-zbv-put-lost.py": {"GMLP062"},
    "hit-012-062-ifexp-lost.py": {"GMLP062"},
    "hit-028-063-paddle-fallback-dropped.py": {"GMLP063"},
    "hit-029-063-two-bindings-dropped.py": {"GMLP063"},
    "hit-050-064-free-under-sync.py": {"GMLP064"},
    "hit-051-064-early-return.py": {"GMLP064"},
    "hit-065-036-colossal-returned-choice.py": {"GMLP036"},
    "hit-075-051-grad-accum-and-return.py": {"GMLP051"},
    "hit-084-prov-main-grad-on-choice.py": {"GMLP030"},
    "hit-085-prov-ctx-choice-flag.py": {"GMLP030"},
    "hit-101-odd-async-lambda.py": {"GMLP062"},
    "hit-102-odd-crlf.py": {"GMLP062", "GMLP064"},
    "hit-104-odd-nested-ifexp-star.py": {"GMLP064"},
    "hit-113-064-nnscaler-triggered.py": {"GMLP064"},
    "hit-114-051-out-grad-triggered.py": {"GMLP051"},
    "hit-115-063-paddle-gemm-named.py": {"GMLP063"},
    "known-fa-024-063-scale-in-place-scratch.py": {"GMLP063"},
    "known-fa-081-prov-frozen-quantized.py": {"GMLP030"},
    "miss-076-051-out-grad-returned.py": {"GMLP051"},
}
(
    test_every_expectation_names_a_case,
    test_case_reports_the_recorded_codes,
    test_correct_code_is_clean_of_the_reviewed_rules,
) = review_tests(CASES, EXPECTED, REVIEWED)
