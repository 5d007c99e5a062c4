"""The plain-spelling rewrite (lint/plain_spellings.py): each roundabout spelling of its table
becomes the plain one, every statement keeps its line under generated layouts and line
endings, findings and fixes are placed back in the original text, and the rules judge a
roundabout spelling as they judge the plain one."""

from __future__ import annotations

import ast
import itertools
import pathlib
import textwrap

import pytest

from gmlp_check.lint import engine, lines
from gmlp_check.lint.model import Edit
from gmlp_check.lint.plain_spellings import SPELLINGS, rewrite

from .support import ALL_CODES

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda s: s.name)
def test_each_spelling_becomes_its_plain_form(spelling):
    assert rewrite(spelling.example + "\n").text == spelling.plain + "\n"


def _layouts(statement: str):
    """The statement as written, broken after each comma or opening bracket, indented in a
    block, after a ``;`` and a non-ASCII string, with each line ending."""
    broken = [statement]
    for i, char in enumerate(statement):
        if char in ",([" and i + 1 < len(statement):
            broken.append(statement[: i + 1] + "\n    " + statement[i + 1 :])
    for text in broken:
        for wrapped in (
            f"{text}\nz = 1\n",
            f"if ok:\n    {textwrap.indent(text, '    ').lstrip()}  # why\nz = 1\n",
            f's = "é€"; {text}\nz = 1\n',
        ):
            for ending in ("\n", "\r\n", "\r"):
                yield wrapped.replace("\n", ending)


def _statement_lines(text: str) -> list[tuple[str, int]]:
    return [
        (type(node).__name__, node.lineno)
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.stmt)
    ]


@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda s: s.name)
def test_every_statement_keeps_its_line(spelling):
    for text in _layouts(spelling.example):
        result = rewrite(text)
        assert result.changed, text
        assert len(lines.line_starts(result.text)) == len(lines.line_starts(text)), text
        # compiled by rewrite itself; the statement that was rewritten may change kind
        # (a call becomes an assignment), never line
        old = [line for _, line in _statement_lines(text)]
        new = [line for _, line in _statement_lines(result.text)]
        assert old == new or sorted(set(old)) == sorted(set(new)), (text, result.text)


@pytest.mark.parametrize(
    ("source", "plain"),
    [
        ('torch.Tensor.add_(vars(w)["main_grad"], g)', "w.main_grad.add_(g)"),
        ("vars(w).update(a=1, b=2)", "w.a = 1; w.b = 2"),
        ('vars(w).update({"a": 1})', "w.a = 1"),
        ("f(lambda p: vars(p).update(a=True))", "f(lambda p: setattr(p, 'a', True))"),
        ('w.__setattr__("main_grad", buf)', "w.main_grad = buf"),
        ('y = object.__getattribute__(w, "main_grad")', "y = w.main_grad"),
        ("vars(w).update(a=(x := 1))", "w.a = (x := 1)"),
        ('y = vars(a + b)["c"]', "y = (a + b).c"),
    ],
)
def test_nested_and_composed_spellings(source, plain):
    assert rewrite(source + "\n").text == plain + "\n"


@pytest.mark.parametrize(
    "source",
    [
        "super().__setattr__(name, value)",  # a computed name
        "object.__setattr__(w, name, value)",
        "torch.Tensor._make_subclass(cls, data, True)",  # a static method
        "vars(f()).update(a=1, b=2)",  # f() would run twice
        "vars(w).update(**entries)",
        "vars(w).update({key: 1})",
        'y = vars(w)["not an identifier"]',
        'y = vars(w)["class"]',
        "vars(w)",
        "w.__dict__.clear()",
    ],
)
def test_other_code_is_left_as_written(source):
    assert rewrite(source + "\n").text == source + "\n"


def test_text_without_a_spelling_or_not_python_is_returned_as_is():
    for text in ("x = 1\n", "vars(w).update(a=\n", "def f(:\n    vars(w)['a'] = 1\n"):
        result = rewrite(text)
        assert result.text == text and not result.changed


