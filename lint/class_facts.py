"""What the delayed-wgrad rules need to know about classes defined in the other files of a
run (issue #19, class 6: a class whose base, in another file, takes delay_wgrad_compute or
computes the delayed weight gradients in its ``backward_dw``).

A subclass may live in a file that never spells ``backward_dw`` or ``delay_wgrad_compute``
(a model variant that adds or fuses a projection): it inherits the protocol, so whether its
layers' weight gradients are ever computed depends on the base's ``backward_dw``. Each
top-level class of a file that defines ``backward_dw`` or takes ``delay_wgrad_compute`` in
an ``__init__`` is summarised here with CPython's ``ast`` (only the class blocks that hold
those words are parsed, so a config dataclass of thousands of lines costs nothing): its
bases, which ``self`` attributes each method mentions, what each ``self`` attribute is
given (containers of delayed-wgrad callables), the weight layers ``__init__`` builds, and
whether ``__init__`` takes the delay mode. The summaries are attached only to the jobs of
files that subclass one of these classes (``subclassing``), so no other file's cache key
changes when a base is edited.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

BACKWARD_DW = "backward_dw"
DELAY = "delay_wgrad_compute"
_DEFINES = (b"def " + BACKWARD_DW.encode(), DELAY.encode())
# The words of a call that builds a weight layer; the same test as analysis/classes.py's.
SPEC_BUILDERS = frozenset({"build_module"})
LAYER_WORDS = ("linear", "proj")
EAGER_LAYERS = frozenset({"nn.Linear"})
# Methods that put a value into a container attribute: ``self.fns.append(f)``.
STORING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})
_WORD = re.compile(rb"\w+")


@dataclass(frozen=True, order=True)
class ClassFact:
    name: str
    path: str
    bases: tuple[str, ...]
    # method name -> the ``self`` attributes its body mentions (sorted)
    methods: tuple[tuple[str, tuple[str, ...]], ...]
    # attribute -> the ``self`` attributes mentioned by what is stored in it
    stores: tuple[tuple[str, tuple[str, ...]], ...]
    layers: tuple[str, ...]  # attributes __init__ assigns a weight layer to
    spells_delay: bool  # __init__ takes or mentions delay_wgrad_compute


def class_facts(files: Iterable[tuple[str, bytes]]) -> tuple[ClassFact, ...]:
    """Summaries of the top-level classes that define ``backward_dw`` or whose
    ``__init__`` takes the delay mode, in the files given as (path, bytes)."""
    found: list[ClassFact] = []
    for path, data in files:
        if not any(word in data for word in _DEFINES):
            continue
        for block in _class_blocks(data):
            if not (_DEFINES[0] in block or (_DEFINES[1] in block and b"def __init__" in block)):
                continue
            try:
                tree = ast.parse(block)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue  # the file's own lint reports it
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    found.append(_summary(node, path))
    return tuple(sorted(found))


def subclassing(data: bytes, names: frozenset[str]) -> bool:
    """The file defines a top-level class with one of ``names`` among its bases (a scan of
    the ``class`` lines only: cheap on any file)."""
    start = 0 if data.startswith(b"class ") else data.find(b"\nclass ")
    while start != -1:
        header_end = data.find(b":", start + 1)
        header = data[start:header_end] if header_end != -1 else data[start:]
        opening = header.find(b"(")
        if opening != -1 and any(word.decode() in names for word in _WORD.findall(header, opening)):
            return True
        start = data.find(b"\nclass ", start + 1)
    return False


def _class_blocks(data: bytes) -> Iterable[bytes]:
    """The text of each top-level class (decorators left out): from its ``class`` line to
    the next line that starts a top-level statement."""
    lines = data.split(b"\n")
    start = None
    for number, line in enumerate(lines):
        top = line[:1] not in (b"", b" ", b"\t", b"#", b")", b"]", b"}")
        if top and start is not None:
            yield b"\n".join(lines[start:number])
            start = None
        if line.startswith(b"class "):
            start = number
    if start is not None:
        yield b"\n".join(lines[start:])


def _summary(node: ast.ClassDef, path: str) -> ClassFact:
    bases = tuple(name for base in node.bases if (name := _last_name(base)))
    methods: dict[str, set[str]] = {}
    stores: dict[str, set[str]] = {}
    layers: list[str] = []
    spells_delay = False
    for item in node.body:
        if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        mentioned = methods.setdefault(item.name, set())
        for sub in ast.walk(item):
            if _is_self_attr(sub):
                mentioned.add(sub.attr)
            stored = _stored(sub)
            if stored is not None:
                attr, value = stored
                stores.setdefault(attr, set()).update(
                    n.attr for n in ast.walk(value) if _is_self_attr(n)
                )
        if item.name == "__init__":
            spells_delay = _spells_delay(item)
            for sub in ast.walk(item):
                if isinstance(sub, ast.Assign) and _builds_layer(sub.value):
                    for target in sub.targets:
                        if _is_self_attr(target) and target.attr not in layers:
                            layers.append(target.attr)
    return ClassFact(
        node.name,
        path,
        bases,
        tuple((name, tuple(sorted(attrs))) for name, attrs in methods.items()),
        tuple((name, tuple(sorted(attrs))) for name, attrs in sorted(stores.items())),
        tuple(layers),
        spells_delay,
    )


def _stored(node: ast.AST) -> tuple[str, ast.AST] | None:
    """(attribute, value) for ``self.a = v``, ``self.a[k] = v``, ``self.a += v`` and
    ``self.a.append(v)``."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            while isinstance(target, ast.Subscript):
                target = target.value
            if _is_self_attr(target):
                return target.attr, node.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in STORING_METHODS
        and _is_self_attr(node.func.value)
    ):
        return node.func.value.attr, ast.Tuple(elts=[*node.args], ctx=ast.Load())
    return None


def _spells_delay(init: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    arguments = init.args.args + init.args.kwonlyargs
    if any(arg.arg == DELAY for arg in arguments):
        return True
    return any(
        (isinstance(n, ast.Attribute) and n.attr == DELAY)
        or (isinstance(n, ast.keyword) and n.arg == DELAY)
        for n in ast.walk(init)
    )


def _builds_layer(value: ast.AST) -> bool:
    """The value holds a call that builds a weight layer (alone or in a container)."""
    return any(isinstance(n, ast.Call) and _is_layer_call(n) for n in ast.walk(value))


def _is_layer_call(call: ast.Call) -> bool:
    name = _last_name(call.func) or ""
    if name in SPEC_BUILDERS:
        target = _last_name(call.args[0]) if call.args else None
        return target is not None and any(word in target.lower() for word in LAYER_WORDS)
    func = call.func
    tail = (
        f"{_last_name(func.value)}.{func.attr}"
        if isinstance(func, ast.Attribute) and isinstance(func.value, (ast.Name, ast.Attribute))
        else None
    )
    return "Linear" in name and tail not in EAGER_LAYERS


def _is_self_attr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _last_name(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None
