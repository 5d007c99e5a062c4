"""Parameters of a file's functions that every call of the file hands main_grad itself
(issue #19: the write spelled in a wrapper the producer calls).

Primus-Turbo's wgrad wrappers take the buffer as ``out`` (``_bgrad_grouped_gemm_impl_wrapper(
..., inplace_add_to_out=ctx.fuse_bgrad_accum, out=ctx.main_grad)``) and write it there: a
replacing ``out.copy_(...)`` inside the wrapper replaces main_grad as surely as one spelled
in the backward that calls it. GMLP016 judges such a wrapper with its callers.

A parameter counts when the function is called somewhere in the file, every such call (by
name, ``file_functions.callee``) binds it to ``X.main_grad`` (or ``getattr(X,
"main_grad")``, or a local every binding of which reaching the call is one), and the
function never rebinds it. A function that tests a parameter every call hands a literal
(``inplace_add_to_out=True``) is left alone: its branches are its callers' constants. Not
seen: arguments packed into a ``**`` dict."""

from __future__ import annotations

import libcst as cst

from . import file_functions, patterns
from .module import ModuleContext


def handed_main_grads(context: ModuleContext) -> dict[int, frozenset[str]]:
    """For ``context.shared``: function id -> its parameters handed main_grad by every call."""
    bound: dict[int, list[dict[str, bool]]] = {}
    literals: dict[int, list[set[str]]] = {}
    owners: dict[int, cst.FunctionDef] = {}
    for unit in context.units:
        # a unit whose own code never spells main_grad hands none (nor binds a local to it)
        spells = unit.survey.spells_main_grad
        for node in file_functions.own_nodes(unit.body):
            if type(node) is not cst.Call:
                continue
            function = file_functions.resolved(context, node)
            if function is None:
                continue
            owners[id(function)] = function
            arguments = dict(file_functions.bound_arguments(node, function))
            bound.setdefault(id(function), []).append(
                {
                    name: spells and _holds_main_grad(unit, node, arg)
                    for name, arg in arguments.items()
                }
            )
            literals.setdefault(id(function), []).append(
                {name for name, arg in arguments.items() if _is_literal(arg)}
            )
    found: dict[int, frozenset[str]] = {}
    calls_literals = {key: set.intersection(*sets) for key, sets in literals.items()}
    for key, calls in bound.items():
        function = owners[key]
        names = {
            name
            for name in file_functions.parameters(function)
            if all(call.get(name, False) for call in calls)
        }
        names -= file_functions.rebound_names(function)
        if names and not _decided_by_callers(function, calls_literals[key]):
            found[key] = frozenset(names)
    return found


def _decided_by_callers(function: cst.FunctionDef, literal: set[str]) -> bool:
    """A parameter every call hands a literal (``inplace_add_to_out=True``) is one the
    function tests: which branch runs is the callers' constant, not a question asked."""
    tested = {
        n.value
        for node in patterns.walk(function.body)
        if type(node) in (cst.If, cst.IfExp, cst.While)
        for n in patterns.walk(node.test)
        if type(n) is cst.Name
    }
    return bool(tested & literal)


def _is_literal(arg: cst.BaseExpression) -> bool:
    return type(arg) is cst.Name and arg.value in ("True", "False", "None")


def _holds_main_grad(unit, call: cst.Call, arg: cst.BaseExpression) -> bool:
    """``X.main_grad`` (or ``getattr``) itself, or a local every binding of which reaching
    the call is one (``mg = ctx.main_grad``)."""
    if patterns.is_main_grad_direct(arg):
        return True
    if type(arg) is not cst.Name:
        return False
    at = file_functions.node_of(unit, call)
    defs = unit.reaching.reaching(arg.value, at) if at is not None else []
    return bool(defs) and all(
        d.kind == "assign" and d.value is not None and patterns.is_main_grad_direct(d.value)
        for d in defs
    )


# What a wrapper may ask of the buffer it is handed without reading what it holds.
METADATA = frozenset({"shape", "dtype", "device", "size", "numel", "dim", "ndim", "is_contiguous"})


def contents_read(function: cst.FunctionDef) -> frozenset[str]:
    """The names whose contents ``function`` reads somewhere: a use that is not the receiver
    of an in-place method (``out.copy_(...)``: the write itself), a call's ``out=`` (written
    there), a metadata attribute (``out.shape``) or a None test. A wrapper that dequantizes
    the buffer, adds and copies back (MindSpeed's ``_add_to_quant_grad``) accumulates,
    whatever its last call says."""
    read = set()
    receivers: set[int] = set()
    for node in patterns.walk(function.body):
        if type(node) is cst.Attribute and type(node.value) is cst.Name:
            receivers.add(id(node.value))  # ``out.copy_``, ``out.shape``: judged below
            attr = node.attr.value
            if attr not in METADATA and not attr.endswith("_"):
                read.add(node.value.value)  # ``out.data``, ``out.meta``: what it holds
        elif (
            type(node) is cst.Comparison
            and type(node.left) is cst.Name
            and all(type(c.operator) in (cst.Is, cst.IsNot) for c in node.comparisons)
        ):
            receivers.add(id(node.left))
        elif type(node) is cst.Arg and node.keyword is not None and node.keyword.value == "out":
            receivers.add(id(node.value))  # ``matmul(a, b, out=out)``: written, not read
    for node in patterns.walk(function.body):
        if type(node) is cst.Name and id(node) not in receivers:
            read.add(node.value)
    return frozenset(read)
