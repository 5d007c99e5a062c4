"""Point a diagnosis at source: the Python files a backend actually ran, linted with
gmlp-lint, and the findings whose rule matches the diagnosed bug class, with file and line.

The files are those defining the classes of the objects the factory built (every submodule,
and their base classes outside torch) and the autograd functions found in the graph of one
forward pass of the case: the code that ran, not everything the package holds. gmlp-lint
needs libcst; without it the pointing says so and lists nothing.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from .faults.classes import BUG_CLASSES
from .inputs import Sizes, split_sizes
from .matrix import Case

# Code of torch itself is not the backend's.
_TORCH_ROOT = Path(torch.__file__).resolve().parent


def _source_file(obj: object) -> Path | None:
    try:
        name = inspect.getsourcefile(obj)
    except TypeError:  # a builtin or a C extension class
        return None
    if name is None:
        return None
    path = Path(name).resolve()
    return None if path.is_relative_to(_TORCH_ROOT) else path


def _held_modules(module: nn.Module) -> list[nn.Module]:
    """Every module in the tree, and the modules an adapter keeps out of it in a tuple or list
    attribute (ours keep Transformer Engine's that way), with theirs."""
    found: list[nn.Module] = []
    stack = [module]
    while stack:
        current = stack.pop()
        for sub in current.modules():
            if any(sub is seen for seen in found):
                continue
            found.append(sub)
            for value in vars(sub).values():
                if isinstance(value, (tuple, list)):
                    stack.extend(v for v in value if isinstance(v, nn.Module))
    return found


def _classes_of(module: nn.Module) -> list[type]:
    classes = []
    for sub in _held_modules(module):
        for cls in type(sub).__mro__:
            if cls not in classes and cls is not object:
                classes.append(cls)
    return classes


def _graph_functions(output: torch.Tensor) -> list[type]:
    """The custom autograd Function classes in the graph behind ``output``."""
    seen, found, stack = set(), [], [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        forward_cls = getattr(node, "_forward_cls", None)  # set for custom Functions' nodes
        if forward_cls is not None and forward_cls not in found:
            found.append(forward_cls)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return found


def _lines_of(obj: object) -> range:
    """The lines of a class's definition (the whole file where they cannot be found)."""
    try:
        lines, start = inspect.getsourcelines(obj)
    except (OSError, TypeError):
        return range(1, 10**9)
    return range(start, start + len(lines))


def executed_sources(module: nn.Module, case: Case, sizes: Sizes) -> dict[Path, list[range]]:
    """The files defining what ``module`` runs for ``case`` (its classes and the autograd
    functions of one forward pass), each with the line ranges of those definitions."""
    functions: list[type] = []
    # A forward that fails here (or a module without parameters of its own): the classes
    # alone still point somewhere.
    try:
        weight = next(p for m in _held_modules(module) for p in m.parameters())
        splits = split_sizes(case.splits, sizes.experts, sizes.tokens)
        x = torch.randn(sum(splits), sizes.hidden, dtype=weight.dtype, device=weight.device)
        x.requires_grad_(True)
        probs = torch.rand(sum(splits), dtype=weight.dtype, device=weight.device)
        functions = _graph_functions(module(x, splits, probs))
    except Exception:
        functions = []
    ran: dict[Path, list[range]] = {}
    for obj in (*_classes_of(module), *functions):
        path = _source_file(obj)
        if path is not None:
            ran.setdefault(path, []).append(_lines_of(obj))
    return ran


@dataclass(frozen=True)
class Pointer:
    bug_class: str  # the diagnosed class the finding's rule belongs to
    code: str
    path: Path
    line: int
    message: str

    def describe(self) -> str:
        """``<what the class is>: file:line (rule) message``; the class is named by its row
        of CONTRACT.md's bug table where it has one (``bookkeeping gated on the downgraded
        local flag``), otherwise by its title."""
        known = BUG_CLASSES[self.bug_class]
        label = known.contract or known.title
        return f"{label}: {self.path}:{self.line} ({self.code}) {self.message}"


def lint_unavailable() -> str | None:
    """Why gmlp-lint cannot run here, or None."""
    try:
        import libcst  # noqa: F401
    except ImportError:
        return "gmlp-lint needs libcst, which is not installed (pip install libcst)"
    return None


def point_case(backend, case: Case, sizes: Sizes, device, bug_classes) -> list[str]:
    """Lines for a report: where in the backend's executed source the diagnosed classes show
    (or why nothing can be pointed at)."""
    from .pair import build_fused

    why = lint_unavailable()
    if why is not None:
        return [f"source: not pointed ({why})"]
    try:
        module = build_fused(backend, case, sizes, device, None)
        files = executed_sources(module, case, sizes)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # sys.exit or any BaseException of the forward: a line too
        return [f"source: not pointed (the module could not be built again: {exc})"]
    pointers = point(files, tuple(bug_classes))
    if not pointers:
        return [f"source: no gmlp-lint finding of this class in the {len(files)} files it ran"]
    return [f"source: {p.describe()}" for p in pointers]


def point(files: dict[Path, list[range]], bug_classes: tuple[str, ...]) -> list[Pointer]:
    """gmlp-lint's findings inside the executed definitions of ``files`` whose rule belongs
    to one of ``bug_classes``."""
    from .lint import registry
    from .lint.engine import lint_source

    # A rule listed by several diagnosed classes belongs to the likeliest of them.
    class_of: dict[str, str] = {}
    for name in bug_classes:
        for code in BUG_CLASSES[name].lint_rules:
            class_of.setdefault(code, name)
    if not class_of:
        return []
    enabled = frozenset(registry.CODES)
    pointers: list[Pointer] = []
    for path, ranges in files.items():
        try:
            findings = lint_source(path.read_text(encoding="utf-8"), str(path), enabled)
        except Exception:  # a file gmlp-lint cannot read points nowhere
            continue
        pointers += [
            Pointer(class_of[f.code], f.code, path, f.line, f.message)
            for f in findings
            if f.code in class_of and any(f.line in lines for lines in ranges)
        ]
    return pointers
