"""Paths on which a weight's gradient is complete and its hand-fired grad-ready hook is not
fired, judged by what the code's own other path does (issue #19, class 5; GMLP042).

Code that takes a weight's gradient out of autograd's hands (a tensor-parallel reduce-scatter
finalizer, a CUDA-graph replay) keeps Megatron's grad-ready hook on the parameter
(``param._grad_accum_hook``) and fires it itself once the gradient is in main_grad or handed
back. Every path that completes the gradient must then fire it: a path that does not leaves
DDP's bucket waiting (its reduce starts late, on a stale main_grad, or never). What such a
path looks like depends on the code, so each shape is judged against a sibling that fires:

* **branch**: an ``if`` one branch of which fires a stored hook (``p._grad_accum_hook()``, or a
  function of the file that does) for each weight of a sequence, while another branch walks
  the same sequence (the same code: ``zip(weights, grads)``) firing no hook, and no hook is
  fired after the ``if`` on the way out (TE #2960's sync reduce-scatter path without fusion).
* **method**: a method that adds into ``X.main_grad`` and sets ``X.grad_added_to_main_grad =
  True`` and leaves without firing a hook, in a class another method of which adds into
  main_grad and fires a stored hook (itself or through a function of the file); a method
  called elsewhere in the file is reported only if some call of it is not followed by a
  firing on every way out (Megatron-LM #4967's deferred GTP finalize).
* **flag**: a stored hook fired only under a test that ``X.grad_added_to_main_grad`` is set.
  The flag tells the hook whether to add ``.grad`` into main_grad, not whether the gradient
  is ready: it is reset, or already consumed by another finalize, so the hook is skipped on a
  path that completed the gradient (Megatron-LM #4637's post-replay loop).

A firing is judged two ways: a sibling *fires* only through a hook stored on a parameter
(``hooks.firings``, or a function of the file that has one, three calls deep); a path is
*silent* only when it calls nothing that says hook at all (``delayed_work``'s wider notion:
any hook or helper firing one counts), so both tests lean toward saying nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from . import (
    arm_effects,
    branches,
    decided_tests,
    delayed_work,
    gates,
    hooks,
    paths,
    patterns,
    tensor_writes,
)
from .module import ModuleContext, Unit, suite_body

BRANCH, METHOD, FLAG = "branch", "method", "flag"
# How many calls deep a function of the file may fire a stored hook for its caller.
FIRER_DEPTH = 3
# Methods autograd calls itself (an autograd Function's): the file never calls them.
AUTOGRAD_ENTRY_POINTS = frozenset({"forward", "backward"})


@dataclass(frozen=True)
class Skip:
    site: cst.CSTNode  # what to report
    shape: str  # BRANCH, METHOD or FLAG
    subject: str  # the weight (FLAG), the sequence walked (BRANCH), the sibling (METHOD)


def skipped_hooks(context: ModuleContext) -> list[Skip]:
    if "hook" not in context.source:
        return []
    facts = context.shared(delayed_work.file_facts)
    direct = _direct_firers(context)
    if not direct:
        return []
    firers = _closure(direct, facts)
    found = list(_flag_gated(context, direct))
    found.extend(_branch_siblings(context, facts, firers))
    found.extend(_method_siblings(context, facts, firers))
    return found


# -- stored hooks fired by hand -----------------------------------------------------------
def _direct_firers(context: ModuleContext) -> dict[str, Unit]:
    """The functions of the file that fire a hook stored on a parameter themselves."""
    found = {}
    bound = hooks.hook_locals(context.source)  # one scan of the text, as GMLP017 does
    for unit in context.units:
        if type(unit.owner) is not cst.FunctionDef:
            continue
        if hooks.may_fire(unit, bound) and any(True for _ in hooks.firings(unit)):
            found[unit.name] = unit
    return found


def _closure(direct: dict[str, Unit], facts: delayed_work.FileFacts) -> frozenset[str]:
    """The names of the functions that fire a stored hook, themselves or through functions
    of the file that do (``FIRER_DEPTH`` calls deep)."""
    firers = set(direct)
    for _ in range(FIRER_DEPTH - 1):
        grown = {
            name
            for name, units in facts.functions.items()
            if any(unit.survey.calls & firers for unit in units)
        }
        if grown <= firers:
            break
        firers |= grown
    return frozenset(firers)


def _fires_stored(expr: cst.CSTNode, firers: frozenset[str]) -> bool:
    """``expr`` fires a hook stored on a parameter: ``p.<hook>(...)``, or a call of a function
    of the file that does (``self._apply_fused_wgrad(p, g)``)."""
    for sub in patterns.walk(expr):
        if type(sub) is not cst.Call:
            continue
        func = sub.func
        if type(func) is cst.Attribute and hooks.is_stored_hook(func.attr.value):
            return True
        if _own_call(sub) in firers:
            return True
    return False


def _own_call(call: cst.Call) -> str | None:
    """``f`` of ``f(...)``, ``self.f(...)`` or ``self.next_w.f(...)``: a function of the
    file is matched by its name, whatever object it is called on (another instance of the
    class, as a chain of sharded weights calls its neighbour's finalize)."""
    return patterns.callee_name(call)


# -- flag: the firing gated on grad_added_to_main_grad ------------------------------------
def _flag_gated(context: ModuleContext, direct: dict[str, Unit]) -> Iterator[Skip]:
    for unit in direct.values():
        fired = list(hooks.firings(unit))
        for firing in fired:
            for stmt, _ in unit.statements():
                if type(stmt) is not cst.If or not _inside(firing.call, stmt.body):
                    continue
                if stmt.orelse is not None and (
                    _fires_stored(stmt.orelse, frozenset())
                    or any(
                        other.subject == firing.subject and _inside(other.call, stmt.orelse)
                        for other in fired
                    )
                ):
                    # The hook is fired whatever the flag says (``p.<hook>()``, or a local
                    # bound to it: ``hook = getattr(p, "<hook>")`` ... ``hook()``).
                    continue
                for operand in gates.and_operands(stmt.test):
                    if _reads_flag_set(operand, firing.subject):
                        yield Skip(operand, FLAG, firing.subject)


def _inside(node: cst.CSTNode, root: cst.CSTNode) -> bool:
    return any(sub is node for sub in patterns.walk(root))


def _reads_flag_set(expr: cst.CSTNode, subject: str) -> bool:
    """``subject.grad_added_to_main_grad`` (or its getattr) as a truth value, or compared
    ``is True`` / ``== True``."""
    if type(expr) is cst.Comparison and len(expr.comparisons) == 1:
        target = expr.comparisons[0]
        if type(target.operator) in (cst.Is, cst.Equal) and patterns.is_true_literal(
            target.comparator
        ):
            expr = expr.left
        else:
            return False
    owner = patterns.getattr_owner(expr, patterns.GRAD_ADDED)
    if owner is None and patterns.is_attr(expr, patterns.GRAD_ADDED):
        owner = expr.value
    return type(owner) is cst.Name and owner.value == subject


# -- branch: a sibling branch fires for the same weights ----------------------------------
def _branch_siblings(
    context: ModuleContext, facts: delayed_work.FileFacts, firers: frozenset[str]
) -> Iterator[Skip]:
    for unit in context.units:
        if type(unit.owner) is not cst.FunctionDef:
            continue
        if unit.name not in firers and not unit.survey.calls & firers:
            continue
        notified = None
        bound = delayed_work.hook_locals(unit)
        returned = arm_effects.returned_names(unit)
        for stmt, suite in unit.statements():
            # An ``elif`` (listed with no suite of its own) is an arm of its chain's head:
            # judged there, with every arm (once per chain, not once per ``elif``).
            if type(stmt) is not cst.If or suite == ():
                continue
            arms = list(_arms(stmt, suite))
            fired = set()
            for arm, _ in arms:
                for line in arm:
                    fired |= _walks_firing(line, firers)
            if len(arms) < 2 or not fired:
                continue
            for arm, decided in arms:
                if any(delayed_work.fires_hook(line, bound, facts) for line in arm):
                    continue
                if any(arm_effects.notifies(line) for line in arm):
                    continue
                if not any(arm_effects.completes(line, returned) for line in arm):
                    continue
                site = _walks_same(arm, fired)
                if site is None:
                    continue
                node = unit.node_for(_first_small(arm[0]))
                if notified is None:
                    notified = delayed_work.notifying_nodes(unit, facts)
                # Later ``if``s on the arm's own tests go the way the arm decided them: a
                # firing under ``if not fused:`` after the ``if`` is on every way out of
                # the ``else`` of ``if fused:``.
                known = decided_tests.known_from(decided)
                if node is not None and decided_tests.exits_avoiding(
                    unit.graph, node, notified, known
                ):
                    yield Skip(site[0], BRANCH, site[1])


Arm = tuple[Sequence[cst.CSTNode], tuple[tuple[cst.BaseExpression, bool], ...]]


def _arms(stmt: cst.If, suite, passed: tuple = ()) -> Iterator[Arm]:
    """The statements of each way through an ``if`` / ``elif`` / ``else`` chain, with the
    tests that led into it and their values; an ``if`` without ``else`` whose body ends in
    a jump (``return``, ``raise``, ``continue``) has the statements after it as its other
    way."""
    yield suite_body(stmt.body), (*passed, (stmt.test, True))
    passed = (*passed, (stmt.test, False))
    orelse = stmt.orelse
    if type(orelse) is cst.If:
        yield from _arms(orelse, (), passed)
    elif type(orelse) is cst.Else:
        yield suite_body(orelse.body), passed
    elif branches.ends_in_jump(suite_body(stmt.body)):
        later = branches.after(stmt, suite)
        if later:
            yield later, passed


def _loops(suite: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, cst.CSTNode, cst.CSTNode]]:
    """(the loop, its iterable, what runs for each element) for each ``for`` statement and
    comprehension in ``suite``."""
    for sub in patterns.walk(suite):
        if type(sub) is cst.For:
            yield sub, sub.iter, sub.body
        elif isinstance(sub, cst.BaseComp):
            yield sub, sub.for_in.iter, sub


