"""Which files are parsed and analysed (``triggers.mentions_contract``): a hook registration
counts only with a call of something named ``*reduce*`` (GMLP026's condition)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gmlp_check.lint import engine, file_lint, triggers
from gmlp_check.lint.project import NO_RUN_FACTS
from gmlp_check.lint.registry import rule

FIXTURES = Path(__file__).parent / "fixtures" / "deferred_variants"

RECORDING_HOOKS = """
class TestGrads:
    def test_same_dgrad_wgrad_reduces_to_plain_grad(self):
        grads = {}
        x.register_hook(lambda g: grads.setdefault("x", g))  # reduce nothing
        helper = "all_reduce"
        assert grads


def reduce_amax(g):
    return g
"""


def test_a_file_registering_hooks_that_reduce_nothing_is_not_analysed(monkeypatch):
    # Recording hooks, a test method named *reduces*, a function defined (not called) with
    # reduce in its name, the word in a comment and in a string: only compiled.
    analysed = []
    monkeypatch.setattr(file_lint, "_run_checks", lambda *args: analysed.append(args) or [])
    assert engine.lint_source(RECORDING_HOOKS, "test_a.py", frozenset({"GMLP026"})) == []
    assert analysed == []
    assert not triggers.mentions_contract(RECORDING_HOOKS)


def test_a_file_registering_a_hook_and_calling_a_reduction_is_analysed():
    source = RECORDING_HOOKS + "\ndef sync(g):\n    dist.all_reduce(g)\n"
    assert triggers.mentions_contract(source)


def _gmlp026_sources() -> list[str]:
    examples = rule("GMLP026").valid + rule("GMLP026").invalid
    sources = [e.source for e in examples] + [s for e in examples for _, s in e.others]
    fixtures = [p.read_text() for p in sorted(FIXTURES.glob("c5_hook_on_dummy*/*.py"))]
    return [s for s in sources + fixtures if "register_hook(" in s]


def test_every_gmlp026_example_and_variant_that_registers_a_hook_is_analysed():
    sources = _gmlp026_sources()
    assert len(sources) >= 8
    assert all(triggers.mentions_contract(source) for source in sources)


CALLS = {
    "dist.all_reduce(g)": True,
    "(dist.all_reduce)(g)": True,
    "f(all_reduce  # why\n  (g))": True,
    "all_reduce \\\n(g)": True,
    "f'{all_reduce(g)}'": True,
    "x = reduce_scatter_tensor(out, g)": True,
    "reduceé(g)": True,  # a non-ASCII character in the name
    "undef reduce_x(g)": True,  # "def" inside another word
    "def reduce_x(self):": False,
    "async def all_reduce(g):": False,
    "class reduce_hooks(Base):": False,
    "class Reducer(Base):": False,  # the rule's test is case-sensitive
    "x = 'reduce'": False,
    "reduce = 1": False,
    "# all_reduce (g) in a comment": True,  # the raw text: over, never under
}


@pytest.mark.parametrize(("source", "calls"), list(CALLS.items()), ids=list(CALLS))
def test_calls_reduce(source, calls):
    assert triggers.calls_reduce(source) is calls


def test_a_file_registering_a_hook_on_a_gradient_accumulator_is_analysed():
    # GMLP028's second form: ``g.register_hook(h)`` on ``p.expand_as(p).grad_fn
    # .next_functions[0][0]``, with no reduction anywhere in the file.
    from gmlp_check.lint.analysis import grad_ready_hooks

    source = (
        "def wire(module, ready):\n"
        "    for param in module.parameters():\n"
        "        acc = param.expand_as(param).grad_fn.next_functions[0][0]\n"
        "        acc.register_hook(lambda *_: ready.add(param))\n"
    )
    assert not triggers.calls_reduce(source)
    assert triggers.mentions_contract(source)
    assert triggers.ACCUMULATOR_WORD == grad_ready_hooks.ACCUMULATOR


@pytest.mark.parametrize(
    "source",
    [
        "def reduce_gradients(self, distributed, accumulate: bool = False):\n    copy(x, y)\n",
        "def flush(\n    self,\n    *,\n    overwrite_grad=False,\n):\n    self.buf.zero_()\n",
        "def fold(buf, x, _accumulate):\n    torch.mul(x, 2, out=buf)\n",
        "def step(self):\n    if self.is_gradient_accumulation_boundary:\n        pass\n",
    ],
)
def test_a_switch_handed_in_or_the_accumulation_state_is_a_trigger(source):
    assert triggers.mentions_contract(source)


@pytest.mark.parametrize(
    "source",
    [
        # a call's keyword and a body's name are not a parameter of a ``def``
        "def gemm(a, b):\n    return general_gemm(a, b, accumulate=False)\n",
        "def step(self):\n    accumulate = self.steps > 1\n    return accumulate\n",
        # a pytest function's parametrized value is no switch a caller hands in
        "def test_gemm(accumulate):\n    out.copy_(ref)\n",
        # a switch handed in with no write that replaces a buffer in the file
        "def gemm(a, b, accumulate=False):\n    return general_gemm(a, b, accumulate)\n",
    ],
)
def test_the_words_alone_are_not_a_trigger(source):
    assert not triggers.mentions_contract(source)


def test_the_work_estimate_asks_for_the_switch_as_the_engine_does():
    # A keyword argument in a call is no parameter: neither analysed nor weighed as if.
    called = b"def gemm(a, b):\n    out.copy_(general_gemm(a, b, accumulate=False))\n"
    handed = b"def gemm(a, b, out, accumulate=False):\n    out.copy_(a @ b)\n"
    for data in (called, handed):
        assert triggers.may_be_analysed(data, NO_RUN_FACTS) == triggers.mentions_contract(
            data.decode()
        )
    assert triggers.may_be_analysed(handed, NO_RUN_FACTS)


@pytest.mark.parametrize(
    ("source", "analysed"),
    [
        # a GEMM told to add by a value it computes: the function's own choice (GMLP016)
        ("def f(w, a, b):\n    mm(a, b, out=w.buf, accumulate=not is_zero(w))\n", True),
        ("def f(w, a, b):\n    mm(a, b, out=w.buf, ACCUMULATE=acc)\n", True),
        # a literal switch chooses nothing; a comparison is no keyword; no ``out=``: no write
        ("def f(w, a, b):\n    mm(a, b, out=w.buf, accumulate=True)\n", False),
        ("def f(w, a, b):\n    mm(a, b, out=w.buf, accumulate=0)\n", False),
        ("def f(w, a, b):\n    return accumulate == flag(out=w)\n", False),
        ("def f(w, a, b):\n    return mm(a, b, accumulate=not is_zero(w))\n", False),
        ("def f(w, a, b):\n    mm(a, b, out=w.buf, grad_accumulate=acc)\n", False),
    ],
)
def test_a_computed_accumulate_switch_with_an_out_is_a_trigger(source, analysed):
    assert triggers.mentions_contract(source) is analysed
    data = source.encode()
    assert triggers.may_be_analysed(data, NO_RUN_FACTS) is analysed


@pytest.mark.parametrize(
    ("source", "analysed"),
    [
        # an accumulator's record that it holds a gradient, beside a replacing write
        ("def f(meta, g):\n    meta.buf.copy_(g)\n    meta.grad_accumulation = True\n", True),
        # a fusion setting is no record; a record with no replacing write judges nothing
        ("def f(c, g):\n    c.buf.copy_(g)\n    c.gradient_accumulation_fusion = True\n", False),
        ("def f(meta, g):\n    meta.buf.add_(g)\n    meta.grad_accumulation = True\n", False),
        ("def f(meta, g):\n    meta.buf.copy_(g)\n    meta.grad_accumulation = False\n", False),
    ],
)
def test_an_accumulation_record_beside_a_replacing_write_is_a_trigger(source, analysed):
    assert triggers.mentions_contract(source) is analysed
    assert triggers.may_be_analysed(source.encode(), NO_RUN_FACTS) is analysed
