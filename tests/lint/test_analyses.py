"""The analyses the new rules share, on small inputs: which guards are feature switches,
dominance and ways out of a function, and which functions of other files return a flag
computed from overwrite_main_grad."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gmlp_check.lint.analysis import gates, paths
from gmlp_check.lint.analysis.module import ModuleContext
from gmlp_check.lint.project import facts_in, run_facts


def unit_of(source: str, name: str):
    context = ModuleContext(textwrap.dedent(source).lstrip("\n"), "case.py")
    (unit,) = [u for u in context.units if u.name == name]
    return context, unit


def node_of_call(unit, callee: str):
    for root, node in unit.expression_roots():
        if isinstance(root, cst.Expr) and getattr(root.value.func, "value", None) == callee:
            return node
    raise AssertionError(callee)


GUARDED = """
    def f(ctx, w):
        if {test}:
            mark(w)
        else:
            other(w)
"""


@pytest.mark.parametrize(
    ("test", "body_unrelated", "orelse_unrelated"),
    [
        ("ctx.cpu_offloading", True, True),
        ("ctx.fuse_wgrad_accumulation", False, False),
        ("ctx.cpu_offloading and ctx.fuse_wgrad_accumulation", True, False),
        ('hasattr(w, "grad_added_to_main_grad")', False, False),
        ("runner.gtp_remat", True, True),
        ("w is not None", False, False),
    ],
)
def test_a_guard_is_a_feature_switch_when_it_names_no_weight_or_gradient(
    test, body_unrelated, orelse_unrelated
):
    _, unit = unit_of(GUARDED.format(test=test), "f")
    body = gates.unrelated_guards(unit, node_of_call(unit, "mark"))
    orelse = gates.unrelated_guards(unit, node_of_call(unit, "other"))
    assert bool(body) == body_unrelated
    assert bool(orelse) == orelse_unrelated


PATHS = """
    def f(self, flag):
        start()
        if flag:
            fire()
            return
        if self.other:
            return
        work()
"""


def test_dominance_and_the_ways_out_that_avoid_a_node():
    _, unit = unit_of(PATHS, "f")
    start, fire, work = (node_of_call(unit, name) for name in ("start", "fire", "work"))
    dominators = paths.Dominators(unit.graph)
    assert dominators.dominates(start, work) and dominators.dominates(start, fire)
    assert not dominators.dominates(fire, work)
    leaving = paths.exits_avoiding(unit.graph, start, [fire])
    kinds = sorted(type(node.owner).__name__ for node in leaving)
    assert kinds == ["Expr", "Return"]  # ``return`` under self.other, and falling off after work()
    assert paths.exits_avoiding(unit.graph, fire, [fire]) == []


def test_flag_helpers_are_known_by_their_bodies():
    source = b'''
import torch


class Flags:
    def accumulate_into(self, param):
        """Whether the GEMM accumulates.

        With overwrite_main_grad it overwrites instead.
        """
        overwrite = getattr(param, "overwrite_main_grad", False)
        return not overwrite

    def describe(self, param):
        print(getattr(param, "overwrite_main_grad", False))
        return "flags"


def mode_of(param):
    return "overwrite" if param.overwrite_main_grad else "accumulate"


def zeroed(param):
    zero = getattr(param, "zero_out_wgrad", False)
    return zero
'''
    found = run_facts([("flags.py", source)])
    assert found.overwrite == ("accumulate_into", "mode_of")
    assert found.zero_out == ("zeroed",)
    assert not run_facts([("f.py", b"def f(p):\n    return p.main_grad\n")])
    assert not run_facts([("b.py", b"def broken(:\n    return p.overwrite_main_grad\n")])


def test_bookkeeping_helpers_are_known_by_their_bodies():
    source = """
def marks(param):
    param.grad_added_to_main_grad = True


def sets_it_by_name(param):
    setattr(param, "grad_added_to_main_grad", True)


def make_dummy_for(param):
    return None


def calls_a_dummy_maker(param):
    return get_dummy_wgrad(list(param.shape), param.dtype)


def records_on_ctx(ctx, param):
    ctx.grad_added_to_main_grad = True


def clears(param):
    param.grad_added_to_main_grad = False


class Op:
    def backward(self, param):
        param.grad_added_to_main_grad = True
"""
    expected = ("calls_a_dummy_maker", "make_dummy_for", "marks", "sets_it_by_name")
    assert run_facts([("helpers.py", source.encode())]).bookkeeping == expected
    # In its own file a method counts too: ``self.backward(...)`` there is this method.
    assert facts_in(source).bookkeeping == tuple(sorted((*expected, "backward")))


def test_gradient_helpers_return_a_product_and_can_write_no_main_grad():
    source = """
def plain(x, dy):
    return dy.t() @ x


def cast_first(x, dy):
    return torch.matmul(dy.t().float(), x.float())