def test_repository_sources_rewrite_to_code_with_the_same_lines():
    """Every Python file of this repository that spells a trigger: the rewrite compiles
    (``rewrite`` returns the original otherwise) and keeps the line count."""
    for path in itertools.chain(REPO.glob("gmlp_check/**/*.py"), REPO.glob("lint/**/*.py")):
        text = path.read_text(encoding="utf-8")
        result = rewrite(text)
        assert len(lines.line_starts(result.text)) == len(lines.line_starts(text)), path
        if result.changed:
            compile(result.text, str(path), "exec", dont_inherit=True)


def _codes_and_lines(source: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in engine.lint_source(source, "m.py", ALL_CODES)]


# (roundabout, plain): the rules judge both alike, on the same lines.
ALIKE = [
    (
        """
        def expert_wgrad(w, x, dy, fused):
            if fused:
                general_gemm(x, dy, out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
                return make_dummy_wgrad(w)
            vars(w).update(
                grad_added_to_main_grad=True,
            )
            return dy.t() @ x
        """,
        """
        def expert_wgrad(w, x, dy, fused):
            if fused:
                general_gemm(x, dy, out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
                return make_dummy_wgrad(w)
            w.grad_added_to_main_grad = (
                True
            )
            return dy.t() @ x
        """,
    ),
    (
        """
        def wgrad(weight, x, dy):
            torch.Tensor.copy_(vars(weight)["main_grad"], dy.t() @ x)
        """,
        """
        def wgrad(weight, x, dy):
            weight.main_grad.copy_(dy.t() @ x)
        """,
    ),
    (
        """
        def fetch(param):
            if not object.__getattribute__(param, "main_grad"):
                object.__setattr__(param, "main_grad", param.get_main_grad())
            return param.main_grad
        """,
        """
        def fetch(param):
            if not param.main_grad:
                param.main_grad = param.get_main_grad()
            return param.main_grad
        """,
    ),
]


@pytest.mark.parametrize(("roundabout", "plain"), ALIKE)
def test_rules_judge_a_roundabout_spelling_as_the_plain_one(roundabout, plain):
    found = _codes_and_lines(textwrap.dedent(roundabout).lstrip("\n"))
    assert found and found == _codes_and_lines(textwrap.dedent(plain).lstrip("\n"))


def test_findings_are_placed_in_the_original_text():
    source = "vars(w).update(a=1); weight.main_grad.copy_(g)\n"
    wrapped = f"def wgrad(weight, w, g):\n    {source}"
    (finding,) = [f for f in engine.lint_source(wrapped, "m.py", ALL_CODES) if f.code == "GMLP016"]
    line = wrapped.splitlines()[1]
    assert (finding.line, finding.column) == (2, line.index("weight.main_grad.copy_") + 1)
    assert finding.end_column == line.index("(g)") + len("(g)") + 1


def test_fixes_outside_rewritten_text_still_apply():
    source = textwrap.dedent(
        """
        def fetch(param, other):
            vars(other).update(seen=True)
            if not param.main_grad:
                param.main_grad = param.get_main_grad()
            return param.main_grad
        """
    ).lstrip("\n")
    fixed, count, _ = engine.fix_source(source, "m.py", ALL_CODES, unsafe=True)
    assert count == 1
    assert "if param.main_grad is None:" in fixed
    assert "vars(other).update(seen=True)" in fixed  # the original spelling stays


def test_an_edit_touching_rewritten_text_is_refused_and_others_are_moved_back():
    result = rewrite("x = 1; vars(w).update(a=1); y = 2\n")
    start = result.text.index("w.a")
    assert result.edit(Edit(start, start + 3, "v.a")) is None
    y_new = result.text.index("y = 2")
    moved = result.edit(Edit(y_new, y_new + 1, "q"))
    assert moved is not None and result.original[moved.start : moved.end] == "y"
