"""Syntax newer than the running Python (PEP 695 type parameters and ``type`` statements,
PEP 701 f-strings) is valid: every rule's invalid examples, rewritten to use it, give the
findings they give without it, and the compiler's own checks still hold for the rest of
such a file."""

from __future__ import annotations

import sys

import pytest

from gmlp_check.lint import engine
from gmlp_check.lint.parsing import PYTHON
from gmlp_check.lint.registry import all_rules
from gmlp_check.lint.source import SourceError

from .support import ALL_CODES, run_cli, write
from .test_rule_examples import _run

# Each prefix is a module-level head of newer syntax; the example follows it unchanged, so
# its findings move down by the prefix's line count and nothing else.
PREFIXES = {
    "pep695-class": "class Holder[T: object, *Ts, **P](object):\n    value: T\n",
    "pep695-def": "def first[T](items: list[T]) -> T:\n    return items[0]\n",
    "pep695-type": "type Pair[T] = tuple[T, T]\ntype Name = str\n",
    "pep701-f-string": 'names = {"a": 1}\nlabel = f"{names["a"]}"\n',
}
INVALID = [
    pytest.param(rule, example, prefix, id=f"{rule.code}-invalid-{i}-{prefix}")
    for rule in all_rules()
    for i, example in enumerate(rule.invalid)
    for prefix in PREFIXES
]


def _findings(source, example):
    found = engine.lint_source(source, "example.py", ALL_CODES, **_run(example))
    return [(f.code, f.line, f.column) for f in found]


@pytest.mark.parametrize(("rule", "example", "prefix"), INVALID)
def test_an_invalid_example_after_newer_syntax_gives_the_same_findings(rule, example, prefix):
    head = PREFIXES[prefix]
    shift = head.count("\n")
    plain = _findings(example.source, example)
    newer = _findings(head + example.source, example)
    assert plain, "the example itself is reported"
    assert newer == [(code, line + shift, column) for code, line, column in plain]


def test_newer_syntax_inside_the_analysed_code_is_analysed():
    """Type parameters on the class and the method that write main_grad."""
    examples = [e for r in all_rules() if r.code == "GMLP016" for e in r.invalid]
    example = next(e for e in examples if e.source.startswith("def wgrad("))
    body = example.source.replace("def wgrad(", "def wgrad[G](", 1)
    source = "class Layer[T]:\n" + "".join("    " + line + "\n" for line in body.splitlines())
    found = engine.lint_source(source, "example.py", ALL_CODES)
    assert [f.code for f in found] == ["GMLP016"]


@pytest.mark.parametrize("mentions", ["", "# main_grad\n"], ids=["plain", "main_grad"])
def test_what_only_the_compiler_rejects_is_still_an_error_in_a_newer_grammar_file(mentions):
    source = mentions + "class Holder[T]:\n    pass\n\nreturn 1\n"
    expected = "'return' outside function" if sys.version_info < (3, 12) else None
    with pytest.raises(SourceError) as raised:
        engine.lint_source(source, "a.py", ALL_CODES)
    assert "outside function" in raised.value.message
    assert raised.value.line == source.count("\n")  # the line of the return, as written
    if expected is not None:
        assert expected in raised.value.message and f"({PYTHON})" in raised.value.message


@pytest.mark.parametrize("mentions", ["", "# main_grad\n"], ids=["plain", "main_grad"])
def test_a_grammar_error_beside_newer_syntax_is_still_a_parse_error(tmp_path, mentions):
    write(tmp_path / "a.py", mentions + "class Holder[T]:\n    pass\n\nif True\n    pass\n")
    result = run_cli(str(tmp_path / "a.py"))
    assert result.exit_code == 2
    assert "cannot parse: " in result.stderr and f"({PYTHON})" in result.stderr
