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
files that subclass one of these classes (and only their lineage), so no other file's cache key
changes when a base is edited.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

from . import fact_layers, layer_facts, registration_facts

BACKWARD_DW = "backward_dw"
DELAY = "delay_wgrad_compute"
_DEFINES = (b"def " + BACKWARD_DW.encode(), DELAY.encode())
# The words of a call that builds a weight layer; the same test as analysis/classes.py's.
# Bases known not to define backward_dw: a class deriving only from these (and from classes
# of the run that lack it) has none.
BASES_WITHOUT_BACKWARD_DW = frozenset(
    {"object", "Module", "ABC", "MegatronModule", "Protocol", "Generic"}
)
SPEC_BUILDERS = frozenset({"build_module"})
LAYER_WORDS = ("linear", "proj")
# Text that may build a weight layer (a gate on which subclass files to analyse: it may say
# yes where the class model later finds no layer, never no where it finds one).
LAYER_TEXT = (b"Linear", b"build_module")  # looked for in ``__init__``
# Methods that put a value into a container attribute: ``self.fns.append(f)``.
STORING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})
_WORD = re.compile(rb"\w+")
# How many levels of subclasses in files without the words are followed.
MAX_INTERMEDIATE_LEVELS = 3
# Pseudo-attributes of a method's mentions (analysis/class_model.py reads them): it calls
# ``super()``; its body only raises.
SUPER = "<super>"
RAISES = "<raises>"
# The start of a line that begins a top-level statement (not a comment or a closing bracket).
_TOP_LEVEL = re.compile(rb"\n(?=[^\s#)\]}])")
_STORING_NODES = frozenset({ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Call})


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


def class_facts(
    files: Iterable[tuple[str, bytes]], eager: Iterable[str] = ()
) -> dict[str, tuple[ClassFact, ...]]:
    """For each file (given as path, bytes) that subclasses a delayed-wgrad class of another
    file: the summaries of that class and of its delayed-wgrad bases. A delayed-wgrad class
    is a top-level class that defines ``backward_dw`` or takes the delay mode in an
    ``__init__``; only the blocks of the classes some file needs are parsed. ``eager``: the
    run's eager layer classes (``layer_facts.eager_layers``), which build no layer here."""
    files = list(files)
    contents = dict(files)
    candidates, wanted = _subclasses(files, contents)
    summaries: dict[str, list[ClassFact]] = {}
    found: dict[str, tuple[ClassFact, ...]] = {}
    for path, needed in wanted.items():
        pending, lineage = sorted(needed), []
        while pending:
            name = pending.pop()
            if name not in summaries:
                summaries[name] = _summaries(candidates[name], eager, contents)
            for fact in summaries[name]:
                if fact not in lineage:
                    lineage.append(fact)
                    pending.extend(b for b in fact.bases if b in candidates)
        if lineage and (
            _may_lose_layers(contents[path], needed, lineage)
            or registration_facts.registers(contents[path])
        ):
            found[path] = tuple(sorted(lineage))
    return found


def subclass_files(files: Iterable[tuple[str, bytes]]) -> set[str]:
    """The paths ``class_facts`` may give summaries to, found without the run's eager layers
    (which decide what the summaries hold, not who gets them)."""
    files = list(files)
    return set(_subclasses(files, dict(files))[1])


def _subclasses(
    files: list[tuple[str, bytes]], contents: dict[str, bytes]
) -> tuple[dict[str, list[tuple[str, bytes]]], dict[str, set[str]]]:
    """The delayed-wgrad classes and those deriving from them (name -> (path, block) of
    each definition), and for each file that subclasses one of them in a class of its own,
    the ones it derives from."""
    candidates: dict[str, list[tuple[str, bytes]]] = {}
    for path, data in files:
        if any(word in data for word in _DEFINES):
            for block in class_blocks(data):
                if _DEFINES[0] in block or (_DEFINES[1] in block and b"def __init__" in block):
                    name, _ = _header(block, 0)
                    candidates.setdefault(name, []).append((path, block))
    if not candidates and not any(registration_facts.registers(data) for _, data in files):
        return {}, {}
    headers = {path: _aliased(_headers(data), data) for path, data in files}
    _add_intermediates(candidates, headers, contents)
    wanted: dict[str, set[str]] = {}
    for path, found_headers in headers.items():
        own = {name for name, _ in found_headers}
        needed = {
            b for _, bases in found_headers for b in bases if b in candidates and b not in own
        }
        if needed:
            wanted[path] = needed
    # Files that register layers or delay modes on instances of classes of other files
    # (``registration_facts``) need those classes' summaries too, whatever they subclass.
    for path, names in registration_facts.registered_classes(files, headers).items():
        for name, where in names.items():
            if name not in candidates:
                # Only a class whose construction may build a layer can lose one (a config
                # dataclass of thousands of lines is not summarised for nothing).
                blocks = _blocks_named(contents[where], name)
                blocks = [b for b in blocks if any(w in _construction_text(b) for w in LAYER_TEXT)]
                if not blocks:
                    continue
                candidates[name] = [(where, b) for b in blocks]
            wanted.setdefault(path, set()).add(name)
    return candidates, wanted


