"""Positions computed for the nodes asked about (``lint/analysis/locate.py``) are the ones
libcst's ``PositionProvider`` gives, node by node, on the rule examples and on files with
odd line endings and whitespace, whether located one at a time or all at once."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from gmlp_check.lint.analysis.locate import FULL_AFTER, Locator
from gmlp_check.lint.lines import line_starts
from gmlp_check.lint.registry import CODES, rule

ODD = {
    "form feed first, crlf": (
        '\x0c"""doc"""\r\nimport x\r\n\r\ndef f(a):\r\n    if a:\r\n        return a\r\n'
    ),
    "lone cr": "from a import b\r\r\r\x0c\rclass G(S):\r    def f(self):\r        self.x = 1\r",
    "no final newline": "def f(p):\n    return p.main_grad",
    "tabs and comments": "if x:\n\t# c\n\ty = [\n\t\t1,  # one\n\t]\n",
    "async, match, decorators": (
        "@dec\nasync def f(a, /, b=1, *, c):\n    async with x as y:\n"
        "        yield (await z)[1:2, ...]\n    match a:\n        case {'k': 1, **r}:\n"
        "            pass\n"
    ),
}
EXAMPLES = {
    f"{code} {kind} {i}": example.source
    for code in CODES
    for kind, examples in (("valid", rule(code).valid), ("invalid", rule(code).invalid))
    for i, example in enumerate(examples)
}


def expected(module: cst.Module, starts: list[int]) -> dict[int, tuple[int, int]]:
    found = {}
    for node, where in (
        MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider).items()
    ):
        if where.end.line <= len(starts) and not isinstance(node, cst.Module):
            start = starts[where.start.line - 1] + where.start.column
            found[id(node)] = (node, (start, starts[where.end.line - 1] + where.end.column))
    return found


@pytest.mark.parametrize("source", [*ODD.values(), *EXAMPLES.values()], ids=[*ODD, *EXAMPLES])
def test_each_node_is_where_position_provider_puts_it(source):
    module = cst.parse_module(source)
    starts = line_starts(source)
    for node, want in expected(module, starts).values():
        assert Locator(module, starts).offsets(node) == want, type(node).__name__


def test_after_a_few_nodes_one_full_pass_gives_the_same_offsets():
    source = ODD["async, match, decorators"]
    module = cst.parse_module(source)
    starts = line_starts(source)
    locator = Locator(module, starts)
    for node, want in expected(module, starts).values():
        assert locator.offsets(node) == want
    assert locator.full and locator.partial_runs == FULL_AFTER
