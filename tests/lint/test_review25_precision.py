"""The twenty-fifth session's review (a helper who tried to break the session's changes:
GMLP067 on a switch that is on, GMLP014 on a flushed layer's sibling, GMLP030 on a hook
fired through a stand-in, GMLP006 on a mark made where main_grad is allocated, GMLP016 /
GMLP031 / GMLP035 in functions named ``*_bwd``, GMLP058 on a set-up whose module is then
replaced), kept as files under ``fixtures/review25`` (66 cases, and two of the session's own:
a ``bool()`` switch before ``super()``, the GEMM whose ``out=`` main_grad is bound back) with
a line on top naming each:

* ``fa-*``: correct code; the first versions flagged 29 of them (an exit before a member's
  flush that another path computes, an identity or eager mode; a base's helper, an explicit
  base call, ``getattr(self, name)``, a frozen layer, a plain router beside the experts; a
  hook unregistered, suspended or queried; a mark where the first gradient is written into
  the fresh buffer, or beside a mark after the write; an optimizer step named
  ``*_fwd_bwd``; a module freed, reused for a reference, compiled, wrapped or set up again
  in a nested block), all mended;
* ``open-fa-*``: correct code still flagged, documented on the rule's page or found at the
  session's start too: two members named ``stage1`` / ``stage2`` taken for a pair (GMLP014),
  and three GMLP016 findings the session's start raised as well (a first write into a
  freshly allocated buffer with ``accumulate=False``; a test harness seeding main_grad);
* ``miss-*``: buggy code of the reviewed kinds: three caught at once (a mark by ``setattr`` or
  in a ``with`` where main_grad is allocated, a ``*_bwd`` writing ``matmul(out=main_grad)``),
  seven more after the review (one-line exits, a switch compared ``== True`` or read by
  ``getattr`` with a false default, a layer run by ``.forward(...)``, a hook fetched by
  ``getattr``, an ``or`` of missing-main_grad tests), the rest left as documented misses
  (each rule's page: a switch in ``bool()`` or ``and`` before members' flushes, siblings
  named otherwise or run through a helper, hooks fired on a list item or through a helper,
  annotated or tuple assignments);
* ``crash-*``: odd inputs (CRLF, tabs, a long line, 3.12 syntax, async one-line bodies):
  none crashed; each reports the findings pinned here.
"""

from __future__ import annotations

from .review_cases import review_tests

REVIEWED = frozenset(
    {"GMLP006", "GMLP014", "GMLP016", "GMLP030", "GMLP031", "GMLP035", "GMLP058", "GMLP067"}
)
CASES = "review25"

# file -> the codes reported on it (each once); files not named here report nothing
EXPECTED = {
    "crash-057-all-crlf.py": {"GMLP006", "GMLP014", "GMLP030"},
    "crash-058-all-tabs.py": {"GMLP006", "GMLP014", "GMLP030"},
    "crash-059-all-huge-line.py": {"GMLP006", "GMLP014"},
    "crash-060-all-py312-syntax.py": {"GMLP006", "GMLP014"},
    "crash-061-all-async-oneliners.py": {"GMLP014"},
    "miss-008-067-switch-compared-to-true.py": {"GMLP067"},
    "miss-009-067-switch-through-getattr.py": {"GMLP067"},
    "miss-020-014-layer-run-via-forward.py": {"GMLP014"},
    "miss-026-030-hook-via-getattr.py": {"GMLP030"},
    "miss-034-006-alloc-test-boolop.py": {"GMLP006"},
    "miss-036-006-mark-via-setattr.py": {"GMLP006"},
    "miss-037-006-mark-in-nested-with.py": {"GMLP006"},
    "miss-044-016-bwd-matmul-out.py": {"GMLP016"},
    "miss-063-067-one-line-if-return.py": {"GMLP067"},
    "miss-064-067-negated-one-line.py": {"GMLP067"},
    "miss-068-067-bool-switch-before-super.py": {"GMLP067"},
    "open-fa-018-014-same-name-digits-different-roles.py": {"GMLP014"},
    "open-fa-030-006-alloc-branch-gemm-then-mark.py": {"GMLP016"},
    "open-fa-033-006-alloc-branch-returns.py": {"GMLP016"},
    "open-fa-038-016-test-harness-fwd-bwd-sentinel.py": {"GMLP016"},
}
(
    test_every_expectation_names_a_case,
    test_case_reports_the_recorded_codes,
    test_correct_code_is_clean_of_the_reviewed_rules,
) = review_tests(CASES, EXPECTED, REVIEWED)