def _walks_firing(line: cst.CSTNode, firers: frozenset[str]) -> set[str]:
    """The code of the sequences for each element of which ``line`` fires a stored hook."""
    return {hooks.code_of(it) for _, it, each in _loops(line) if _fires_stored(each, firers)}


def _walks_same(arm: Sequence[cst.CSTNode], fired: set[str]) -> tuple[cst.CSTNode, str] | None:
    """(the statement of ``arm`` holding a loop over one of ``fired``, that sequence)."""
    for line in arm:
        for _, it, _ in _loops(line):
            code = hooks.code_of(it)
            if code in fired:
                return _first_small(line), code
    return None


def _first_small(stmt: cst.CSTNode) -> cst.CSTNode:
    """A statement as the graph knows it: the first small statement of a simple line."""
    if type(stmt) is cst.SimpleStatementLine and stmt.body:
        return stmt.body[0]
    return stmt


# -- method: a sibling method adds into main_grad and fires -------------------------------
def _method_siblings(
    context: ModuleContext, facts: delayed_work.FileFacts, firers: frozenset[str]
) -> Iterator[Skip]:
    classes = [u for u in context.units if type(u.owner) is cst.ClassDef]
    if not classes:
        return
    writers = _main_grad_writers(facts)
    for cls in classes:
        methods = [context.unit_of(s) for s in cls.body if type(s) is cst.FunctionDef]
        sibling = next(
            (
                m
                for m in methods
                if _fires_stored(m.owner.body, firers) and _first_write(m, writers) is not None
            ),
            None,
        )
        if sibling is None:
            continue
        for method in methods:
            if method.name in firers or not _sets_flag(method):
                continue
            site = _unannounced_write(method, facts, writers)
            if method.name in AUTOGRAD_ENTRY_POINTS:
                continue  # autograd runs it; its dummy goes to an AccumulateGrad holding the hook
            if site is not None and not _callers_fire(context, method.name, facts):
                yield Skip(site, METHOD, sibling.name)