def _aliased(found: Iterable[tuple[str, list[str]]], data: bytes) -> list[tuple[str, list[str]]]:
    """Class headers with each base spelled by an import alias given its real name (the
    file's imports are read only when some base is spelled after an ``as``: most files
    import no base under an alias, and this runs on every file of the run)."""
    found = list(found)
    if not any(b" as " + b.encode() in data for _, bases in found for b in bases):
        return found
    aliases = layer_facts.aliases(data)
    return [(name, [aliases.get(b, b) for b in bases]) for name, bases in found]


def _blocks_named(data: bytes, name: str) -> list[bytes]:
    return [block for block in class_blocks(data) if _header(block, 0)[0] == name]


def _may_lose_layers(data: bytes, needed: set[str], lineage: list[ClassFact]) -> bool:
    """Some class of the file that derives from ``needed`` may build a weight layer, or
    defines ``backward_dw`` or a method the bases' ``backward_dw`` reaches: otherwise the
    bases' protocol covers it as it covers them, and the file need not be analysed for it
    (linting a large file costs far more than this look at the text of its subclasses)."""
    defs = [
        b"def " + name.encode() + b"(" for name in {BACKWARD_DW, *_reached_by_backward_dw(lineage)}
    ]
    aliases = layer_facts.aliases(data)
    for block in class_blocks(data):
        if not {aliases.get(b, b) for b in _header(block, 0)[1]} & needed:
            continue
        init = _construction_text(block)
        if any(word in init for word in LAYER_TEXT) or any(d in block for d in defs):
            return True
    return False


def _construction_text(block: bytes) -> bytes:
    """The text of ``__init__`` and of the methods of the block it calls through ``self.``
    (one level: a layer built by ``self._build_layers()`` is built at construction)."""
    init = _method_text(block, b"__init__")
    helpers = set(re.findall(rb"self\.(\w+)\(", init))
    return init + b"".join(_method_text(block, name) for name in sorted(helpers))


def _method_text(block: bytes, name: bytes) -> bytes:
    """The text of method ``name`` of a class block: from its ``def`` to the next ``def``
    at the same indentation or less (nested functions stay in)."""
    start = block.find(b"def " + name + b"(")
    if start < 0:
        return b""
    indent = start - (block.rfind(b"\n", 0, start) + 1)
    end = re.compile(rb"\n[ \t]{0,%d}(?:async\s+)?def\s" % indent).search(block, start)
    return block[start : end.start() if end else len(block)]


def _reached_by_backward_dw(lineage: list[ClassFact]) -> set[str]:
    """The names the lineage's ``backward_dw`` methods mention, through the methods they
    name (any definition in the lineage: an over-approximation, which only analyses more)."""
    methods: dict[str, set[str]] = {}
    for fact in lineage:
        for name, attrs in fact.methods:
            methods.setdefault(name, set()).update(attrs)
    reached, pending = set(), [BACKWARD_DW]
    while pending:
        for attr in methods.get(pending.pop(), ()):
            if attr not in reached:
                reached.add(attr)
                pending.append(attr)
    return reached


def _add_intermediates(candidates, headers, contents) -> None:
    """A class of a file that names none of the words, deriving from a delayed-wgrad class,
    passes the protocol on: its subclasses need it summarised too (up to a few levels)."""
    for _ in range(MAX_INTERMEDIATE_LEVELS):
        added = {
            (name, path)
            for path, found in headers.items()
            for name, bases in found
            if name not in candidates and any(b in candidates for b in bases)
        }
        if not added:
            return
        for name, path in added:
            for block in _blocks_named(contents[path], name):
                candidates.setdefault(name, []).append((path, block))


