"""Whether an expression a fix pastes at a site means there what it meant where it was read.

A fix that writes text somewhere new (a flag's op-level source spliced into the test that
reads the flag, ``fc1_weight`` written for ``weight``, ``origin_weight`` for a stand-in) is
right only when every name the text reads is bound, at the site, to the object it was bound
to where the text was read, and no attribute the text reads was assigned in between.

The rule is one of execution order, read off the function's own syntax:

* each name is resolved as Python resolves it (the innermost function, lambda,
  comprehension or class body that binds it; a class body only for code directly in it);
  the read and the site must resolve it in the same scope, and no scope may declare it
  ``global`` or ``nonlocal`` (a call could then rebind it at any time);
* a binding of the name in that scope (an assignment, a loop or ``with`` or ``except`` or
  ``match`` variable, an import, a ``def``, a ``del``, a walrus) must not be able to run
  between the read and the site: it is refused when it stands between them in the text,
  when it sits in a loop that holds one of the two and not the other, and when a loop holds
  both but the read does not come first in every pass (a read in an ``if`` of the loop);
* a site in a function, lambda or generator expression runs when it is called, later than
  the read: no fix there;
* an attribute or item the text reads must not be stored between the two (by its spelling,
  a prefix of it, any object for the same attribute name, ``setattr``, an in-place
  container method);
* where the read sits in a branch the site does not share, the text is evaluated on paths
  where it never was: it must go through the caller's objects (a parameter never rebound)
  or a local bound once above both, and no guard of the read may test that object.

The reads given are the text's own and, for a flag, the definitions the flag took its value
from: a definition that does not run on every pass to the test keeps an earlier pass's.

A binding above both (``op = self.basic_ops[0]`` inside a ``with``, a parameter given a
default under ``if fc1_weight is None``, a tuple unpacked from ``restore_from_saved``)
leaves the fix alone. Anything the rule cannot place makes the fix stand down; the finding
stays."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import patterns
from .function_bindings import CHAINS, Binding, BindingIndex, flat

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .module import ModuleContext


def hold_at(
    context: ModuleContext,
    function: cst.CSTNode,
    text: str,
    site: cst.CSTNode,
    reads: Iterable[cst.CSTNode] = (),
) -> bool:
    """Every name and attribute ``text`` reads holds at ``site`` what it held at each of
    ``reads`` (the nodes the text was read from). With no reads (a name the function already
    spells, such as ``origin_weight``), what its bindings above the site give it."""
    try:
        expr = cst.parse_expression(text)
    except cst.ParserSyntaxError:
        return False
    if not isinstance(function, cst.FunctionDef):
        return False
    index = BindingIndex(context, function)
    if site not in index.span:
        return False
    reads = list(reads)
    if any(r not in index.span for r in reads):
        return False  # read in an enclosing function: its bindings are not in view here
    if any(index.frame(r) is not index.frame(site) for r in reads):
        # the site runs later (a closure, a generator expression): by then whatever carried
        # the value there (a flag) may hold another read's, as may the text's own names
        return False
    if not all(_unguarded(context, index, expr, r, site) for r in reads):
        return False
    for name in {n.value for n in patterns.read_names(expr)}:
        if name in index.declared:
            return False
        if not _name_holds(index, name, site, reads):
            return False
    return _attributes_hold(context, index, expr, site, reads)


def _unguarded(context, index: BindingIndex, expr, read, site) -> bool:
    """The read was not guarded by a test of an object the text goes through (``if op is
    not None:``, ``hasattr(op, ...)``, ``if self.basic_ops:``, a ``try`` around it): pasted
    where that guard does not hold, the text would raise. Tests of an attribute of it
    (``if fc_op.single_grouped_weight:``) guard nothing the text needs. A read after the
    site (a marked block's) is judged by its bindings alone."""
    if index.span[read][0] > index.span[site][0]:
        return True
    bases = {flat(context.code(n.value)) for n in patterns.walk(expr) if type(n) in CHAINS}
    if not bases or index.runs_first(read, site):
        return True
    # Evaluated on paths where it never was: only through what the caller handed in (a
    # parameter the function never rebinds, or a global) or one plain assignment above
    # both (`fc_op = self.basic_ops[0]`), as Transformer Engine's own fix reads
    # `fc_op._accumulate_into_main_grad` past the branches that read it first; a local
    # bound otherwise may hold anything there (`def op(): ...`, an attribute it lacks).
    for name in patterns.read_names(expr):
        scope = index.resolve(name.value, read)
        bindings = index.bindings.get((id(scope), name.value), []) if scope is not None else []
        locals_ = [b for b in bindings if type(b.node) is not cst.Param]
        if locals_ and not (
            len(bindings) == 1
            and type(locals_[0].node) is cst.Assign
            and index.runs_first(locals_[0].node, read)
            and not index.loops_holding(locals_[0].node, scope)
        ):
            return False
    for guard in index.guards(read, site):
        if guard is None:
            return False
        for sub in patterns.walk(guard):
            if type(sub) not in (cst.Name, *CHAINS) or flat(context.code(sub)) not in bases:
                continue
            above = index.parent.get(sub)
            if not (type(above) in CHAINS and above.value is sub):
                return False  # the object itself tested, not an attribute of it
    return True


def _attributes_hold(context, index: BindingIndex, expr, site, reads) -> bool:
    """No attribute or item the text reads is written between the read and the site:
    through the same spelling or a prefix of it (``op.flag = ...``, ``ops.insert(0, x)``),
    or through any object for an attribute of that name (an alias: ``o = op; o.flag =
    ...``)."""
    chains = [flat(context.code(n)) for n in patterns.walk(expr) if type(n) in CHAINS]
    attrs = {n.attr.value for n in patterns.walk(expr) if type(n) is cst.Attribute}
    start = index.span[site][0]
    for store in index.stores:
        hit = (
            (store.attr == "*" and bool(chains))
            or store.attr in attrs
            or any(
                c == store.target or c.startswith((store.target + ".", store.target + "["))
                for c in chains
            )
        )
        if not hit:
            continue
        if index.frame(store.binding.node) is not index.frame(site):
            return False  # written in code that runs at another time
        if not reads:
            if store.binding.at > start and index.common_loop(
                store.binding.node, site, index.function
            ):
                return False
        elif not all(_unmoved(index, index.function, store.binding, r, site) for r in reads):
            return False
    return True


def _name_holds(index: BindingIndex, name: str, site: cst.CSTNode, reads: list) -> bool:
    scope = index.resolve(name, site)
    if any(index.resolve(name, r) is not scope for r in reads):
        return False
    if scope is None:
        return True  # never bound in the function: a global, a builtin or an outer local
    bindings = index.bindings.get((id(scope), name), [])
    frame = index.frame_in(site, scope)
    if not reads:
        return _spelled_name_holds(index, scope, frame, bindings, site)
    for read in reads:
        if index.frame_in(read, scope) is not frame:
            # one of the two runs later: only bindings above both, in no loop, are safe
            first = min(index.span[read][0], index.span[site][0])
            if not all(b.at < first and not index.loops_holding(b.node, scope) for b in bindings):
                return False
            continue
        if frame is not scope and index.suspends(frame):
            return False  # a generator or coroutine: the scope runs while it waits
        if not all(_unmoved(index, scope, b, read, site) for b in bindings):
            return False
    return True


def _spelled_name_holds(index: BindingIndex, scope, frame, bindings, site) -> bool:
    """A name the function spells (``origin_weight``), pasted with no read to compare with:
    bound above the site, never unbound, and not bound again after it in a loop that holds
    the site (nor anywhere after, when the site runs later)."""
    if any(b.unbinds for b in bindings):
        return False
    start = index.span[site][0]
    if frame is not scope:
        start = index.span[frame][0]
        return all(b.at < start and not index.loops_holding(b.node, scope) for b in bindings)
    if not any(b.at < start and index.runs_first(b.node, site) for b in bindings):
        return False  # bound only on some paths to the site (under an ``if``, in a loop)
    return not any(b.at > start and index.common_loop(b.node, site, scope) for b in bindings)


def _unmoved(index: BindingIndex, scope, binding: Binding, read, site) -> bool:
    """``binding`` cannot run after ``read`` and before ``site`` (both in its frame)."""
    if index.frame_in(binding.node, scope) is not index.frame_in(site, scope):
        return False
    read_at, site_at = index.span[read][0], index.span[site][0]
    low, high = sorted((read_at, site_at))
    if low < binding.at < high:
        return False
    for loop in index.loops_holding(binding.node, scope):
        holds_read, holds_site = index.holds(loop, read), index.holds(loop, site)
        if holds_read != holds_site:
            return False
        if holds_read and not index.runs_first(read, site):
            return False
    return True
