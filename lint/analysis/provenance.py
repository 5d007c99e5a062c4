"""Which object a weight expression holds: the Parameter itself or a tensor standing in for it.

Fused paths handle several objects for one weight: the Parameter (which carries main_grad
and its flags), the copy restored from ``ctx`` / saved tensors, the FP8-quantized weight,
and the weight materialized (all-gathered) for a parallel scheme. Per-parameter attributes
live only on the Parameter, so reading them from a stand-in, or writing the Parameter's
main_grad through one, is a bug (issue #19, class 1).

A name's provenance comes from what is assigned to it in the function and its enclosing
functions (the last assignment seen wins; a name assigned from another name inherits its
provenance, so it follows chains of plain assignments), from ``ctx`` attributes (a weakref
dereference ``ctx.X_ref()`` names the object ``X`` names; a call of a helper of the module
whose returns all have one provenance gives that provenance), and, when nothing is assigned,
from how the name is spelled; a name spelled as the Parameter (``origin_w``) bound to a saved
or ``ctx`` value stays the Parameter (what ``ctx`` holds may be the Parameter object itself).
A plain name whose ``origin_`` twin is in scope is a stand-in:
the code names the Parameter separately because this one is not it.

Across forward and backward (``CtxFacts``, one per file): what any function of the file
stores on ``ctx`` decides what backward reads back. ``ctx.w = <quantized copy>`` makes
``ctx.w`` the quantized copy everywhere in the file, ``ctx.w_ref = weakref.ref(<copy>)``
makes ``ctx.w_ref()`` the copy, and ``ctx.save_for_backward(x, <copy>)`` makes the second
name unpacked from ``ctx.saved_tensors`` the copy. Only copies are carried this way: a saved
Parameter stays "saved" (Transformer Engine saves the Parameter object itself).
"""

from __future__ import annotations

import libcst as cst

from . import iteration, patterns
from .module import Unit

PARAMETER = "parameter"
SAVED = "saved"
QUANTIZED = "quantized"
MATERIALIZED = "materialized"
DETACHED = "detached"
STAND_INS = frozenset({SAVED, QUANTIZED, MATERIALIZED, DETACHED})
COPIES = frozenset({QUANTIZED, MATERIALIZED, DETACHED})

ORIGIN_PREFIXES = ("origin_", "orig_", "original_")
# Spellings, as data: (provenance, substrings of a name) and (provenance, substrings of a
# callee) that produce it.
NAME_WORDS = (
    (QUANTIZED, ("_fp8", "fp8_", "_quantized", "quantized_", "weightmat", "_fp4", "_mxfp8")),
    (MATERIALIZED, ("full_weight", "total_weight", "gathered", "_unsharded", "dgrad_weight")),
)
CALL_WORDS = (
    # also MindSpeed QAT's ``fakequant_func`` (a fake-quantization Function's ``apply``);
    # not ``*quantization*`` / ``*quant_recipe*`` helpers, which may hand back the Parameter
    (
        QUANTIZED,
        (
            "quantize",
            "fakequant",
            "fake_quant",
            "quant_fn",
            "quant_func",
            "cast_to_fp8",
            "to_fp8",
            "Float8Tensor",
            "cast_transpose",
        ),
    ),
    (MATERIALIZED, ("all_gather", "gather_along", "unshard", "full_weight", "materialize")),
    (SAVED, ("restore_from_saved", "saved_tensors")),
)


# Casts that make a new tensor even to the same dtype (Paddle's and NumPy's spellings), unlike
# torch's ``w.to(dtype)``, which hands back the Parameter itself when the dtype matches (the
# usual mixed-precision call), so is not a copy here.
ALWAYS_COPYING_CASTS = frozenset({"astype", "cast"})


# The Parameter's twin may also be spelled by a suffix: MindSpeed's GMM takes ``weight`` (the
# operand) beside ``weight_param`` (the Parameter, whose main_grad it accumulates into).
# Quack's linear keeps the Parameter as ``weight_og`` ("original") beside the converted
# ``weight`` it computes with (blind corpus 26).
PARAMETER_SUFFIXES = ("_param", "_og")


