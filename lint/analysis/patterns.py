"""Syntactic facts about libcst expressions: what names they read, whether they spell
``main_grad``, ``overwrite_main_grad`` or ``zero_out_wgrad``, what a call allocates.

Everything here looks at one expression in isolation; what a local name holds is the
dataflow module's business.
"""

from __future__ import annotations

import libcst as cst

# The walks are ``walking``'s; the analyses reach them through this module too.
from .walking import children, children_kept, walk  # noqa: F401

MAIN_GRAD = "main_grad"
GRAD = "grad"
# Prefixes of locals named for main_grad that hold a switch about it, not the buffer.
MAIN_GRAD_SWITCH_PREFIXES = (
    "accumulate",
    "use_",
    "fuse",
    "has_",
    "is_",
    "should_",
    "with_",
    "overwrite",
    "skip_",
    "zero_out",
    "grad_added",
)
OVERWRITE = "overwrite_main_grad"
ZERO_OUT = "zero_out_wgrad"
GRAD_ADDED = "grad_added_to_main_grad"

# Helpers from libraries that return the GEMM's accumulate flag derived from
# overwrite_main_grad; helpers defined in the linted module itself are found by reading them.
KNOWN_OVERWRITE_HELPERS = frozenset({"get_accumulate_flag_in_param"})

# Reading these off a main_grad tensor inspects it; it does not use it as a destination.
METADATA_ATTRS = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "numel",
        "size",
        "stride",
        "dim",
        "ndim",
        "ndimension",
        "is_contiguous",
        "data_ptr",
        "element_size",
        "nelement",
        "storage_offset",
        "is_cuda",
        "layout",
        "requires_grad",
        "untyped_storage",
    }
)
# In-place methods that reset a buffer rather than deliver a gradient into it.
RESET_METHODS = frozenset({"zero_", "fill_", "requires_grad_", "detach_", "record_stream"})
# Methods whose result shares storage with the tensor they are called on.
VIEW_METHODS = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "flatten",
        "unflatten",
        "squeeze",
        "unsqueeze",
        "permute",
        "transpose",
        "t",
        "narrow",
        "select",
        "split",
        "chunk",
        "unbind",
        "as_strided",
        "detach",
        "expand",
        "expand_as",
        "movedim",
        "swapaxes",
        "split_into_quantized_tensors",
    }
)
VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "quantized_tensors", "rowwise_data"})
# Calls that read a tensor argument without returning its storage.
NON_ALIASING_CALLS = frozenset(
    {
        "isinstance",
        "hasattr",
        "getattr",
        "len",
        "id",
        "type",
        "print",
        "str",
        "repr",
        "format",
        "tuple_shape",
        "clone",
        "stack",
        "cat",
        "zeros_like",
        "empty_like",
        "ones_like",
        "full_like",
        "rand_like",
        "randn_like",
        "allclose",
        "equal",
    }
)
FETCH_PREFIXES = ("get_", "fetch_", "view_", "load_", "ensure_", "lazy_")
EMPTY_ALLOCATORS = {"empty": "zeros", "empty_like": "zeros_like", "new_empty": "new_zeros"}
ALLOCATORS = frozenset(
    {*EMPTY_ALLOCATORS, "empty_strided", "zeros", "zeros_like", "new_zeros", "ones", "full"}
)


def callee_name(call: cst.CSTNode) -> str | None:
    if type(call) is not cst.Call:
        return None
    return last_word(call.func)


def last_word(expr: cst.CSTNode) -> str | None:
    """The name an expression ends in: ``x`` for ``x``, ``w`` for ``a.b.w``; else None."""
    kind = type(expr)
    if kind is cst.Name:
        return expr.value
    if kind is cst.Attribute:
        return expr.attr.value
    return None


def string_value(node: cst.CSTNode) -> str | None:
    if type(node) is cst.SimpleString:
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def string_is(node: cst.CSTNode, word: str) -> bool:
    """``node`` is a string literal whose value is ``word``: evaluated (which compiles it)
    only when its source could spell the word."""
    if type(node) is not cst.SimpleString:
        return False
    raw = node.value
    if word not in raw and "\\" not in raw:
        return False
    return node.evaluated_value == word


def attribute_of(node: cst.CSTNode, owner: str) -> str | None:
    """A for ``owner.A`` (``ctx.weight``, ``self.linear_fc1``); None for anything else."""
    if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == owner:
        return node.attr.value
    return None


def holds_main_grad_by_name(name: str) -> bool:
    """A local named for main_grad that holds the buffer, not a switch about it
    (``accumulate_into_main_grad``, ``use_main_grad``, ``overwrite_main_grad``)."""
    return MAIN_GRAD in name and not name.lstrip("_").startswith(MAIN_GRAD_SWITCH_PREFIXES)


def is_attr(node: cst.CSTNode, attr: str) -> bool:
    return type(node) is cst.Attribute and node.attr.value == attr


