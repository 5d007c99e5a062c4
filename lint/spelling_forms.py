"""The roundabout spellings of an attribute store, an attribute read and a tensor method
call that ``plain_spellings`` rewrites, as a table (``SPELLINGS``): each with an example,
its plain form and the function that gives the plain text of a node written that way.

A function returns None for a node that is not its spelling, or one it cannot rewrite
without changing what the code does (an owner that would be evaluated twice, a computed
attribute name, ``super()``).
"""

from __future__ import annotations

import ast
import keyword
from collections.abc import Callable
from dataclasses import dataclass

from . import lines

_ATOMS = (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant)
# Values that need parentheses to be an assignment's whole right-hand side, as written inside
# a call or a dict (their own parentheses are not part of their text).
_NOT_ALONE = (ast.NamedExpr, ast.Tuple, ast.Yield, ast.YieldFrom, ast.Starred)


@dataclass(frozen=True)
class Spelling:
    """One roundabout spelling: an example of it, its plain form, and the function that
    gives the plain text of a node written that way (None for a node that is not)."""

    name: str
    example: str
    plain: str
    rewrite: Callable[[ast.AST, Source], str | None]


class Source:
    """The text being rewritten, read by node: ``text(node)`` is the node's code with the
    rewrites inside it already applied."""

    def __init__(self, text: str, tree: ast.AST) -> None:
        self.full = text
        self.starts = lines.line_starts(text)
        self.statement_calls: set[int] = set()  # ids of calls that are a whole statement
        for node in ast.walk(tree):
            if type(node) is ast.Expr and type(node.value) is ast.Call:
                self.statement_calls.add(id(node.value))
        self.inner: list[tuple[int, int, str]] = []  # (start, end, text) of rewritten nodes

    def offset(self, line: int, byte_column: int) -> int:
        start = self.starts[line - 1]
        prefix = self.full[start : start + byte_column]
        while len(prefix.encode("utf-8")) > byte_column:  # ast's columns count UTF-8 bytes
            prefix = prefix[:-1]
        return start + len(prefix)

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),
            self.offset(node.end_lineno, node.end_col_offset),
        )

    def text(self, node: ast.AST) -> str:
        return self.between(*self.span(node))

    def between(self, start: int, end: int) -> str:
        """The text from ``start`` to ``end`` with the rewrites inside it applied (the
        outermost of nested ones: its text holds the others)."""
        pieces, cursor = [], start
        for inner_start, inner_end, inner_text in self.inner:
            if start <= inner_start and inner_end <= end and inner_start >= cursor:
                pieces += [self.full[cursor:inner_start], inner_text]
                cursor = inner_end
        return "".join(pieces) + self.full[cursor:end]

    def operand(self, node: ast.AST) -> str:
        """The node's text, parenthesized where an attribute access after it needs it."""
        text = self.text(node)
        return text if type(node) in _ATOMS and "\n" not in text else f"({text})"


def _identifier(node) -> str | None:
    if type(node) is ast.Constant and type(node.value) is str:
        name = node.value
        if name.isidentifier() and not keyword.iskeyword(name):
            return name
    return None


def _namespace_owner(node) -> ast.AST | None:
    """X for ``vars(X)`` and ``X.__dict__``: the object whose attributes the dict holds."""
    if (
        type(node) is ast.Call
        and type(node.func) is ast.Name
        and node.func.id == "vars"
        and len(node.args) == 1
        and not node.keywords
        and type(node.args[0]) is not ast.Starred
    ):
        return node.args[0]
    if type(node) is ast.Attribute and node.attr == "__dict__":
        return node.value
    return None


def _stores(owner: ast.AST, items: list[tuple[str, ast.AST]], node: ast.AST, src: Source):
    """The plain text of storing each (attribute, value) on ``owner``: assignments where the
    call ``node`` is a statement, a ``setattr`` call (one item only) where its value is used."""
    if id(node) in src.statement_calls:
        if len(items) > 1 and not _simple(owner):  # the owner would be evaluated again
            return None
        return _assignments(src.operand(owner), items, node, src)
    if len(items) != 1:
        return None
    name, value = items[0]
    return f"setattr({src.text(owner)}, {name!r}, {src.text(value)})"


def _assignments(target: str, items: list[tuple[str, ast.AST]], node: ast.AST, src: Source):
    """``target.a = V; target.b = W``. A value is parenthesized where it would not stand
    alone, and the last one also where the statement spans lines (``_padded`` puts the line
    breaks it lacks inside those parentheses)."""
    start, end = src.span(node)
    spans_lines = lines.ENDING.search(src.full, start, end) is not None
    texts = []
    for index, (name, value) in enumerate(items):
        text = src.text(value)
        last = index == len(items) - 1
        if type(value) in _NOT_ALONE or "\n" in text or "\r" in text or (last and spans_lines):
            text = f"({text})"
        texts.append(f"{target}.{name} = {text}")
    return "; ".join(texts)


def _simple(node) -> bool:
    """A name, or attributes and constant subscripts of one: evaluating it twice is harmless."""
    while True:
        if type(node) is ast.Name:
            return True
        constant_item = type(node) is ast.Subscript and type(node.slice) in (ast.Constant, ast.Name)
        if type(node) is not ast.Attribute and not constant_item:
            return False
        node = node.value


def _dict_update(node, src: Source) -> str | None:
    """``vars(X).update(a=V)``, ``X.__dict__.update({"a": V})``."""
    if type(node) is not ast.Call or type(node.func) is not ast.Attribute:
        return None
    if node.func.attr != "update":
        return None
    owner = _namespace_owner(node.func.value)
    if owner is None or len(node.args) > 1:
        return None
    items: list[tuple[str, ast.AST]] = []
    if node.args:
        given = node.args[0]
        if type(given) is not ast.Dict or any(_identifier(key) is None for key in given.keys):
            return None
        items += [(_identifier(key), value) for key, value in zip(given.keys, given.values)]
    for kw in node.keywords:
        if kw.arg is None:
            return None
        items.append((kw.arg, kw.value))
    return _stores(owner, items, node, src) if items else None


