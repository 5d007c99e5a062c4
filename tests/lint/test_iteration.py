"""Which sequence each loop variable is an element of (lint/analysis/iteration.py)."""

from __future__ import annotations

import libcst as cst
import pytest

from gmlp_check.lint.analysis.iteration import element_sequences, element_source

CASES = [
    ("for g in grads: pass", {"g": "grads"}),
    ("for i, g in enumerate(grads): pass", {"g": "grads"}),
    ("for w, g in zip(weights, grads): pass", {"w": "weights", "g": "grads"}),
    ("for i, (w, g) in enumerate(zip(ws, gs)): pass", {"w": "ws", "g": "gs"}),
    ("for (w, g), s in zip(zip(ws, gs), ss): pass", {"w": "ws", "g": "gs", "s": "ss"}),
    ("for g in ctx.grads[1:]: pass", {"g": "ctx.grads[1:]"}),
    ("for w, g in zip(ws, gs, strict=True): pass", {"w": "ws", "g": "gs"}),
    ("for i, g in enumerate(gs, 1): pass", {"g": "gs"}),
    ("for i, g in enumerate(gs, start=1): pass", {"g": "gs"}),
    # not plain: fewer targets than zipped sequences, a starred target or argument, a
    # keyword zip does not take, a call of anything else
    ("for w, g in zip(ws, gs, ss): pass", {}),
    ("for w, *gs in zip(ws, a, b): pass", {}),
    ("for w, g in zip(*pairs): pass", {}),
    ("for w, g in zip(ws, gs, fill=0): pass", {}),
    ("for w, g in pairs(ws, gs): pass", {}),
]


@pytest.mark.parametrize(("source", "expected"), CASES)
def test_loop_variables_map_to_the_sequences_they_walk(source, expected):
    module = cst.parse_module(source)
    loop = module.body[0]
    found = {name.value: module.code_for_node(seq) for name, seq in element_sequences(loop)}
    assert found == expected
    for name, sequence in element_sequences(loop):
        assert element_source(loop, name) is sequence


def test_a_name_node_not_bound_by_the_loop_has_no_source():
    module = cst.parse_module("for g in grads: pass\n")
    assert element_source(module.body[0], cst.Name("g")) is None  # another node, same spelling
    assert element_source(module.body[0], None) is None
