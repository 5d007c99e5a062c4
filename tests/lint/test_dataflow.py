"""The control-flow graph, reaching definitions, control dependence and value analyses
that the rules stand on, checked on small functions."""

from __future__ import annotations

import textwrap

import libcst as cst

from gmlp_check.lint.analysis.module import ModuleContext


def unit_of(source: str, name: str = "f"):
    context = ModuleContext(textwrap.dedent(source).lstrip("\n"), "t.py")
    (unit,) = [u for u in context.units if u.name == name]
    return unit


def node_of_line(unit, line: int):
    """The graph node of the statement (or if/while test) starting on ``line``."""
    context = unit.context
    for stmt, _ in unit.statements():
        node = unit.node_for(stmt)
        if node is not None and context.line_of(stmt) == line:
            return node
    raise AssertionError(f"no statement on line {line}")


def reaching_lines(unit, name: str, line: int) -> list[int]:
    defs = unit.reaching.reaching(name, node_of_line(unit, line))
    return sorted(unit.context.line_of(d.target) for d in defs)


def test_reassignment_at_the_bottom_of_a_loop_reaches_the_top():
    unit = unit_of(
        """
        def f(xs):
            flag = True
            for x in xs:
                use(flag)
                flag = x
        """
    )
    assert reaching_lines(unit, "flag", 4) == [2, 5]


def test_while_loop_back_edge_and_else():
    unit = unit_of(
        """
        def f(n):
            flag = 0
            while n:
                flag = 1
            else:
                use(flag)
        """
    )
    assert reaching_lines(unit, "flag", 6) == [2, 4]


def test_early_return_and_continue_stop_definitions():
    unit = unit_of(
        """
        def f(xs, stop):
            flag = 1
            for x in xs:
                if x:
                    flag = 2
                    continue
                use(flag)
            if stop:
                flag = 3
                return
            use(flag)
        """
    )
    assert reaching_lines(unit, "flag", 7) == [2, 5]
    assert reaching_lines(unit, "flag", 11) == [2, 5]


def test_break_leaves_the_loop_skipping_its_else():
    unit = unit_of(
        """
        def f(xs):
            flag = 1
            for x in xs:
                flag = 2
                break
            else:
                flag = 3
            use(flag)
        """
    )
    # Both ways out of the loop overwrite the first definition.
    assert reaching_lines(unit, "flag", 8) == [4, 7]


def test_exception_handler_sees_definitions_from_the_try_body():
    unit = unit_of(
        """
        def f():
            flag = 1
            try:
                flag = 2
                work()
            except ValueError:
                use(flag)
        """
    )
    assert reaching_lines(unit, "flag", 7) == [2, 4]


def test_walrus_and_tuple_targets_define_names():
    unit = unit_of(
        """
        def f(p):
            a, b = p.main_grad, 1
            if (c := a):
                use(b, c)
        """
    )
    assert reaching_lines(unit, "c", 4) == [3]
    assert unit.aliases.name("a", node_of_line(unit, 4))
    assert not unit.aliases.name("b", node_of_line(unit, 4))


def test_a_raising_guard_does_not_make_later_code_conditional():
    unit = unit_of(
        """
        def f(p, x):
            if x is None:
                raise ValueError("x")
            use(x)
            if p:
                use(p)
        """
    )
    assert unit.control.ancestors(node_of_line(unit, 4)) == []
    (branch,) = unit.control.ancestors(node_of_line(unit, 6))
    assert isinstance(branch.owner, cst.If)


def test_flag_switched_off_by_an_if_on_overwrite_is_tainted_after_the_merge():
    unit = unit_of(
        """
        def f(op, w):
            flag = op.accumulate_into_main_grad
            use(flag)
            if getattr(w, "overwrite_main_grad", False):
                flag = False
            use(flag)
        """
    )
    taint = unit.overwrite
    assert not taint.name("flag", node_of_line(unit, 3))
    assert taint.name("flag", node_of_line(unit, 6))


def test_code_after_an_early_return_on_overwrite_keeps_the_copy_clean():
    unit = unit_of(
        """
        def f(op, w):
            flag = op.accumulate_into_main_grad
            if getattr(w, "overwrite_main_grad", False):
                return None
            copy = flag
            use(copy)
        """
    )
    assert not unit.overwrite.name("copy", node_of_line(unit, 6))


def test_taint_flows_through_not_getattr_augmented_and_helpers():
    unit = unit_of(
        """
        def accumulates(w):
            return not getattr(w, "overwrite_main_grad", False)

        def f(op, w):
            a = not getattr(w, "overwrite_main_grad", False)
            b = op.flag
            b &= a
            c = accumulates(w)
            d = w.overwrite_main_grad if op.flag else None
            use(a, b, c, d)
        """
    )
    node = node_of_line(unit, 10)
    assert all(unit.overwrite.name(n, node) for n in "abcd")
    assert not unit.overwrite.name("op", node)


def test_closures_see_the_enclosing_functions_flags():
    source = """
        def f(op, w):
            flag = op.flag and not w.overwrite_main_grad

            def g():
                return flag

            return g
        """
    unit = unit_of(source, "g")
    assert unit.overwrite.name("flag", node_of_line(unit, 5))


def test_main_grad_aliases_through_views_lists_and_wrappers():
    unit = unit_of(
        """
        def f(w, n, scratch):
            mg = w.main_grad
            grouped = mg.view(n, -1)
            per_expert = [grouped[i] for i in range(n)]
            wrapped = make_grouped(storage=grouped)
            shape = mg.shape
            fresh = torch.empty_like(mg)
            use(per_expert, wrapped, shape, fresh, scratch)
        """
    )
    node = node_of_line(unit, 8)
    aliases = unit.aliases
    assert all(aliases.name(n, node) for n in ("mg", "grouped", "per_expert", "wrapped"))
    assert not any(aliases.name(n, node) for n in ("shape", "fresh", "scratch"))