def _main_grad_writers(facts: delayed_work.FileFacts) -> frozenset[str]:
    """The functions of the file that write a main_grad themselves (``_add_into(w, g)``)."""
    return frozenset(
        name
        for name, units in facts.functions.items()
        if any(_first_write(unit, frozenset()) is not None for unit in units)
    )


def _first_write(unit: Unit, writers: frozenset[str]) -> cst.CSTNode | None:
    if not unit.survey.spells_main_grad and not unit.survey.calls & writers:
        return None
    return next(iter(_writes(unit, writers)), (None, None))[0]


def _writes(unit: Unit, writers: frozenset[str]) -> Iterator[tuple[cst.CSTNode, object]]:
    """(the call, its graph node) for each write into a main_grad in ``unit``: an in-place add
    or copy (``w.main_grad.add_``, through a local bound to it, ``torch._foreach_add_`` over a
    list of them), a GEMM's ``out=``, or a call of a function of the file that writes one."""
    for root, node in unit.expression_roots():
        buffers = tensor_writes.Buffers(unit, node)
        site = next(
            (
                call
                for dest, _, call, _ in tensor_writes.writes(root, buffers)
                if buffers.main_grad(dest)
            ),
            None,
        )
        if site is None and writers:
            site = next(
                (
                    sub
                    for sub in patterns.walk(root)
                    if type(sub) is cst.Call
                    and _own_call(sub) in writers
                    and _own_call(sub) != unit.name
                ),
                None,
            )
        if site is not None:
            yield site, node