def _summaries(
    definitions: list[tuple[str, bytes]], eager: Iterable[str], contents: dict[str, bytes]
) -> list[ClassFact]:
    found = []
    for path, block in definitions:
        try:
            tree = ast.parse(block)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # the file's own lint reports it
        text = contents[path].decode("utf-8", errors="replace")
        imports, aliases = layer_facts.imported_from(text), layer_facts.aliases(text)

        def is_layer(call: ast.Call, imports=imports, aliases=aliases) -> bool:
            return fact_layers.is_layer_call(call, imports, eager, aliases)

        found.extend(
            _summary(n, path, is_layer, aliases) for n in tree.body if isinstance(n, ast.ClassDef)
        )
    return found


def _headers(data: bytes) -> Iterable[tuple[str, list[str]]]:
    """(name, the last names of its bases) of each top-level class (a scan of the
    ``class`` lines only: cheap on any file)."""
    start = 0 if data.startswith(b"class ") else data.find(b"\nclass ")
    while start != -1:
        yield _header(data, start + (data[start : start + 1] == b"\n"))
        start = data.find(b"\nclass ", start + 1)


def _header(data: bytes, start: int) -> tuple[str, list[str]]:
    end = data.find(b":", start)
    header = data[start:end] if end != -1 else data[start:]
    words = _WORD.findall(header)
    name = words[1].decode() if len(words) > 1 else ""
    opening = header.find(b"(")
    bases: list[str] = []
    if opening != -1:
        for part in header[opening + 1 :].split(b","):
            tail = _WORD.findall(part.split(b"[")[0].split(b"=")[-1])
            if tail and b"=" not in part:
                bases.append(tail[-1].decode())
    return name, bases


def class_blocks(data: bytes) -> Iterable[bytes]:
    """The text of each top-level class (decorators left out): from its ``class`` line to
    the next line that starts a top-level statement."""
    start = 0 if data.startswith(b"class ") else data.find(b"\nclass ") + 1
    while start > 0 or data.startswith(b"class "):
        end = _TOP_LEVEL.search(data, start)
        yield data[start : end.start() if end else len(data)]
        if end is None:
            return
        start = data.find(b"\nclass ", end.start()) + 1
        if start == 0:
            return


def _summary(node: ast.ClassDef, path: str, is_layer, aliases: dict[str, str]) -> ClassFact:
    """One walk over each method (the run pays for this before any file is linted)."""
    bases = tuple(
        aliases.get(name, name) for base in node.bases if (name := fact_layers.last_name(base))
    )
    methods: dict[str, set[str]] = {}
    stores: dict[str, set[str]] = {}
    spells_delay = False
    nodes = {
        item.name: item
        for item in node.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    for item in nodes.values():
        mentioned = methods.setdefault(item.name, set())
        init = item.name == "__init__"
        if init and any(a.arg == DELAY for a in item.args.args + item.args.kwonlyargs):
            spells_delay = True
        if _only_raises(item):
            mentioned.add(RAISES)
        for sub in ast.walk(item):
            kind = type(sub)
            if kind is ast.Attribute:
                if type(sub.value) is ast.Name and sub.value.id == "self":
                    mentioned.add(sub.attr)
                spells_delay = spells_delay or (init and sub.attr == DELAY)
            elif kind is ast.keyword:
                spells_delay = spells_delay or (init and sub.arg == DELAY)
            elif kind is ast.Call and type(sub.func) is ast.Name and sub.func.id == "super":
                mentioned.add(SUPER)
            if kind in _STORING_NODES:
                stored = _stored(sub)
                if stored is not None:
                    attr, value = stored
                    stores.setdefault(attr, set()).update(
                        n.attr for n in ast.walk(value) if _is_self_attr(n)
                    )
    layers = fact_layers.built_layers(nodes, is_layer)
    return ClassFact(
        node.name,
        path,
        bases,
        tuple((name, tuple(sorted(attrs))) for name, attrs in methods.items()),
        tuple((name, tuple(sorted(attrs))) for name, attrs in sorted(stores.items())),
        tuple(layers),
        spells_delay,
    )


def _only_raises(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The body is a ``raise`` (after a docstring, if any)."""
    body = [
        s
        for s in method.body
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    return len(body) == 1 and isinstance(body[0], ast.Raise)


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


def _is_self_attr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )
