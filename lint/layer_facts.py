"""Which weight-layer classes of a run compute their weight gradient eagerly (issue #19,
class 6: the delayed-wgrad rules must not ask a ``backward_dw`` to reach such a layer).

GMLP014 and GMLP020 take a call whose callee names a ``Linear`` as building a layer whose
weight gradient may be delayed, to be computed by the owner's ``backward_dw``. A layer
class the run defines says whether that can happen: a class that takes no
``delay_wgrad_compute`` and has no ``backward_dw`` doing anything (none, or one whose body
is only a docstring, ``pass`` or ``return``), on top of bases that are eager themselves,
computes its weight gradient in its own backward; leaving it out of ``backward_dw`` loses
nothing. Megatron-LM's own ``ColumnParallelLinear`` and ``RowParallelLinear`` are such
classes ("Not supported - does nothing"); they are known by name for the trees that vendor
Megatron as a submodule outside the linted files, as is PyTorch's ``nn.Linear``.

Classes are known by module and name, never by name alone: Megatron-LM's post-training
code defines an eager ``Linear`` while Transformer Engine's ``Linear`` defers. A base or a
call names a class of the run through the file's own classes or its ``from M import N``
statements (``M`` matched as a suffix of the defining file's dotted path, relative imports
by their trailing part); anything else is not taken as eager.

Found with CPython's ``ast`` in the class blocks whose ``class`` line names a ``Linear``:
a few per file at most.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass

DELAY = "delay_wgrad_compute"
# Eager layers defined outside most linted trees, by the name a base or a call spells.
KNOWN_EAGER = frozenset({"nn.Linear", "ColumnParallelLinear", "RowParallelLinear"})
# Bases that hold no weight-gradient protocol of their own.
PLAIN_BASES = frozenset({"Module", "nn.Module", "object"})
_CONTINUING = ("#", ")", "]", "}")  # a top-level line that does not end the class
_LAYER_CLASS = re.compile(r"(?m)^class[ \t]+\w*Linear\w*[ \t]*[(:]")
LAYER_CLASS_BYTES = re.compile(_LAYER_CLASS.pattern.encode())  # which files to decode


_FROM_IMPORT = re.compile(r"(?m)^[ \t]*from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)")


@dataclass(frozen=True)
class LayerClass:
    name: str
    module: str  # the defining file's path, dotted: ``pkg.sub.layers``
    # Each base as spelled (one qualifier kept: ``nn.Linear``) and what names it: the
    # ``M.N`` of the file's import, ``module.N`` for a class of this file, or None.
    bases: tuple[tuple[str, str | None], ...]
    defers: bool  # takes delay_wgrad_compute or has a backward_dw that does something


def module_of(path: str) -> str:
    """``a/b/c.py`` -> ``a.b.c`` (an ``__init__.py`` is its package)."""
    stem = re.sub(r"(/__init__)?\.py$", "", path.replace("\\", "/"))
    return ".".join(part for part in stem.split("/") if part not in ("", "."))


def imported_from(text: str) -> dict[str, str]:
    """Names bound by the file's top-level ``from M import N [as A]``: A (or N) -> ``M.N``."""
    found = {}
    for module, names in _FROM_IMPORT.findall(text):
        for part in names.strip("()").replace("\\", " ").split(","):
            words = part.split("#")[0].split()
            if len(words) == 1 or (len(words) == 3 and words[1] == "as"):
                found[words[-1]] = f"{module}.{words[0]}"
    return found


def resolves_to(reference: str, module: str, name: str) -> bool:
    """``reference`` (``M.N`` from an import) names class ``name`` of ``module``."""
    imported_module, _, imported_name = reference.rpartition(".")
    tail = imported_module.lstrip(".")
    return imported_name == name and bool(tail) and (module == tail or module.endswith("." + tail))