def _sets_flag(unit: Unit) -> bool:
    """``X.grad_added_to_main_grad = True`` (or its ``setattr``) somewhere in the function."""
    if not unit.survey.spells_grad_added:
        return False
    for stmt, _ in unit.statements():
        if type(stmt) is cst.Assign and patterns.is_true_literal(stmt.value):
            if any(patterns.is_attr(t.target, patterns.GRAD_ADDED) for t in stmt.targets):
                return True
        elif type(stmt) is cst.Expr and patterns.callee_name(stmt.value) == "setattr":
            args = patterns.positional_args(stmt.value)
            if (
                len(args) == 3
                and patterns.string_is(args[1].value, patterns.GRAD_ADDED)
                and patterns.is_true_literal(args[2].value)
            ):
                return True
    return False


def _unannounced_write(
    unit: Unit, facts: delayed_work.FileFacts, writers: frozenset[str]
) -> cst.CSTNode | None:
    """The first main_grad write of ``unit`` from which a way out fires no hook."""
    notified = delayed_work.notifying_nodes(unit, facts)
    for site, node in _writes(unit, writers):
        if paths.exits_avoiding(unit.graph, node, notified):
            return site
    return None


def _callers_fire(context: ModuleContext, name: str, facts: delayed_work.FileFacts) -> bool:
    """``name`` is called in the file, and every call is followed by a firing on every way
    out of its caller (the callers announce what it completed)."""
    calls = 0
    for unit in context.units:
        if type(unit.owner) is not cst.FunctionDef or name not in unit.survey.calls:
            continue
        notified = None
        for root, node in unit.expression_roots():
            if not any(type(s) is cst.Call and _own_call(s) == name for s in patterns.walk(root)):
                continue
            calls += 1
            if notified is None:
                notified = delayed_work.notifying_nodes(unit, facts)
            if paths.exits_avoiding(unit.graph, node, notified):
                return False
    return calls > 0