def twin_of(word: str, names) -> str | None:
    """The name among ``names`` that spells the Parameter ``word`` stands in for: ``origin_w``
    or ``w_param`` beside ``w``."""
    for twin in (*(p + word for p in ORIGIN_PREFIXES), *(word + s for s in PARAMETER_SUFFIXES)):
        if twin in names:
            return twin
    return None


def is_origin_name(word: str) -> bool:
    return any(word.startswith(p) and len(word) > len(p) for p in ORIGIN_PREFIXES)


# The same said by a suffix, on a sibling of one stem: ColossalAI unpacks ``weight_cal,
# weight_origin = weight`` (a view handed to Gemini's ``__torch_function__``, and the
# Parameter that is updated).
ORIGIN_SUFFIXES = ("_origin", "_orig", "_original")


def origin_sibling(word: str, siblings) -> str | None:
    """Among ``siblings``, the one that spells the Parameter beside ``word`` by a suffix on
    ``word``'s stem (``weight_origin`` beside ``weight_cal`` or ``weight``)."""
    stem = word.rsplit("_", 1)[0]
    for sibling in siblings:
        if sibling != word and any(sibling in (stem + s, word + s) for s in ORIGIN_SUFFIXES):
            return sibling
    return None


def by_name(word: str) -> str | None:
    if is_origin_name(word) or word.endswith(PARAMETER_SUFFIXES):
        return PARAMETER
    for provenance, words in NAME_WORDS:
        if any(w in word for w in words):
            return provenance
    return None


class CtxFacts:
    """What the file's functions store on ``ctx``, as provenances of copies (see the module
    docstring; built by module_provenance.ctx_facts)."""

    def __init__(self) -> None:
        self.attrs: dict[str, str] = {}  # ctx.A holds a copy of this provenance
        self.refs: dict[str, str] = {}  # ctx.A() dereferences a weakref of such a copy
        self.saved: tuple[str | None, ...] = ()  # provenance by position of saved_tensors


def on_ctx(attribute: cst.CSTNode) -> bool:
    return (
        isinstance(attribute, cst.Attribute)
        and isinstance(attribute.value, cst.Name)
        and attribute.value.value == "ctx"
    )


def weakref_referent(value: cst.CSTNode) -> cst.BaseExpression | None:
    """Y for ``weakref.ref(Y)`` / ``weakref.proxy(Y)``."""
    if patterns.callee_name(value) in ("ref", "proxy") and value.args:
        func = value.func
        if isinstance(func, cst.Name) or (
            isinstance(func.value, cst.Name) and func.value.value == "weakref"
        ):
            return value.args[0].value
    return None


def copy_or_none(kind: str | None) -> str | None:
    return kind if kind in COPIES else None


def of_value(
    value: cst.CSTNode,
    known: dict[str, str],
    helpers: dict[str, str] | None = None,
    ctx: CtxFacts | None = None,
) -> str | None:
    """The provenance of an assigned value, given the names classified so far, what the
    module's own helpers return (``helpers``: function name -> provenance) and what the
    file stores on ``ctx``."""
    kind = type(value)  # exact types: isinstance on libcst's ABC node classes is slow
    if kind is cst.Name:
        return known.get(value.value) or by_name(value.value)
    if kind is cst.Attribute:
        if type(value.value) is cst.Name and value.value.value == "ctx":
            attr = value.attr.value
            if attr == "saved_tensors":
                return SAVED
            return (ctx and ctx.attrs.get(attr)) or by_name(attr) or SAVED
        return by_name(value.attr.value)
    if kind is cst.Call:
        name = patterns.callee_name(value) or ""
        if name == "Parameter":
            return PARAMETER
        if helpers and name in helpers:
            return helpers[name]
        for provenance, words in CALL_WORDS:
            if any(w in name for w in words):
                return provenance
        if name == "to" and _to_fp8(value):
            return QUANTIZED  # ``w.to(torch.float8_e4m3fn)``: a cast copy
        if name in ALWAYS_COPYING_CASTS:
            return QUANTIZED  # ``w.astype(x.dtype)``: a new tensor, whatever the dtype
        if on_ctx(value.func) and ctx and name in ctx.refs:
            return ctx.refs[name]  # ctx.weight_ref(): a weakref taken of a copy
        if isinstance(value.func, cst.Attribute) and name.endswith("_ref"):
            return of_value(value.func, known)  # ctx.origin_weight_ref(): a weakref's object
    if kind is cst.Subscript:
        return of_value(value.value, known, helpers, ctx)
    if kind is cst.IfExp:
        # ``w_fp8 if w_fp8 is not None else w``: the copy on the path that takes it, and
        # what reads main_grad or a flag from it reads them from the copy there
        arms = {of_value(arm, known, helpers, ctx) for arm in (value.body, value.orelse)}
        copies = arms & COPIES
        return copies.pop() if len(copies) == 1 else None
    if kind is cst.ListComp or kind is cst.GeneratorExp:
        # ``[quantize(w) for w in weights]``: a list of copies, whose items ``X[i]`` are
        # copies (only a copy is carried: an element naming the loop variable says nothing)
        if type(value.elt) is cst.Name or _keeps_a_name(value.elt):
            return None
        return copy_or_none(of_value(value.elt, {}, helpers, ctx))
    if kind is cst.DictComp:
        # ``{e: quantize(w) for e, w in enumerate(weights)}``: per-expert copies by index
        if type(value.value) is cst.Name or _keeps_a_name(value.value):
            return None
        return copy_or_none(of_value(value.value, {}, helpers, ctx))
    if kind is cst.List or kind is cst.Tuple:
        kinds = {of_value(e.value, known, helpers, ctx) for e in value.elements}
        return copy_or_none(kinds.pop()) if len(kinds) == 1 else None
    return None