def assignment_targets(stmt: cst.CSTNode) -> list[cst.BaseExpression]:
    """The targets of an ``Assign``, ``AnnAssign`` or ``AugAssign``."""
    if isinstance(stmt, cst.Assign):
        return [t.target for t in stmt.targets]
    return [stmt.target]


def positional_args(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def keyword_arg(call: cst.Call, keyword: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    return None


def attribute_set(
    stmt: cst.CSTNode, attr: str
) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(X, value) for ``X.attr = value`` (the last such target) or ``setattr(X, "attr", value)``."""
    if isinstance(stmt, cst.Assign):
        subject = None
        for target in stmt.targets:
            if is_attr(target.target, attr):
                subject = target.target.value
        return None if subject is None else (subject, stmt.value)
    if isinstance(stmt, cst.Expr) and callee_name(stmt.value) == "setattr":
        args = positional_args(stmt.value)
        if len(args) == 3 and string_is(args[1].value, attr):
            return args[0].value, args[2].value
    return None


def method_call(
    node: cst.CSTNode,
) -> tuple[cst.BaseExpression, str, list[cst.Arg]] | None:
    """(receiver, method, positional arguments) for ``R.m(a, ...)`` and for the unbound
    spelling ``torch.Tensor.m(R, a, ...)`` / ``Tensor.m(R, a, ...)``; None for other calls."""
    if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
        return None
    func = node.func
    args = positional_args(node)
    owner = func.value
    unbound = (type(owner) is cst.Name and owner.value == "Tensor") or (
        type(owner) is cst.Attribute
        and owner.attr.value == "Tensor"
        and type(owner.value) is cst.Name
        and owner.value.value == "torch"
    )
    if unbound:
        return (args[0].value, func.attr.value, args[1:]) if args else None
    return owner, func.attr.value, args


def is_getattr_of(node: cst.CSTNode, attr: str) -> bool:
    """``getattr(X, "attr"[, default])`` or its guarded spelling
    ``X.attr if hasattr(X, "attr") else default``."""
    return getattr_owner(node, attr) is not None


def getattr_owner(node: cst.CSTNode, attr: str) -> cst.BaseExpression | None:
    """X for ``getattr(X, "attr"[, default])`` and ``X.attr if hasattr(X, "attr") else d``."""
    kind = type(node)
    if kind is cst.Call:
        if callee_name(node) != "getattr" or type(node.func) is not cst.Name:
            return None
        args = positional_args(node)
        return args[0].value if len(args) >= 2 and string_is(args[1].value, attr) else None
    if kind is cst.IfExp and is_attr(node.body, attr):
        test = node.test
        if callee_name(test) != "hasattr" or type(test.func) is not cst.Name:
            return None
        args = positional_args(test)
        owner = node.body.value
        if len(args) == 2 and string_is(args[1].value, attr) and args[0].value.deep_equals(owner):
            return owner
    return None


def main_grad_owner(node: cst.CSTNode) -> cst.BaseExpression | None:
    """X for ``X.main_grad`` or ``getattr(X, "main_grad")`` (with or without a default)."""
    if type(node) is cst.Attribute:
        return node.value if node.attr.value == MAIN_GRAD else None
    return getattr_owner(node, MAIN_GRAD)


def is_main_grad_fetch(node: cst.CSTNode) -> bool:
    """A call whose result is a parameter's main_grad buffer: ``p.get_main_grad()`` and
    helpers named for fetching or viewing it (``get_main_grad_from_param``,
    ``fetch_main_grad``, ``view_main_grad_as_grouped_buffer``, ``main_grad_view``,
    ``ctx.main_grad_func``), not
    predicates about it (``overwrites_main_grad``, ``holds_main_grad``)."""
    name = (callee_name(node) or "").lstrip("_")
    if MAIN_GRAD not in name:
        return False
    # ``ctx.main_grad_func()``: Transformer Engine keeps the fetch as a callable on ctx
    return name.startswith(FETCH_PREFIXES) or name.endswith(
        ("main_grad_view", "main_grad_buffer", "main_grad_func", "main_grad_fn")
    )


def is_main_grad_direct(node: cst.CSTNode) -> bool:
    """``p.main_grad``, ``getattr(p, "main_grad", ...)`` or a main_grad fetch call."""
    return is_attr(node, MAIN_GRAD) or is_getattr_of(node, MAIN_GRAD) or is_main_grad_fetch(node)


def is_main_grad_list(node: cst.CSTNode) -> bool:
    """Per-expert buffers: ``[w.main_grad for w in weights]`` (a list, tuple or generator
    comprehension), ``list(...)`` / ``tuple(...)`` of one, or a display every element of
    which is main_grad (``[fc1.main_grad, fc2.main_grad]``)."""
    kind = type(node)
    if kind is cst.Call and callee_name(node) in ("list", "tuple") and len(node.args) == 1:
        return is_main_grad_list(node.args[0].value)
    if kind is cst.ListComp or kind is cst.GeneratorExp:
        return is_main_grad_direct(node.elt)
    if kind is cst.List or kind is cst.Tuple:
        return bool(node.elements) and all(
            is_main_grad_direct(element.value) for element in node.elements
        )
    return False


def spells(node: cst.CSTNode, word: str) -> bool:
    """The node names ``word`` as an attribute, a variable or a getattr/hasattr string."""
    kind = type(node)
    if kind is cst.Name:
        return node.value == word
    if kind is cst.Attribute:
        return node.attr.value == word
    return string_is(node, word)


def read_names(expr: cst.CSTNode) -> list[cst.Name]:
    """Names an expression reads from the enclosing scope (not attribute names, keyword
    names, or names bound by its own comprehensions and lambdas)."""
    found: list[cst.Name] = []
    _collect_reads(expr, frozenset(), found)
    return found


def _comprehension_targets(comp: cst.CSTNode) -> set[str]:
    bound: set[str] = set()
    for_in = getattr(comp, "for_in", None)
    while for_in is not None:
        for node in walk(for_in.target):
            if isinstance(node, cst.Name):
                bound.add(node.value)
        for_in = for_in.inner_for_in
    return bound


def _collect_reads(node: cst.CSTNode, bound: frozenset[str], found: list[cst.Name]) -> None:
    kind = type(node)  # exact types: isinstance on libcst's ABC node classes is slow
    if kind is cst.Name:
        if node.value not in bound:
            found.append(node)
        return
    if kind is cst.Attribute or kind is cst.Arg:
        _collect_reads(node.value, bound, found)
        return
    if kind is cst.FunctionDef or kind is cst.ClassDef:
        return
    if kind is cst.Lambda:
        params = {p.name.value for p in node.params.params}
        _collect_reads(node.body, bound | params, found)
        return
    if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
        bound = bound | _comprehension_targets(node)
    for child in children(node):
        _collect_reads(child, bound, found)


def keyed_reads(expr: cst.CSTNode) -> tuple[list[cst.Name], list[tuple[cst.Name, str]]]:
    """The names ``expr`` reads, split into plain reads and reads of one string key of a
    local (``kwargs["accumulate"]``): a dict of GEMM arguments is tracked entry by entry,
    so that reading its ``"ub"`` entry does not count as reading its ``"accumulate"``."""
    keyed: list[tuple[cst.Name, str]] = []
    inside: set[int] = set()
    for sub in walk(expr):
        if type(sub) is cst.Subscript and type(sub.value) is cst.Name and len(sub.slice) == 1:
            index = sub.slice[0].slice
            key = string_value(index.value) if type(index) is cst.Index else None
            if key is not None:
                keyed.append((sub.value, key))
                inside.add(id(sub.value))
    plain = [n for n in read_names(expr) if id(n) not in inside]
    return plain, keyed


def argument_pairs(node: cst.CSTNode) -> list[tuple[str | None, cst.BaseExpression]]:
    """The arguments of a call as (keyword or None, value), or the entries of a dict literal
    of arguments as (string key or None, value)."""
    if type(node) is cst.Call:
        return [(a.keyword.value if a.keyword else None, a.value) for a in node.args]
    return [(string_value(e.key), e.value) for e in node.elements if type(e) is cst.DictElement]


def dict_entries(expr: cst.CSTNode | None) -> dict[str, cst.BaseExpression] | None:
    """A dict literal with string keys only, as {key: value}; None for anything else."""
    if type(expr) is not cst.Dict:
        return None
    entries: dict[str, cst.BaseExpression] = {}
    for element in expr.elements:
        key = string_value(element.key) if type(element) is cst.DictElement else None
        if key is None:
            return None
        entries[key] = element.value
    return entries


def is_none_like(expr: cst.CSTNode) -> bool:
    """``None``, ``[]``, ``[None]``, ``(None,)``, ``[None] * n`` or ``[None for _ in ...]``:
    no gradient at all."""
    if isinstance(expr, cst.Name):
        return expr.value == "None"
    if isinstance(expr, (cst.List, cst.Tuple)):
        return all(is_none_like(e.value) for e in expr.elements)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return is_none_like(expr.left) or is_none_like(expr.right)
    if isinstance(expr, cst.ListComp):
        return is_none_like(expr.elt)
    return False


def is_true_literal(expr: cst.CSTNode) -> bool:
    return type(expr) is cst.Name and expr.value == "True"


def is_false_literal(expr: cst.CSTNode) -> bool:
    if isinstance(expr, cst.Name):
        return expr.value in ("False", "None")
    if isinstance(expr, cst.Integer):
        return expr.value == "0"
    return False


def is_atom(expr: cst.CSTNode) -> bool:
    """Safe to splice anywhere an operand goes without parentheses."""
    return isinstance(expr, _ATOMS) or bool(getattr(expr, "lpar", ()))


# Operands that bind tighter than any operator: names, attributes, calls, subscripts, literals.
_ATOMS = (
    cst.Name,
    cst.Attribute,
    cst.Call,
    cst.Subscript,
    cst.SimpleString,
    cst.Integer,
    cst.Float,
)
