"""The code a written reproduction embeds so that it needs no gmlp_check: a factory that lives
inside a package (gmlp-check's Transformer Engine adapters) and the modules of that package it
imports, followed import by import, each verbatim.

The reproduction installs them at run time under a private package name (``PRIVATE``) in place
of the package's: ``gmlp_check.adapters.te_sequential`` runs as
``_embedded.adapters.te_sequential``. That works without changing a byte of their source
because embedded code imports its own package relatively only (``from ..refimpl.config import
MLPConfig``); an absolute import of the package inside the closure is refused, since it would
need the package installed. Packages that are only parents of embedded modules are created
empty (their ``__init__`` is not what the factory runs); a package imported for its own names
is embedded like any module.

Imports under ``if TYPE_CHECKING:`` never run and are not followed; imports inside functions
are, since they run when the function does.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from .errors import short

PRIVATE = "_embedded"


class EmbedError(ValueError):
    """The factory's module cannot be embedded (an absolute import of its own package)."""


@dataclass(frozen=True)
class EmbeddedModule:
    original: str  # its name in the package, e.g. gmlp_check.adapters.te_common
    private: str  # its name in the reproduction, e.g. _embedded.adapters.te_common
    is_package: bool
    source: str  # the file's text, exactly as read


def _spec(name: str):
    """The module's spec, or None. Finding ``a.b`` imports the package ``a``: user code, whose
    failure (an exception, sys.exit, any BaseException but Ctrl-C) is an EmbedError."""
    try:
        return importlib.util.find_spec(name)
    except (ImportError, AttributeError, ValueError):  # a parent that is a module, not a package
        return None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise EmbedError(f"{name}: importing its package failed ({short(exc)})") from None


def _is_module(name: str) -> bool:
    return _spec(name) is not None


def type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import statements under ``if TYPE_CHECKING:``, which never run."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden |= {id(inner) for stmt in node.body for inner in ast.walk(stmt)}
    return hidden


def _imported(name: str, is_package: bool, source: str, root: str) -> list[str]:
    """The modules of ``root`` that the module ``name`` imports (relatively)."""
    tree = ast.parse(source)
    hidden = type_checking_only(tree)
    package = name if is_package else name.rpartition(".")[0]
    found: list[str] = []
    for node in ast.walk(tree):
        if id(node) in hidden or not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Import) or node.level == 0:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            if any(n == root or n.startswith(root + ".") for n in names if n):
                raise EmbedError(
                    f"{name} (line {node.lineno}) imports {root} by its absolute name; code a "
                    f"reproduction embeds must import its own package relatively"
                )
            continue
        base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
        base = f"{base}.{node.module}" if node.module else base
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            found.append(sub if _is_module(sub) else base)
    return found


def closure(target: str, root: str) -> list[EmbeddedModule]:
    """The modules of package ``root`` that the factory ``target`` (module:factory) needs,
    sorted by name, each renamed under ``PRIVATE``."""
    module_name = target.split(":")[0]
    todo, found = [module_name], {}
    while todo:
        name = todo.pop()
        if name in found:
            continue
        spec = _spec(name)
        if spec is None or spec.origin is None:
            raise EmbedError(f"{name}: no source file to embed")
        is_package = spec.submodule_search_locations is not None
        found[name] = (is_package, Path(spec.origin).read_text(encoding="utf-8"))
        todo += _imported(name, is_package, found[name][1], root)
    return [
        EmbeddedModule(name, private_name(name, root), is_package, source)
        for name, (is_package, source) in sorted(found.items())
    ]


def private_name(name: str, root: str) -> str:
    return PRIVATE + name.removeprefix(root)


def parent_packages(modules: list[EmbeddedModule]) -> list[str]:
    """Every package the embedded modules sit in, under ``PRIVATE`` (embedded or empty)."""
    parents = {PRIVATE}
    for m in modules:
        parts = m.private.split(".")
        parents |= {".".join(parts[:i]) for i in range(1, len(parts))}
        if m.is_package:
            parents.add(m.private)
    return sorted(parents)


def origin(module: EmbeddedModule) -> str:
    """The file name tracebacks show for an embedded module: where its source came from."""
    return f"<embedded {module.original}>"


def render(modules: list[EmbeddedModule]) -> list[str]:
    """The reproduction's EMBEDDED, ORIGINS and PACKAGES assignments: each source as one string
    literal per line, so that the file reads as the code it embeds."""
    lines = ["EMBEDDED = {"]
    for m in modules:
        lines.append(f"    {m.private!r}: (  # {m.original}, verbatim")
        source_lines = m.source.splitlines(keepends=True) or [""]
        lines += [f"        {line!r}" for line in source_lines]
        lines.append("    ),")
    lines.append("}")
    lines.append("ORIGINS = {")
    lines += [f"    {m.private!r}: {origin(m)!r}," for m in modules]
    lines.append("}")
    lines.append(f"PACKAGES = {tuple(parent_packages(modules))!r}")
    return lines
