"""main_grad set up for a module after the backward that needs it, or under a test that no
run passes (GMLP058; issue #19, class 8).

A training or benchmark loop that runs modules with ``accumulate_into_main_grad`` /
``fuse_wgrad_accumulation`` outside Megatron's DDP must give each parameter its fp32
``main_grad`` before the first backward: the fused wgrad GEMM writes into it. The set-up is
a call handed the module first: a helper of the file that binds ``p.main_grad`` to a buffer
(not ``None``: freeing is no set-up), or one named for setting main_grad up
(``init_main_grads``). The backwards that need it are those of the module's output (``out =
module(x)``; ``out.backward(dy)``, ``out.sum().backward()``). Two ways to lose it, both
judged over the runs ``consistent_paths`` allows: no run reaches the set-up at all (its test
repeats one that already sent every run elsewhere: ``if fwd_only: return`` before ``if
accumulate and fwd_only: init_main_grads(m)``), or no run passes it before one of those
backwards. A search that gives up answers as if a run were found: nothing is reported then.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .cfg import Node
from .consistent_paths import passes_in_order
from .module import ModuleContext, Unit

SETUP_WORDS = ("init", "alloc", "setup", "set_up", "create", "prepare")
BACKWARD = "backward"
NOT_AN_OUTPUT = frozenset({"self", "ctx", "cls", "super"})


@dataclass(frozen=True)
class LateSetup:
    anchor: cst.CSTNode  # the set-up call, or the test that keeps every run from it
    call: str  # the set-up, as written
    dead: bool  # no run reaches the set-up (else: every run reaches it after a backward)


def binders(context: ModuleContext) -> frozenset[str]:
    """Functions of the file that bind ``X.main_grad`` to a buffer."""
    found = set()
    for unit in context.units:
        if (
            isinstance(unit.owner, cst.FunctionDef)
            and unit.survey.spells_main_grad
            and any(_binds_main_grad(stmt) for stmt, _ in unit.statements())
        ):
            found.add(unit.name)
    return frozenset(found)


def _binds_main_grad(stmt: cst.CSTNode) -> bool:
    found = patterns.attribute_set(stmt, patterns.MAIN_GRAD)
    return found is not None and not patterns.is_none_like(found[1])


def is_setup_call(call: cst.Call, helpers: frozenset[str]) -> bool:
    """A call that sets main_grad up for what it is handed: a binder of the file
    (``binders``) or a callee named with main_grad and a set-up word (``init_main_grads``)."""
    name = patterns.callee_name(call) or ""
    lowered = name.lower()
    return name in helpers or ("main_grad" in lowered and any(w in lowered for w in SETUP_WORDS))


def _setup_of(stmt: cst.CSTNode, helpers: frozenset[str]) -> tuple[cst.Call, str] | None:
    """(the set-up call, the module it is handed as written) in ``stmt``."""
    for sub in patterns.walk(stmt):
        if type(sub) is not cst.Call:
            continue
        if is_setup_call(sub, helpers):
            args = patterns.positional_args(sub)
            if args and type(args[0].value) is cst.Name:
                return sub, args[0].value.value
    return None


def _backward_of(stmt: cst.CSTNode) -> str | None:
    """The name ``X.backward(...)`` starts from (``out`` for ``out.sum().backward()``)."""
    for sub in patterns.walk(stmt):
        if type(sub) is not cst.Call or type(sub.func) is not cst.Attribute:
            continue
        if sub.func.attr.value != BACKWARD:
            continue
        root = sub.func.value
        while type(root) in (cst.Call, cst.Attribute, cst.Subscript):
            root = root.func if type(root) is cst.Call else root.value
        if type(root) is cst.Name and root.value not in NOT_AN_OUTPUT:
            return root.value
    return None


def _output_of(unit: Unit, name: str, node: Node, module: str) -> bool:
    """``name`` where ``node`` runs holds ``module(...)``'s output (or a method's of it)."""
    code = unit.context.code
    for d in unit.reaching.reaching(name, node):
        if type(d.value) is cst.Call:
            called = code(d.value.func).strip()
            if called == module or called.startswith(module + "."):
                return True
    return False


def late_setups(unit: Unit, helpers: frozenset[str]) -> Iterator[LateSetup]:
    setups: list[tuple[Node, cst.Call, str]] = []
    backwards: list[tuple[Node, str]] = []
    for stmt, _ in unit.statements():
        if isinstance(stmt, cst.BaseCompoundStatement):
            continue
        node = unit.node_for(stmt)
        if node is None:
            continue
        setup = _setup_of(stmt, helpers)
        if setup is not None:
            setups.append((node, *setup))
        elif (output := _backward_of(stmt)) is not None:
            backwards.append((node, output))
    graph = unit.graph
    for node, call, module in setups:
        needing = [b for b, out in backwards if _output_of(unit, out, b, module)]
        if not any(passes_in_order(graph, [b], [], on_limit=True) for b in needing):
            continue
        if not passes_in_order(graph, [node], [], on_limit=True):
            anchor = node.enclosing_ifs[0][0].test if node.enclosing_ifs else call
            yield LateSetup(anchor, _text(unit, call), True)
        elif not any(
            passes_in_order(graph, [node, b], [frozenset()], on_limit=True) for b in needing
        ):
            yield LateSetup(call, _text(unit, call), False)


def _text(unit: Unit, node: cst.CSTNode) -> str:
    text = unit.context.code(node).strip()
    return text.splitlines()[0] if text else text