class Provenance:
    """The provenance of the names of one unit (and the units it is nested in)."""

    def __init__(self, unit: Unit, helpers: dict[str, str], ctx: CtxFacts) -> None:
        # helpers: what the module's own functions return (function name -> provenance);
        # ctx: what the file stores on ctx. module_provenance.of_unit supplies both.
        self.helpers = helpers
        self.ctx = ctx
        chain = []
        current: Unit | None = unit
        while current is not None:
            chain.append(current)
            current = current.parent
        self.known: dict[str, str] = {}
        self.names: set[str] = set()
        for scope in reversed(chain):  # enclosing functions first, the unit's own code last
            if scope.params is not None:
                params = scope.params
                every = [*params.posonly_params, *params.params, *params.kwonly_params]
                self.names.update(param.name.value for param in every)
            for stmt, _ in scope.statements():
                self._note(stmt)

    def _note(self, stmt: cst.CSTNode) -> None:
        if type(stmt) is cst.For:  # exact type: isinstance on libcst's ABCs is slow
            self._note_loop(stmt)
            return
        if type(stmt) is not cst.Assign:
            return
        for target in stmt.targets:
            names = target_names(target.target)
            self.names.update(names)
            if len(names) > 1 or isinstance(target.target, (cst.Tuple, cst.List)):
                # tuple unpacking: of ctx.saved_tensors, or of a helper
                provenance = of_value(stmt.value, self.known, self.helpers, self.ctx)
                saved = self.ctx.saved if is_saved_tensors(stmt.value) else ()
                if len(saved) != len(names):
                    saved = (None,) * len(names)
                for name, copy in zip(names, saved):
                    found = copy or by_name(name) or (SAVED if provenance == SAVED else None)
                    if found is not None:
                        self.known[name] = found
            elif names:
                found = of_value(stmt.value, self.known, self.helpers, self.ctx)
                if type(stmt.value) is cst.IfExp and _mentions_name(stmt.value, names[0]):
                    # ``weight = weight if same_dtype else weight.astype(dt)``: the name
                    # rebound to a maybe-copy of itself; uses before it saw the Parameter,
                    # and a name has one provenance here, so it keeps its spelling's
                    found = None
                if found is None or found == SAVED:
                    # ``origin_w = ctx.w_object``: what ``ctx`` holds may be the Parameter
                    # itself (TE saves it), and the name says it is; the restored copy
                    # beside it is then the stand-in.
                    spelled = by_name(names[0])
                    if found is None or spelled == PARAMETER:
                        found = spelled or found
                if found is not None:
                    self.known[names[0]] = found

    def _note_loop(self, loop: cst.For) -> None:
        """``for i, wq in enumerate(weights_fp8)``: a name bound to the elements of a list
        of copies is such a copy (only copies are carried, as for a list's items ``X[i]``;
        the name keeps a provenance its spelling gives it)."""
        for name, sequence in iteration.element_sequences(loop):
            self.names.add(name.value)
            copy = copy_or_none(of_value(sequence, self.known, self.helpers, self.ctx))
            if copy is not None and by_name(name.value) is None:
                self.known[name.value] = copy

    def of(self, expr: cst.CSTNode) -> str | None:
        """PARAMETER, one of STAND_INS, or None when unknown."""
        if isinstance(expr, cst.Name):
            word = expr.value
            found = self.known.get(word) or by_name(word)
            if found is None and twin_of(word, self.names) is not None:
                return SAVED  # the Parameter has its own name here (``origin_w``, ``w_param``)
            return found
        return of_value(expr, self.known, self.helpers, self.ctx)

    def stand_in(self, expr: cst.CSTNode) -> str | None:
        """The kind of stand-in ``expr`` surely is: a quantized or materialized copy, or a
        saved tensor whose Parameter the code names separately (an ``origin_w`` or
        ``w_param`` twin in scope).
        None for the Parameter and for anything unknown."""
        kind = self.of(expr)
        if kind in COPIES:
            return kind
        if (
            kind == SAVED
            and isinstance(expr, cst.Name)
            and twin_of(expr.value, self.names) is not None
        ):
            return SAVED
        return None

    def differ(self, one: cst.CSTNode, other: cst.CSTNode) -> bool:
        """``one`` and ``other`` name the same weight (by stem) but are known to be
        different objects: one the Parameter and the other a stand-in, or one a quantized or
        materialized copy and the other not (a copy is never its source). A saved tensor
        and a name of unknown provenance may be one object: TE saves the Parameter itself."""
        kinds = {self.of(one), self.of(other)}
        if len(kinds) == 1:
            return False
        return (PARAMETER in kinds and bool(kinds & STAND_INS)) or bool(kinds & COPIES)


