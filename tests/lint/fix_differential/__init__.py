"""A differential-execution fuzz of gmlp-lint's fixes that paste a name or an expression
read in one place at another (written on 2026-12-06 by a helper that tested the linter as a
black box; tests/lint/test_fix_differential.py runs a seeded, bounded set).

Fixes under test:
  * GMLP001 "gate on the op-level flag": `if accumulate:` -> `if op.accumulate_into_main_grad:`
  * GMLP007 / GMLP001 "read it from the other weight":
        getattr(weight, "zero_out_wgrad", False) -> getattr(fc1_weight, ...)
  * the origin_weight twin:
        getattr(weight, "overwrite_main_grad", False) -> getattr(origin_weight, ...)

Each mutant is a seed template with random binding / mutating statements pasted
into holes and random compound wrappers around regions.  The generator renders
three texts from the same structure:
  orig   - what the linter sees,
  manual - the fix as promised (used to recognise the linter's edit),
  instr  - the manual fix, instrumented (see ORACLES below).
When the linter's fix output equals `manual`, `instr` is executed over many
random stub inputs, and the oracle helpers raise/record violations.

ORACLES (exact, executed; nothing hard-coded):
  GMLP001: the read `B.attr` in the flag assignment becomes `_rec(B, attr)`,
    which records (object B, value) and the flag's whole right-hand side is
    wrapped in `_tag(...)`, which returns a truthiness-preserving token that
    carries the (object, value) of the read made while computing it.  Copies
    of the flag keep the token.  The rewritten test becomes
    `_chk(lambda: FLAG, lambda: B, attr)`: it evaluates the fixed test's
    expression exactly where the fix puts it and requires (a) no exception,
    (b) if the original test's flag value is a token: same object (`is`) and
    equal attribute value as at that token's read; (c) otherwise (flag came
    from another assignment, e.g. `accumulate = False`): same object and value
    as the most recent executed read (if none was executed: "unverifiable").
  GMLP007: `hasattr(fc1_weight, ...)` becomes `_rec7(fc1_weight)` (records the
    object); the edited argument becomes `_chk7(lambda: fc1_weight)`: must not
    raise and must be the very object of the most recent hasattr check.
  origin twin: every binding of origin_weight in the template is recorded
    with its textual position (above / below the edit); at the edit
    `_chkow(lambda: origin_weight)` must not raise and must be the object of
    the most recent recorded binding, which must be one textually above.
In all cases the original program and the instrumented fixed program are both
run; a violation is only counted if the original program reached the same test
(i.e. the check executes inside the fixed program).  Also checked: fixed text
compiles; a second fix pass does not change it; the edit is exactly the
promised one (otherwise "unexpected-edit").

The parts: templates.py (seed programs), snippets.py (what is pasted into them and the
wrappers put around regions), mutants.py (the seeded generator), runtime.py (stub objects
and the oracle helpers the instrumented text calls), oracle.py (fixing, running both
versions, the verdict).
"""