def indexed(x, dy, workspace):
    return general_gemm(x, dy, workspace)[0]


def writes_it(weight, x, dy):
    weight.main_grad.add_(dy.t() @ x)
    return dy.t() @ x


def hands_the_weight_on(weight, x, dy):
    accumulate(weight, x, dy)
    return dy.t() @ x


def into_a_given_output(x, dy, out):
    return torch.matmul(dy.t(), x, out=out)


def no_product(x, dy):
    return x + dy
"""
    found = run_facts([("helpers.py", source.encode())])
    assert found.gradient == ("cast_first", "indexed", "plain")


# -- unit surveys: composed from each unit's own code and its nested units' headers ---------
NESTED = """
    @decorate(overwrite_main_grad)
    def outer(w, flag=w.main_grad):
        if flag:
            def helper(g=torch.empty(3)) -> "main_grad":
                ctx.keep = 1
                def deepest():
                    overwrite_weights(w)
                return "grad_added_to_main_grad"
        class Inner(Base, meta=make_empty()):
            def method(self, ctx):
                ctx.saved = self.main_grad
        def direct(x=ctx.other, y=torch.empty(1)):
            return get_main_grad(x)
        return helper

    class Top:
        overwrite_main_grad = True
        def m(self):
            lambda: self.grad_added_to_main_grad
"""
EXPECTED_SURVEYS = {  # unit: (spelled: overwrite, main_grad, grad_added, empty alloc; calls; ctx)
    # outer's header (decorator, default), not what outer's statements nest
    "<module>": ((True, True, False, False), {"decorate"}, set()),
    # Inner's bases and direct's defaults, not helper's header (inside an ``if``)
    "outer": ((False, True, False, True), {"make_empty", "get_main_grad", "empty"}, {"other"}),
    "helper": ((True, False, True, False), {"overwrite_weights"}, {"keep"}),
    "deepest": ((True, False, False, False), {"overwrite_weights"}, set()),
    "Inner": ((False, True, False, False), set(), {"saved"}),
    "method": ((False, True, False, False), set(), {"saved"}),
    "direct": ((False, True, False, False), {"get_main_grad"}, set()),
    "Top": ((True, False, True, False), set(), set()),
    "m": ((False, False, True, False), set(), set()),
}


def test_a_units_survey_covers_its_statements_and_the_functions_and_classes_among_them():
    # A unit's survey: its own statements, each walked whole but for what nests in them; a
    # function or class that is one of its statements is walked with its header (defaults,
    # decorators, bases, annotations); code nested one level further in is not.
    context = ModuleContext(textwrap.dedent(NESTED).lstrip("\n"), "case.py")
    surveys = {}
    for unit in context.units:
        s = unit.survey
        spelled = (s.spells_overwrite, s.spells_main_grad, s.spells_grad_added, s.empty_alloc)
        surveys[unit.name] = (spelled, s.calls, s.ctx_attrs)
    assert surveys == EXPECTED_SURVEYS


def test_children_are_found_once_per_node_while_a_file_is_analysed():
    from gmlp_check.lint.analysis import patterns

    call = cst.parse_expression("f(a, b=c)")
    assert patterns.children(call) == patterns.children(call)
    assert patterns.children(call) is not patterns.children(call)  # outside: found anew
    with patterns.children_kept():
        kept = patterns.children(call)
        assert patterns.children(call) is kept
        # A node made and dropped during the analysis keeps its entry, and its id, until
        # the end: a new node never gets the children of an old one.
        ids = {}
        for i in range(50):
            node = cst.parse_expression(f"g{i}(x{i})")
            ids[id(node)] = patterns.children(node)
        assert len(ids) == 50
    assert patterns.children(call) is not kept
    assert [type(n).__name__ for n in kept] == ["Name", "Arg", "Arg"]


def test_a_walk_is_remembered_only_once_it_ran_to_its_end_and_only_while_kept():
    from gmlp_check.lint.analysis import patterns

    module = cst.parse_module(
        "def f(p):\n    g = p.main_grad\n    def inner():\n        return g + 1\n    return g\n"
    )
    function = module.body[0]
    names = [type(n).__name__ for n in patterns.walk(function)]
    assert "Return" in names and names.count("FunctionDef") == 2  # inner's body is not entered
    assert "Integer" not in names
    with patterns.children_kept():
        partial = patterns.walk(function)
        first = [next(partial), next(partial)]  # stopped early: not remembered
        assert [type(n).__name__ for n in first] == names[:2]
        whole = list(patterns.walk(function))
        assert [type(n).__name__ for n in whole] == names
        again = patterns.walk(function)
        assert not hasattr(again, "gi_frame")  # remembered: a list's iterator
        assert list(again) == whole  # the same nodes, in the same order
    assert hasattr(patterns.walk(function), "gi_frame")  # outside: walked anew