def _keeps_a_name(element: cst.CSTNode) -> bool:
    """``w.dequantize() if quantized(w) else w``: an element that is the loop variable on one
    arm hands back the Parameters it iterates there (Transformer Engine's
    ``_get_weight_tensors``): the list is not one of copies."""
    return type(element) is cst.IfExp and any(
        type(arm) is cst.Name for arm in (element.body, element.orelse)
    )


def _mentions_name(expr: cst.CSTNode, name: str) -> bool:
    return any(type(sub) is cst.Name and sub.value == name for sub in patterns.walk(expr))


def _to_fp8(call: cst.Call) -> bool:
    return any(
        type(n) is cst.Attribute and n.attr.value.startswith("float8")
        for a in call.args
        for n in patterns.walk(a.value)
    )


def is_saved_tensors(value: cst.CSTNode) -> bool:
    return isinstance(value, cst.Attribute) and value.attr.value == "saved_tensors"


def target_names(target: cst.CSTNode) -> list[str]:
    kind = type(target)
    if kind is cst.Name:
        return [target.value]
    if kind is cst.Tuple or kind is cst.List:
        return [e.value.value for e in target.elements if type(e.value) is cst.Name]
    return []


def bound_names(node: cst.CSTNode) -> set[str]:
    """The names a statement or expression binds: assignment targets (plain and annotated,
    augmented), a walrus, a ``for`` target; not those read inside an attribute or subscript
    target (``w.grad_added_to_main_grad = True`` binds no name)."""
    if type(node) is cst.Assign:
        targets = [t.target for t in node.targets]
    elif type(node) in (cst.AnnAssign, cst.AugAssign, cst.NamedExpr, cst.For):
        targets = [node.target]
    else:
        return set()
    return {name for target in targets for name in _nested_target_names(target)}


def _nested_target_names(target: cst.CSTNode) -> set[str]:
    if type(target) is cst.Name:
        return {target.value}
    if type(target) is cst.StarredElement:
        return _nested_target_names(target.value)
    if type(target) in (cst.Tuple, cst.List):
        return {n for element in target.elements for n in _nested_target_names(element.value)}
    return set()
