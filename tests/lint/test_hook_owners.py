"""GMLP017's view of whose hook a hand-fired grad-accumulation hook is
(``lint/analysis/hook_owners.py``), in files the linter analyses: each shape fires ``p``'s
hook without bookkeeping (reported), and its twin keeps the books first (not reported).
The variant corpus (variant_corpus_classes56.py) holds the same shapes in files that name
no trigger word, where nothing is analysed."""

from __future__ import annotations

import textwrap

import pytest

from gmlp_check.lint import engine

# The file writes main_grad elsewhere, so it is analysed.
CONTEXT = "\n\ndef wgrad(weight, x, dy):\n    weight.main_grad.add_(dy.t() @ x)\n"

SHAPES = {
    "getattr-called-at-once": (
        """
        def replay_wgrad(graph, params):
            graph.replay()
            for p in params:
                {books}getattr(p, "_grad_accum_hook")()
        """
    ),
    "closure-for-one-parameter": (
        """
        def make_finisher(param, graph):
            def finish():
                graph.replay()
                {books}param._grad_accum_hook()

            return finish
        """
    ),
    "hook-looked-up-by-get": (
        """
        def finalize(params, grad_accum_hooks):
            for p in params:
                hook = grad_accum_hooks.get(p)
                {books}hook()
        """
    ),
}


def _source(shape: str, keeps_books: bool) -> str:
    body = textwrap.dedent(SHAPES[shape]).lstrip("\n")
    line = next(text for text in body.splitlines() if "{books}" in text)
    indent = line[: len(line) - len(line.lstrip())]
    subject = "param" if "param._grad" in line else "p"
    books = f"{subject}.grad_added_to_main_grad = True\n{indent}" if keeps_books else ""
    return body.replace("{books}", books) + CONTEXT


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_hook_fired_without_bookkeeping_is_reported(shape):
    source = _source(shape, keeps_books=False)
    fired = next(
        number
        for number, text in enumerate(source.splitlines(), 1)
        if "hook" in text and "()" in text and "=" not in text
    )
    findings = engine.lint_source(source, "variant.py", frozenset({"GMLP017"}))
    assert [f.line for f in findings] == [fired], source


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_hook_fired_after_bookkeeping_is_not_reported(shape):
    source = _source(shape, keeps_books=True)
    assert engine.lint_source(source, "variant.py", frozenset({"GMLP017"})) == [], source
