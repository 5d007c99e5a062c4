"""Module classes plugged into a slot whose ``backward_dw`` the run calls, with no
``backward_dw`` of their own (issue #19, class 6: delayed wgrad across classes; GMLP039).

Megatron-style models build their layers from specs: ``ModuleSpec(module=C,
submodules=CSubmodules(in_proj=..., out_proj=...))`` handed to a layer's slot
(``TransformerLayerSubmodules(self_attention=spec, mlp=...)``). A schedule that overlaps
the weight-gradient pass (1F1B overlap, ``delay_wgrad_compute``) then calls the slot's
``backward_dw`` from outside: ``layer.self_attention.backward_dw()``, or keeps the bound
method (``self.attn_dw = layer.self_attention.backward_dw``). A new mixer or attention
class plugged into that slot that builds weight layers but has no ``backward_dw`` (its own
or through bases) leaves its layers' weight gradients uncomputed (or the call raises).

Found in the parent process with CPython's ``ast``, on few files:

* the called slots: ``X.<slot>.backward_dw`` in the text of the files naming
  ``backward_dw`` (a comment line is not a call; a file that asks ``hasattr`` /
  ``getattr`` for that slot's ``backward_dw`` guards its calls there);
* the spec sites: in the files naming ``ModuleSpec`` and some called slot as a keyword
  (``slot=``) or a dict key (``"slot":``), the classes each such slot may be given:
  ``ModuleSpec(module=C)`` (or ``ModuleSpec(C)``), a class named directly, a local or
  module-level name bound to one of these, a conditional between them, or a call of a
  function of a file naming ``ModuleSpec`` whose ``return`` gives one (followed through
  such functions);
* the classes: each found class defined once in the run (or the one the spec file
  imports), with every base up to ``torch.nn.Module`` defined in the run, no class of
  that lineage spelling ``backward_dw`` or defining ``__getattr__``, none refusing delayed
  wgrad in ``__init__`` (an ``assert`` or ``raise`` on ``delay_wgrad_compute``), and weight
  layers built at construction (``class_facts``' summaries).

The file defining such a class is given a ``SlotFact`` (part of its cache key); GMLP039
reports the class there.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass

from . import class_facts, layer_facts
from .fact_layers import last_name
from .function_index import own_nodes

SPEC_NAME = "ModuleSpec"
SPEC_WORD = SPEC_NAME.encode()
BACKWARD_DW = b"backward_dw"
_CALLED = re.compile(rb"\.(\w+)\.backward_dw\b")
# ``ModuleSpec``'s own keywords: a wrapper's ``self.module.backward_dw()`` plugs nothing.
SPEC_KEYWORDS = frozenset({b"module", b"submodules", b"params", b"metainfo"})
_GUARDED = re.compile(rb"(?:hasattr|getattr)\(\s*[\w.]*?(\w+)\s*,\s*['\"]backward_dw['\"]")
# ``assert not ...delay_wgrad_compute`` or ``if ...delay_wgrad_compute...:`` then ``raise``.
_REFUSES = re.compile(
    rb"assert\b[^\n]*delay_wgrad_compute|\bif\b[^\n]*delay_wgrad_compute[^\n]*:\s*\n\s*raise\b"
)
NEWLINE = b"\n"
# Comments and string literals, scanned left to right (so a quote inside a comment, or a
# ``#`` inside a string, is taken as what it is): a ``.<slot>.backward_dw`` inside one is
# prose (a docstring, an error message), not a call. String prefixes need no alternative:
# the literal starts at its quote either way.
_PROSE = re.compile(
    rb"#[^\r\n]*"
    rb'|"""(?:\\.|[^\\])*?"""'
    rb"|'''(?:\\.|[^\\])*?'''"
    rb'|"(?:\\.|[^"\\\r\n])*"'
    rb"|'(?:\\.|[^'\\\r\n])*'",
    re.DOTALL,
)
# Every identifier a spec file spells: ``slot_facts`` takes any name handed as a spec's
# module (lowercase ones too), so the files held back from the early workers must be found
# by the same names, or a file linted ahead would miss its fact (and be cached without it).
_IDENTIFIER = re.compile(rb"\b[A-Za-z_]\w*")
MAX_DEPTH = 12  # how many names and calls an expression is followed through
# The start of a line that begins a top-level statement (``class_facts``'s).
_TOP_LEVEL = class_facts._TOP_LEVEL


@dataclass(frozen=True, order=True)
class SlotFact:
    name: str  # the class, as its file defines it
    slot: str  # the slot it is plugged into
    spec: str  # ``path:line`` of the spec that plugs it in
    caller: str  # ``path:line`` of a ``.<slot>.backward_dw`` of the run
    layers: tuple[str, ...]  # the weight layers its construction builds


def called_slots(files: Iterable[tuple[str, bytes]]) -> dict[str, str]:
    """slot -> ``path:line`` of the first ``X.<slot>.backward_dw`` of the run."""
    found: dict[str, str] = {}
    for path, data in sorted(files):
        if BACKWARD_DW not in data:
            continue
        guarded = set(_GUARDED.findall(data))
        prose: list[tuple[int, int]] | None = None
        for match in _CALLED.finditer(data):
            slot = match.group(1)
            if slot in guarded or slot in SPEC_KEYWORDS:
                continue
            if prose is None:  # only files that spell a slot's backward_dw are scanned
                prose = [m.span() for m in _PROSE.finditer(data)]
            if _inside(prose, match.start()):
                continue
            name = slot.decode()
            if name not in found:
                found[name] = f"{path}:{data.count(NEWLINE, 0, match.start()) + 1}"
    return found


def _inside(spans: list[tuple[int, int]], position: int) -> bool:
    """Whether ``position`` falls in one of ``spans`` (sorted, not overlapping)."""
    at = bisect.bisect_right(spans, (position + 1,)) - 1  # the last span starting by then
    return at >= 0 and position < spans[at][1]


def candidate_files(files: Iterable[tuple[str, bytes]]) -> set[str]:
    """The paths ``slot_facts`` may give facts to, found from the text alone (before the
    run's facts: ``workload.files_ahead``): when some slot's ``backward_dw`` is called, the
    files defining a top-level class whose name a file naming ``ModuleSpec`` spells (its
    layers may come from a base of another file)."""
    files = list(files)
    if not called_slots(files):
        return set()
    words: set[bytes] = set()
    for _, data in files:
        if SPEC_WORD in data:
            words.update(_IDENTIFIER.findall(data))
    return {
        path
        for path, data in files
        if any(name.encode() in words for name, _ in class_facts._headers(data))
    }


def slot_facts(
    files: Iterable[tuple[str, bytes]], eager: Iterable[str] = ()
) -> dict[str, tuple[SlotFact, ...]]:
    """For each file defining a class plugged into a called slot that has no
    ``backward_dw`` and builds weight layers: its ``SlotFact``s."""
    files = list(files)
    called = called_slots(files)
    if not called:
        return {}
    contents = dict(files)
    specs = _Specs({p: d for p, d in files if SPEC_WORD in d})
    words = b"|".join(re.escape(s.encode()) for s in sorted(called))
    site = re.compile(rb"\b(?:" + words + rb")(?:\s*=(?!=)|['\"]\s*:)")
    index = _class_index(contents)
    plugged: dict[tuple[str, str], set[tuple[str, str]]] = {}  # (class, defined in) -> sites
    for path in sorted(specs.files):
        if site.search(specs.files[path]):
            for slot, name, spec in specs.module(path).slot_classes(site, called, specs):
                where = _definition(name, path, contents, index)
                if where is not None:
                    plugged.setdefault((name, where), set()).add((slot, spec))
    found: dict[str, list[SlotFact]] = {}
    for (name, where), sites in sorted(plugged.items()):
        layers = _unprotected_layers(name, where, contents, tuple(eager), index)
        if layers:
            slot, spec = min(sites)
            fact = SlotFact(name, slot, spec, called[slot], layers)
            found.setdefault(where, []).append(fact)
    return {path: tuple(facts) for path, facts in found.items()}


def _definition(name: str, spec_path: str, contents: dict[str, bytes], index) -> str | None:
    """The file defining class ``name`` as ``spec_path`` names it: itself, the one its
    ``from M import`` points to, or the only one of the run."""
    defining = index.get(name, [])
    if spec_path in defining:
        return spec_path
    if len(defining) == 1:
        return defining[0]
    text = contents[spec_path].decode("utf-8", errors="replace")
    reference = layer_facts.imported_from(text).get(name)
    matching = [
        p
        for p in defining
        if reference and layer_facts.resolves_to(reference, layer_facts.module_of(p), name)
    ]
    return matching[0] if len(matching) == 1 else None


def _class_index(contents: dict[str, bytes]) -> dict[str, list[str]]:
    """class name -> the files defining it at the top level (a scan of ``class`` lines)."""
    index: dict[str, list[str]] = {}
    for path, data in sorted(contents.items()):
        for name, _ in class_facts._headers(data):
            if path not in index.setdefault(name, []):
                index[name].append(path)
    return index


def _unprotected_layers(
    name: str, path: str, contents: dict[str, bytes], eager: tuple[str, ...], index
) -> tuple[str, ...]:
    """The weight layers class ``name`` of ``path`` builds, when nothing in its lineage
    gives it a ``backward_dw`` (every base known, none spelling it); else ()."""
    lineage: list[tuple[str, bytes]] = []
    pending = [(name, path)]
    seen: set[tuple[str, str]] = set()
    while pending:
        current, where = pending.pop()
        if (current, where) in seen:
            continue
        seen.add((current, where))
        blocks = class_facts._blocks_named(contents[where], current)
        if not blocks:
            return ()
        aliases = layer_facts.aliases(contents[where])
        for block in blocks:
            if BACKWARD_DW in block or b"__getattr__" in block or _REFUSES.search(block):
                return ()
            lineage.append((where, block))
            for base in class_facts._header(block, 0)[1]:
                base = aliases.get(base, base)
                if base in class_facts.BASES_WITHOUT_BACKWARD_DW:
                    continue
                defined = _definition(base, where, contents, index) if base != current else None
                if defined is None:
                    return ()  # a base the run does not show may define anything
                pending.append((base, defined))
    layers: list[str] = []
    for fact in class_facts._summaries(lineage, eager, contents):
        layers.extend(a for a in fact.layers if a not in layers)
    return tuple(layers)


class _Specs:
    """The files naming ``ModuleSpec``, read one top-level statement at a time when first
    needed, and their functions."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self._modules: dict[str, _Module] = {}
        self._functions: dict[str, list[tuple[_Module, ast.FunctionDef]]] = {}
        self._returned: dict[int, set[tuple[str, str]]] = {}

    def module(self, path: str) -> _Module:
        if path not in self._modules:
            self._modules[path] = _Module(path, self.files[path])
        return self._modules[path]

    def functions(self, name: str) -> list[tuple[_Module, ast.FunctionDef]]:
        if name not in self._functions:
            spelled = b"def " + name.encode() + b"("
            self._functions[name] = [
                (module, function)
                for path, data in sorted(self.files.items())
                if spelled in data
                for module in (self.module(path),)
                for function in module.defs(name)
            ]
        return self._functions[name]

    def returned(self, module: _Module, function: ast.FunctionDef, depth: int):
        key = id(function)
        if key not in self._returned:
            self._returned[key] = set()  # a recursive call gives nothing more
            found = set()
            for node in own_nodes(function):
                if isinstance(node, ast.Return) and node.value is not None:
                    found |= module.classes(node.value, function, self, depth + 1)
            self._returned[key] = found
        return self._returned[key]


class _Module:
    """One spec file, parsed one top-level statement at a time (the statements holding a
    site, a wanted ``def`` or a binding of a wanted module-level name)."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        self.data = data
        self.aliases = layer_facts.aliases(data)
        self._starts: list[int] | None = None
        self._blocks: dict[int, ast.Module | None] = {}
        self._scopes: dict[int, dict[str, list[ast.expr]]] = {}
        self._globals: dict[str, list[ast.expr] | None] = {}

    def block(self, offset: int) -> ast.Module | None:
        """The top-level statement holding ``offset``, parsed (line numbers the file's)."""
        if self._starts is None:
            self._starts = [0] + [m.end() for m in _TOP_LEVEL.finditer(self.data)]
        index = bisect.bisect_right(self._starts, offset) - 1
        start = self._starts[index]
        if start not in self._blocks:
            end = self._starts[index + 1] if index + 1 < len(self._starts) else len(self.data)
            try:  # blank lines before it: the file's line numbers at no cost
                tree = ast.parse(
                    NEWLINE * self.data.count(NEWLINE, 0, start) + self.data[start:end]
                )
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None  # a piece of a compound statement, or the file's own error
            self._blocks[start] = tree
        return self._blocks[start]

    def defs(self, name: str) -> list[ast.FunctionDef]:
        found: dict[int, ast.FunctionDef] = {}
        for match in re.finditer(rb"\bdef[ \t]+" + name.encode() + rb"\(", self.data):
            tree = self.block(match.start())
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                    found[id(node)] = node
        return list(found.values())

    def module_binding(self, name: str) -> list[ast.expr] | None:
        """The values the module's own statements bind to ``name`` (None: none does)."""
        if name not in self._globals:
            pattern = rb"(?m)^[ \t]*" + name.encode() + rb"[ \t]*(?::[^=\n]*)?=(?!=)"
            values: list[ast.expr] | None = None
            starts = set()
            for match in re.finditer(pattern, self.data):
                tree = self.block(match.start())
                if tree is not None and id(tree) not in starts:
                    starts.add(id(tree))
                    bound = _bindings(tree).get(name)
                    if bound is not None:
                        values = (values or []) + bound
            self._globals[name] = values
        return self._globals[name]

    def scope(self, function) -> dict[str, list[ast.expr]]:
        if id(function) not in self._scopes:
            self._scopes[id(function)] = _bindings(function)
        return self._scopes[id(function)]

    def slot_classes(self, site: re.Pattern, slots: dict[str, str], specs: _Specs):
        """(slot, class, ``path:line`` of the spec) for each called slot given a class."""
        found = []
        for match in site.finditer(self.data):
            tree = self.block(match.start())
            line = self.data.count(NEWLINE, 0, match.start()) + 1
            for function, node in _nodes_at(tree, line) if tree is not None else ():
                pairs = []
                if isinstance(node, ast.keyword) and node.arg in slots:
                    pairs.append((node.arg, node.value))
                elif isinstance(node, ast.Dict):
                    pairs.extend(
                        (k.value, v)
                        for k, v in zip(node.keys, node.values)
                        if isinstance(k, ast.Constant) and k.value in slots and k.lineno == line
                    )
                for slot, value in pairs:
                    for name, spec in self.classes(value, function, specs, 0):
                        found.append((slot, name, spec))
        return found

    def classes(self, expr: ast.AST, function, specs: _Specs, depth: int) -> set[tuple[str, str]]:
        """(class name, ``path:line`` of the spec) of each class ``expr`` may plug in."""
        if depth > MAX_DEPTH:
            return set()
        if isinstance(expr, ast.IfExp):
            return self.classes(expr.body, function, specs, depth + 1) | self.classes(
                expr.orelse, function, specs, depth + 1
            )
        if isinstance(expr, ast.BoolOp):
            return set().union(*(self.classes(v, function, specs, depth + 1) for v in expr.values))
        if isinstance(expr, ast.Call):
            callee = last_name(expr.func)
            if callee == SPEC_NAME:
                module = next((k.value for k in expr.keywords if k.arg == "module"), None)
                module = module if module is not None or not expr.args else expr.args[0]
                name = last_name(module) if module is not None else None
                if name is None:
                    return set()
                return {(self.aliases.get(name, name), f"{self.path}:{expr.lineno}")}
            if callee is None:
                return set()
            found: set[tuple[str, str]] = set()
            for module, defined in specs.functions(callee):
                found |= specs.returned(module, defined, depth)
            return found
        if isinstance(expr, ast.Name):
            values = self.scope(function).get(expr.id) if function is not None else None
            if values is None:
                values = self.module_binding(expr.id)
            if values is not None:
                return set().union(*(self.classes(v, function, specs, depth + 1) for v in values))
            name = self.aliases.get(expr.id, expr.id)  # a class handed as the spec
            return {(name, f"{self.path}:{expr.lineno}")} if name[:1].isupper() else set()
        return set()


def _bindings(owner: ast.AST) -> dict[str, list[ast.expr]]:
    """name -> the values bound to it in ``owner``'s own body (parameters bound to none)."""
    found: dict[str, list[ast.expr]] = {}
    args = getattr(owner, "args", None)
    if args is not None:
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is not None:
                found.setdefault(arg.arg, [])
    for node in own_nodes(owner):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            if isinstance(node.target, ast.Name):
                found.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
            found.setdefault(node.target.id, [])
    return found


def _nodes_at(tree: ast.Module, line: int) -> Iterable[tuple[ast.AST | None, ast.AST]]:
    """The nodes starting on ``line`` (keywords, dicts) with the function whose scope they
    are in (None: the module's), reached by descending only into nodes spanning it."""
    pending: list[tuple[ast.AST | None, ast.AST]] = [(None, tree)]
    while pending:
        function, node = pending.pop()
        if getattr(node, "lineno", line) == line or isinstance(node, ast.Dict):
            yield function, node
        inner = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
        for child in ast.iter_child_nodes(node):
            first = getattr(child, "lineno", None)
            if first is not None and first <= line <= (child.end_lineno or first):
                pending.append((inner, child))