def layer_classes(text: str, path: str) -> list[LayerClass]:
    """The top-level classes of one file's text whose name has ``Linear``."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # lines as Python counts them
    starts = sorted({text.count("\n", 0, m.start()) for m in _LAYER_CLASS.finditer(text)})
    if not starts:
        return []
    lines = text.split("\n")
    module = module_of(path)
    imports = imported_from(text)
    classes = [found for start in starts if (found := _class_at(lines, start)) is not None]
    own = {node.name for node, _ in classes}

    def resolved(base: str) -> tuple[str, str | None]:
        return base, f"{module}.{base}" if base in own else imports.get(base)

    return [
        LayerClass(
            node.name,
            module,
            tuple(resolved(name) for base in node.bases if (name := _spelled(base))),
            defers,
        )
        for node, defers in classes
    ]


def eager_layers(classes: Iterable[LayerClass]) -> tuple[str, ...]:
    """``module:Name`` of each layer class that computes its weight gradient eagerly: it
    does not defer, and every base is eager or plain (to a fixed point: a subclass of an
    eager subclass is eager)."""
    classes = list(classes)
    eager: set[tuple[str, str]] = set()
    changed = True
    while changed:
        changed = False
        for layer in classes:
            key = (layer.module, layer.name)
            if (
                key not in eager
                and not layer.defers
                and all(_eager_base(spelled, module, eager) for spelled, module in layer.bases)
            ):
                eager.add(key)
                changed = True
    return tuple(sorted(f"{module}:{name}" for module, name in eager))


def is_eager(name: str, reference: str | None, eager: Iterable[str]) -> bool:
    """A call or base spelled ``name`` (a bare name, bound by ``reference``, the ``M.N`` of
    the file's import, or None when the file defines it: then ``eager`` holds the file's
    own classes under the module "") names an eager layer class."""
    tail = name.rsplit(".", 1)[-1]
    if name in KNOWN_EAGER or tail in KNOWN_EAGER:
        return True
    if "." in name:
        return False  # ``pkg.Layer(...)``: which module ``pkg`` is, is not followed
    for entry in eager:
        module, _, defined = entry.partition(":")
        if reference is None:
            if module == "" and defined == name:
                return True
        elif resolves_to(reference, module, defined):
            return True
    return False


def _class_at(lines: list[str], start: int) -> tuple[ast.ClassDef, bool] | None:
    """The class whose ``class`` line is ``start``, and whether it defers. A class whose
    text names neither ``delay_wgrad_compute`` nor ``backward_dw`` cannot defer: only its
    header is parsed (most such classes are tests and argument records)."""
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if line.strip() and not line[0].isspace() and not line.startswith(_CONTINUING):
            break  # the next top-level statement
        block.append(line)
    text = "\n".join(block)
    may_defer = DELAY in text or "backward_dw" in text
    try:
        tree = ast.parse(textwrap.dedent(text) if may_defer else _header(text) + " pass")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # the file's own lint reports it
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.ClassDef):
        return None
    return node, may_defer and _defers(node)


def _header(text: str) -> str:
    """``class Name(bases):``: up to the first colon outside brackets."""
    depth = 0
    for i, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == ":" and depth == 0:
            return text[: i + 1]
    return text


def _eager_base(spelled: str, reference: str | None, eager: set[tuple[str, str]]) -> bool:
    tail = spelled.rsplit(".", 1)[-1]
    if spelled in KNOWN_EAGER or spelled in PLAIN_BASES or tail in KNOWN_EAGER:
        return True
    if reference is None:
        return False
    return any(
        reference == f"{module}.{name}" or resolves_to(reference, module, name)
        for module, name in eager
    )


def _defers(node: ast.ClassDef) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr == DELAY:
            return True
        if isinstance(sub, ast.arg) and sub.arg == DELAY:
            return True
        if isinstance(sub, ast.keyword) and sub.arg == DELAY:
            return True
        if isinstance(sub, ast.Constant) and sub.value == DELAY:
            return True
    return any(
        isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
        and item.name == "backward_dw"
        and not _does_nothing(item)
        for item in node.body
    )


def _does_nothing(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The body is only a docstring, ``pass`` or a bare ``return``/``return None``."""
    for stmt in method.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Pass):
            continue
        value = stmt.value if isinstance(stmt, ast.Return) else ""
        if value is None or (isinstance(value, ast.Constant) and value.value is None):
            continue
        return False
    return True


def _spelled(expr: ast.AST) -> str | None:
    """``Name`` or ``qualifier.Name`` (one qualifier: ``torch.nn.Linear`` is ``nn.Linear``)."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        inner = expr.value
        qualifier = inner.id if isinstance(inner, ast.Name) else getattr(inner, "attr", None)
        return f"{qualifier}.{expr.attr}" if qualifier else expr.attr
    return None


def aliases(text: str | bytes) -> dict[str, str]:
    """``A -> N`` for each top-level ``from M import N as A`` of the file (issue #19, class
    6: ``from .base import GroupedMLP as _Base; class Experts(_Base)`` derives from
    ``GroupedMLP``, and ``GL(...)`` with ``GroupedLinear as GL`` builds a ``Linear``).
    Classes are matched by name across files, so a base or callee spelled by its alias
    would otherwise be a class nobody defines."""
    if isinstance(text, bytes):
        if b" as " not in text:
            return {}
        text = text.decode("utf-8", errors="replace")
    elif " as " not in text:
        return {}
    found = {}
    for alias, reference in imported_from(text).items():
        name = reference.rpartition(".")[2]
        if name != alias:
            found[alias] = name
    return found
