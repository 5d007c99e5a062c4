"""A copy of a weight handed to a helper that treats it as the Parameter (issue #19, class
1, across functions of one file, and to top-level functions of the run's other files).

Fused paths keep two names for one weight when they gather or quantize it: ``origin_w``
(the Parameter, which carries main_grad and its flags) and ``w`` (rebound on some path to
the transient copy: ``w = materialize_weight_for_forward(w)``, ``w = quantize(w)``). A
helper handed ``w`` that takes main_grad, weakrefs or flags from the parameter it receives
then reads them from the copy on that path (Transformer Engine #3517: GroupedLinear's
grouped-tensor forward took its backward weakrefs and main_grad closures from the gathered
copies).

Two facts of one file: which parameters of its functions are used as the Parameter
(``P.main_grad``, ``P.get_main_grad``, ``weakref.ref(P)``, ``getattr(P, "<flag>")``, a flag
set on ``P``; also through ``P[i]`` and a loop or comprehension variable over ``P``), and,
at each call of such a function (``f(...)``, ``self.f(...)``, ``Cls.f(...)``), an argument
that is a name bound to a copy on some path reaching the call while its ``origin_`` twin
is in scope. A function of another file is known from the run (``RunFacts.weight_users``,
found in lint/project.py): a top-level function, called by the name this file imports
(``from helpers import f``) and does not define.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import file_functions, imports, iteration, module_provenance, patterns, provenance
from .module import ModuleContext

ATTRIBUTES = (
    patterns.MAIN_GRAD,
    "get_main_grad",
    patterns.GRAD_ADDED,
    patterns.OVERWRITE,
    patterns.ZERO_OUT,
)
# A name spelled as the Parameter's twin (``origin_w``): files without one are skipped.
ORIGIN_NAME = re.compile(r"\b(?:{})(\w+)".format("|".join(provenance.ORIGIN_PREFIXES)))
SUFFIX_TWIN = re.compile(r"\b(\w+?)(?:{})\b".format("|".join(provenance.PARAMETER_SUFFIXES)))


@dataclass(frozen=True)
class HandedCopy:
    argument: cst.BaseExpression  # the name handed over
    name: str
    twin: str  # its ``origin_`` twin
    callee: str
    parameter: str
    use_line: int | None  # where the helper uses the parameter (None: in another file)
    copied: bool = True  # a copy on some path; False: restored or handed in beside its twin
    # Where the stand-in comes in, when that is not the argument: the sequence a
    # comprehension around the call walks (``zip(weights, ...)``: the line to change).
    site: cst.BaseExpression | None = None


@dataclass(frozen=True)
class Imported:
    """A weight user of another file of the run (``RunFacts.weight_users``), imported here
    by ``name``: its parameters used as the Parameter, with their positions."""

    name: str
    parameters: tuple[tuple[str, int], ...]


def _imported_pairs(call: cst.Call, callee: Imported) -> Iterator[tuple[str, cst.BaseExpression]]:
    """(parameter, argument) for the arguments of ``call`` at a parameter ``callee`` uses
    as the Parameter."""
    by_position = {position: name for name, position in callee.parameters if position >= 0}
    by_name = {name for name, _ in callee.parameters}
    for position, arg in enumerate(call.args):
        if arg.star:
            return
        if arg.keyword is not None:
            if arg.keyword.value in by_name:
                yield arg.keyword.value, arg.value
        elif position in by_position:
            yield by_position[position], arg.value


def _aliases(function: cst.FunctionDef, parameter: str) -> set[str]:
    """``parameter`` and the loop / comprehension variables iterating over it."""
    names = {parameter}
    for node in patterns.walk(function.body):
        if isinstance(node, (cst.For, cst.CompFor)):
            source = node.iter  # positions in ``zip(...)`` are not followed
            if (
                isinstance(source, cst.Name)
                and source.value == parameter
                and isinstance(node.target, cst.Name)
            ):
                names.add(node.target.value)
    return names


def _owner_name(expr: cst.CSTNode) -> str | None:
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


# The uses that need the Parameter's own main_grad (a flag read with a default does not):
# all that marks an operand handed in beside its twin (``_beside_twin``) as wrongly handed.
BUFFER_ATTRIBUTES = (patterns.MAIN_GRAD, "get_main_grad", patterns.GRAD_ADDED)


def _uses(function: cst.FunctionDef, parameter: str, attributes=ATTRIBUTES) -> cst.CSTNode | None:
    """The first place ``function`` uses ``parameter`` as the Parameter (one of
    ``attributes``, or a weakref), or None."""
    names = _aliases(function, parameter)
    for node in patterns.walk(function.body):
        if isinstance(node, cst.Attribute) and node.attr.value in attributes:
            if _owner_name(node.value) in names:
                return node
        elif (referent := provenance.weakref_referent(node)) is not None:
            if _owner_name(referent) in names:
                return node
        elif patterns.callee_name(node) in ("getattr", "hasattr") and isinstance(
            node.func, cst.Name
        ):
            args = patterns.positional_args(node)
            if (
                len(args) >= 2
                and patterns.string_value(args[1].value) in attributes
                and _owner_name(args[0].value) in names
            ):
                return node
    return None


def _may_be_copy(objects: provenance.Provenance, value: cst.BaseExpression) -> bool:
    """The value is a copy, or one arm of a conditional expression is."""
    if isinstance(value, cst.IfExp):
        return _may_be_copy(objects, value.body) or _may_be_copy(objects, value.orelse)
    return objects.of(value) in provenance.COPIES


def _beside_twin(objects: provenance.Provenance, d) -> bool:
    """A binding that leaves the name the operand its twin is the Parameter of: handed in
    beside the twin (a parameter), restored from ``ctx`` / the saved tensors, or walking a
    list (``for w, w_param in zip(ws, params)``). The code names the Parameter separately
    because this name is not it (TE's ``weight`` beside ``origin_weight``, MindSpeed's
    ``weight`` beside ``weight_param``)."""
    if d.kind == "for":
        return not _walks_parameters(objects, d)
    if d.kind == "param":
        return True
    return d.kind == "assign" and d.value is not None and objects.of(d.value) == provenance.SAVED


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


def _comprehension_sequence(root, call: cst.Call, name: str):
    """The sequence a comprehension around ``call`` (in the statement ``root``) walks with
    ``name``, when one of its ``for`` clauses binds it; None otherwise."""
    if root is None:
        return None
    for comp in (n for n in patterns.walk(root) if type(n) in _COMPREHENSIONS):
        if not any(sub is call for sub in patterns.walk(comp)):
            continue
        clause = comp.for_in
        while clause is not None:
            for bound, sequence in iteration.element_sequences(clause):
                if bound.value == name:
                    return sequence
            clause = clause.inner_for_in
    return None


def _names_parameters(objects: provenance.Provenance, sequence) -> bool:
    """A list the code names or builds as the Parameters (``origin_weights``; also through
    ``tuple`` / ``list`` / ``reversed`` / ``sorted``, a module's ``parameters()``, and a
    local bound to the weakrefs' targets, ``[ref() for ref in ctx.origin_weight_refs]``, or
    to a module's attributes, ``[getattr(module, f"weight{i}") for i in ...]``)."""
    while (
        type(sequence) is cst.Call
        and patterns.callee_name(sequence) in ("tuple", "list", "reversed", "sorted")
        and type(sequence.func) is cst.Name
        and sequence.args
    ):
        sequence = sequence.args[0].value
    if type(sequence) is cst.Call and patterns.callee_name(sequence) in (
        "parameters",
        "named_parameters",
    ):
        return True
    if type(sequence) in (cst.ListComp, cst.GeneratorExp) and _derefs_or_getattrs(sequence):
        return True
    word = sequence.value if type(sequence) is cst.Name else None
    return objects.of(sequence) == provenance.PARAMETER or (
        word is not None and provenance.by_name(word) == provenance.PARAMETER
    )


def _derefs_or_getattrs(comp) -> bool:
    """``[ref() for ref in refs]`` (a weakref's target is the Parameter itself) or
    ``[getattr(module, ...) for ...]`` (a module's attribute is its Parameter)."""
    elt = comp.elt
    if type(elt) is not cst.Call:
        return False
    if patterns.callee_name(elt) == "getattr" and type(elt.func) is cst.Name:
        return True
    targets = {n.value for n in patterns.walk(comp.for_in.target) if type(n) is cst.Name}
    return not elt.args and type(elt.func) is cst.Name and elt.func.value in targets


def _walks_parameters(objects: provenance.Provenance, d) -> bool:
    """The loop variable walks a list the code names or builds as the Parameters
    (``for weight, mg in zip(origin_weights, main_grads)``: TE's own loop over the
    Parameters its weakrefs give back)."""
    owner = d.node.owner
    loops = [owner] if type(owner) is cst.For else []
    if owner is not None and not loops:  # a comprehension's ``for`` inside the statement
        loops = [n for n in patterns.walk(owner) if type(n) is cst.CompFor]
    for name, sequence in (pair for loop in loops for pair in iteration.element_sequences(loop)):
        if name.value == d.name and _names_parameters(objects, sequence):
            return True
    return False


def handed_copies(context: ModuleContext) -> list[HandedCopy]:
    source = context.source
    # The stems that have an ``origin_`` twin somewhere in the file: only such names are
    # followed (a file with none is skipped).
    stems = (
        set(ORIGIN_NAME.findall(source)) | set(SUFFIX_TWIN.findall(source))
        if "main_grad" in source
        else set()
    )
    if not stems:
        return []
    functions = file_functions.by_name(context)
    classes = file_functions.class_names(context)
    uses: dict[tuple[int, str], cst.CSTNode | None] = {}
    imported: dict[str, str] | None = None  # what the file imports, read on first need
    found = []
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef):
            continue
        # A syntactic pass first: the graph and provenance are built only for calls of the
        # file's functions handed a plain name whose callee uses that parameter.
        candidates = []
        for call in (n for n in file_functions.own_nodes(unit.body) if type(n) is cst.Call):
            callee = file_functions.callee(call, functions, classes)
            if callee is None:
                # A weight user of another file, called by the name this file imports it
                # under (not one of the file's own names).
                name = call.func.value if isinstance(call.func, cst.Name) else None
                if name is None or name in functions or not context.weight_users:
                    continue
                if imported is None:
                    imported = imports.imported_names(context)
                original = imported.get(name)
                if original not in context.weight_users:
                    continue
                user = Imported(name, tuple(context.weight_users[original]))
                for parameter, argument in _imported_pairs(call, user):
                    if isinstance(argument, cst.Name) and argument.value in stems:
                        candidates.append((call, user, parameter, argument, None))
                continue
            if callee is unit.owner:
                continue
            for parameter, argument in file_functions.bound_arguments(call, callee):
                if isinstance(argument, cst.Name) and argument.value in stems:
                    key = (id(callee), parameter)
                    if key not in uses:
                        uses[key] = _uses(callee, parameter)
                    if uses[key] is not None:
                        candidates.append((call, callee, parameter, argument, uses[key]))
        if not candidates:
            continue
        objects = module_provenance.of_unit(unit)
        for call, callee, parameter, argument, use in candidates:
            twin = provenance.twin_of(argument.value, objects.names)
            node = file_functions.node_of(unit, call) if twin is not None else None
            if node is None:
                continue
            defs = unit.reaching.reaching(argument.value, node)
            copied = any(
                d.kind == "assign" and d.value is not None and _may_be_copy(objects, d.value)
                for d in defs
            )
            walked = None
            if not copied:
                # Not a copy: still not the Parameter when handed in or restored beside its
                # twin, and wrong there when the callee needs the Parameter's main_grad. A
                # comprehension's own ``for`` binds the name where the call is (the graph
                # knows only the function's bindings).
                walked = _comprehension_sequence(node.owner, call, argument.value)
                if walked is not None:
                    beside = not isinstance(callee, Imported) and not _names_parameters(
                        objects, walked
                    )
                    if beside and type(walked) is cst.Name:
                        # ``params = [ref() for ref in refs]`` then ``zip(params, ...)``
                        bound = unit.reaching.reaching(walked.value, node)
                        beside = not bound or not all(
                            d.value is not None and _names_parameters(objects, d.value)
                            for d in bound
                        )
                else:
                    beside = (
                        bool(defs)
                        and not isinstance(callee, Imported)
                        and all(_beside_twin(objects, d) for d in defs)
                    )
                use = _uses(callee, parameter, BUFFER_ATTRIBUTES) if beside else None
                if use is None:
                    continue
            found.append(
                HandedCopy(
                    argument,
                    argument.value,
                    twin,
                    callee.name if isinstance(callee, Imported) else callee.name.value,
                    parameter,
                    None if use is None else context.line_of(use),
                    copied,
                    walked,
                )
            )
    return found