def _dunder_setattr(node, src: Source) -> str | None:
    """``object.__setattr__(X, "a", V)``, ``X.__setattr__("a", V)``."""
    if type(node) is not ast.Call or type(node.func) is not ast.Attribute:
        return None
    if node.func.attr != "__setattr__" or node.keywords:
        return None
    if any(type(arg) is ast.Starred for arg in node.args):
        return None
    if len(node.args) == 3:
        owner, name, value = node.args
    elif len(node.args) == 2 and type(node.func.value) is not ast.Call:  # not super()
        owner, (name, value) = node.func.value, node.args
    else:
        return None
    attribute = _identifier(name)
    return None if attribute is None else _stores(owner, [(attribute, value)], node, src)


def _namespace_item_store(node, src: Source) -> str | None:
    """``vars(X)["a"] = V``, ``X.__dict__["a"] = V``."""
    if type(node) is not ast.Assign or len(node.targets) != 1:
        return None
    target = node.targets[0]
    if type(target) is not ast.Subscript:
        return None
    owner, attribute = _namespace_owner(target.value), _identifier(target.slice)
    if owner is None or attribute is None:
        return None
    return _assignments(src.operand(owner), [(attribute, node.value)], node, src)


def _namespace_item_read(node, src: Source) -> str | None:
    """``vars(X)["a"]``, ``X.__dict__["a"]`` read."""
    if type(node) is not ast.Subscript or type(node.ctx) is not ast.Load:
        return None
    owner, attribute = _namespace_owner(node.value), _identifier(node.slice)
    if owner is None or attribute is None:
        return None
    return f"{src.operand(owner)}.{attribute}"


def _dunder_getattribute(node, src: Source) -> str | None:
    """``X.__getattribute__("a")``, ``object.__getattribute__(X, "a")``."""
    if type(node) is not ast.Call or type(node.func) is not ast.Attribute:
        return None
    if node.func.attr != "__getattribute__" or node.keywords:
        return None
    if len(node.args) == 2:
        owner, name = node.args
    elif len(node.args) == 1 and type(node.func.value) is not ast.Call:
        owner, name = node.func.value, node.args[0]
    else:
        return None
    attribute = _identifier(name)
    return None if attribute is None else f"{src.operand(owner)}.{attribute}"


def _attrgetter(node, src: Source) -> str | None:
    """``operator.attrgetter("a.b")(X)``."""
    if type(node) is not ast.Call or len(node.args) != 1 or node.keywords:
        return None
    getter = node.func
    if type(getter) is not ast.Call or len(getter.args) != 1 or getter.keywords:
        return None
    name = getter.func
    called = name.id if type(name) is ast.Name else name.attr if type(name) is ast.Attribute else ""
    path = getter.args[0]
    if called != "attrgetter" or type(path) is not ast.Constant or type(path.value) is not str:
        return None
    parts = path.value.split(".")
    if not all(_identifier(ast.Constant(part)) for part in parts):
        return None
    if type(node.args[0]) is ast.Starred:
        return None
    return src.operand(node.args[0]) + "".join(f".{part}" for part in parts)


def _unbound_tensor_method(node, src: Source) -> str | None:
    """``torch.Tensor.add_(T, g)``, ``Tensor.copy_(T, g)``: the method called on T."""
    if type(node) is not ast.Call or type(node.func) is not ast.Attribute:
        return None
    owner, method = node.func.value, node.func.attr
    is_tensor_class = (type(owner) is ast.Name and owner.id == "Tensor") or (
        type(owner) is ast.Attribute
        and owner.attr == "Tensor"
        and type(owner.value) is ast.Name
        and owner.value.id == "torch"
    )
    # methods whose name starts with ``_`` include static ones (``_make_subclass``)
    if not is_tensor_class or method.startswith("_") or not node.args:
        return None
    if type(node.args[0]) is ast.Starred:
        return None
    rest = sorted(node.args[1:] + node.keywords, key=lambda n: (n.lineno, n.col_offset))
    inside = ""
    if rest:
        start = src.span(rest[0])[0]
        end = max(src.span(item)[1] for item in rest)
        inside = src.between(start, end)
    return f"{src.operand(node.args[0])}.{method}({inside})"


SPELLINGS = (
    Spelling(
        "dict-update-store",
        "vars(w).update(grad_added_to_main_grad=True)",
        "w.grad_added_to_main_grad = True",
        _dict_update,
    ),
    Spelling(
        "dunder-setattr-store",
        'object.__setattr__(w, "main_grad", buf)',
        "w.main_grad = buf",
        _dunder_setattr,
    ),
    Spelling(
        "namespace-item-store",
        'w.__dict__["grad_added_to_main_grad"] = True',
        "w.grad_added_to_main_grad = True",
        _namespace_item_store,
    ),
    Spelling("namespace-item-read", 'vars(w)["main_grad"]', "w.main_grad", _namespace_item_read),
    Spelling(
        "dunder-getattribute-read",
        'w.__getattribute__("main_grad")',
        "w.main_grad",
        _dunder_getattribute,
    ),
    Spelling("attrgetter-read", 'operator.attrgetter("main_grad")(w)', "w.main_grad", _attrgetter),
    Spelling(
        "unbound-tensor-method",
        "torch.Tensor.index_copy_(w.main_grad, 0, idx, g)",
        "w.main_grad.index_copy_(0, idx, g)",
        _unbound_tensor_method,
    ),
)
