"""Weight layers a class builds in place of one another (issue #19, class 6: delayed wgrad
across classes; GMLP043).

Code outside a layer class often names the layer's delayed-wgrad members one by one, to
call their ``backward_dw`` on its own schedule: Megatron-LM's fine-grained callables append
``layer.eh_proj`` to the MTP layer's list of weight-gradient callables. When the class
builds a different set of projections on another path (under hyper-connections the MTP
layer builds ``e_proj`` and ``h_proj`` and sets ``eh_proj`` to None), a list that names
``eh_proj`` alone holds None there, and the projections built instead never get their
weight gradients (Megatron-LM #5471).

Found here, with CPython's ``ast``, in the class blocks of the files where some ``self.c``
is set to None and also given a weight layer (a scan of the text first: a few classes per
tree): an ``if`` of a construction method one branch of which gives ``self.c`` a weight
layer while the other sets ``self.c = None`` (there, or before the ``if``) and gives other
attributes weight layers the first branch does not build. Each such ``c`` is kept as
``Class.c=a,b`` (``RunFacts.alternatives``: names only, so a line moved in the class
re-lints nothing); GMLP043 holds lists of ``X.c`` outside the class to it.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Iterable

from . import class_facts, fact_layers, layer_facts

# ``self.c = None`` and ``self.c = <a call that may build a layer>``, on the raw text.
_SET_NONE = re.compile(rb"self\.(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*None\b")
_SET_LAYER = re.compile(
    rb"self\.(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*\(?\s*[\w.]*(?:build_module|Linear\w*)\("
)
_GATE = (b"= None", b"self.")
BACKWARD_DW = b"backward_dw"


def alternatives_in(files: Iterable[tuple[str, bytes]], eager: Iterable[str] = ()) -> set[str]:
    """``Class.c=a,b`` for each attribute ``c`` a class of ``files`` (path, bytes) builds a
    weight layer into on one path and sets to None on another where it builds ``a``, ``b``;
    only for the ``c`` some file naming ``backward_dw`` spells on another object than
    ``self`` (the only ``c`` GMLP043 asks about: the others' classes are not parsed)."""
    files = list(files)
    candidates: dict[str, set[bytes]] = {}
    for path, data in files:
        if not all(word in data for word in _GATE):
            continue
        if b"build_module(" not in data and b"Linear" not in data:
            continue
        both = set(_SET_NONE.findall(data)) & set(_SET_LAYER.findall(data))
        if both:
            candidates[path] = both
    if not candidates:
        return set()
    names = sorted(set().union(*candidates.values()))
    spelled = re.compile(rb"\.(" + b"|".join(names) + rb")\b")
    used: set[bytes] = set()
    for _, data in files:
        if BACKWARD_DW in data:
            used.update(m.group(1) for m in spelled.finditer(data) if _not_on_self(data, m.start()))
    found: set[str] = set()
    eager = tuple(eager)
    contents = dict(files)
    for path, both in candidates.items():
        if both & used:
            found |= _in_file(path, contents[path], both & used, eager)
    found = {entry for entry in found if _defined_once(entry.split(".", 1)[0], files)}
    return _unambiguous(found, files)


def _unambiguous(found: set[str], files: list[tuple[str, bytes]]) -> set[str]:
    """The entries whose attribute no other class of the run gives a layer: a listing is
    matched to the class by the attribute's name only, so ``projector.eh_proj`` of a class
    that builds ``eh_proj`` on every path would be judged by the MTP layer's alternatives."""
    owners: dict[str, set[str]] = {}
    for entry in found:
        owner, _, attr = entry.partition("=")[0].rpartition(".")
        owners.setdefault(attr, set()).add(owner)
    builders = _builders(files, {attr.encode() for attr in owners})
    return {
        entry
        for entry in found
        if builders.get(attr := entry.partition("=")[0].rpartition(".")[2], set()) <= owners[attr]
    }


_CLASS_NAME = re.compile(rb"class[ \t]+(\w+)")


def _builders(files: list[tuple[str, bytes]], names: set[bytes]) -> dict[str, set[str]]:
    """For each of ``names``, the top-level classes of the run that give ``self.<name>`` a
    call that may build a layer (the raw text: ``build_module(``, ``*Linear*(``)."""
    found: dict[str, set[str]] = {}
    if not names:
        return found
    for _, data in files:
        if not any(b"self." + name in data for name in names):
            continue
        for block in class_facts.class_blocks(data):
            built = set(_SET_LAYER.findall(block)) & names
            named = _CLASS_NAME.match(block)
            for name in built:
                owner = named.group(1).decode() if named else ""
                found.setdefault(name.decode(), set()).add(owner)
    return found


def _defined_once(name: str, files: list[tuple[str, bytes]]) -> bool:
    """Only one file of the run defines a class ``name``: a listing's ``X`` of another
    class of the same name (a vendored copy, a test double) would be judged by this one's
    layers otherwise (the listing is matched to the class by attribute name only)."""
    pattern = re.compile(rb"^[ \t]*class[ \t]+" + re.escape(name.encode()) + rb"\b", re.MULTILINE)
    return sum(1 for _, data in files if pattern.search(data)) == 1


def _not_on_self(data: bytes, dot: int) -> bool:
    """The name before the ``.`` at ``dot`` is not ``self`` (nor another attribute's end)."""
    return not data.endswith(b"self", 0, dot) or data[dot - 5 : dot - 4].isalnum()


def _in_file(path: str, data: bytes, names: set[bytes], eager: tuple[str, ...]) -> set[str]:
    text = data.decode("utf-8", errors="replace")
    imports, aliases = layer_facts.imported_from(text), layer_facts.aliases(text)

    def is_layer(call: ast.Call) -> bool:
        return fact_layers.is_layer_call(call, imports, eager, aliases)

    wanted = [b"self." + name for name in names]
    found: set[str] = set()
    for block in class_facts.class_blocks(data):
        if not any(word in block for word in wanted):
            continue
        try:
            tree = ast.parse(block)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # the file's own lint reports it
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                found |= _in_class(node, is_layer)
    return found


def _in_class(node: ast.ClassDef, is_layer) -> set[str]:
    methods = {
        item.name: item
        for item in node.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    found: set[str] = set()
    for method in fact_layers.construction(methods):
        set_none = _set_none(method.body, nested=False)  # before an ``if`` of the method
        for test in ast.walk(method):
            if not isinstance(test, ast.If) or not test.orelse:
                continue
            # Built outside this ``if`` too (``if self.c is None: self.c = ...`` after it):
            # the None is not where the method leaves it.
            rebuilt = set(_built(_outside_of(method.body, test), is_layer))
            for built, other in ((test.body, test.orelse), (test.orelse, test.body)):
                here, there = _built(built, is_layer), _built(other, is_layer)
                for attr in here:
                    if attr in there or attr in rebuilt:
                        continue
                    if not (attr in _set_none(other) or attr in set_none):
                        continue
                    instead = [a for a in there if a not in here and a != attr]
                    if instead:
                        found.add(f"{node.name}.{attr}={','.join(instead)}")
    return found


def _built(statements: list[ast.stmt], is_layer) -> list[str]:
    """The ``self`` attributes the statements give a weight layer, in order."""
    nodes = [n for s in statements for n in ast.walk(s)]
    calls = {id(n) for n in nodes if type(n) is ast.Call and is_layer(n) and not _no_delay(n)}
    if not calls:
        return []
    attrs: list[str] = []
    for n in nodes:
        attr = fact_layers.filled_attribute(n, lambda v: any(id(c) in calls for c in ast.walk(v)))
        if attr is not None and attr not in attrs:
            attrs.append(attr)
    return attrs


def _outside_of(statements: list[ast.stmt], skipped: ast.If) -> list[ast.stmt]:
    """The statements, and those nested in them, but for ``skipped`` and what it holds."""
    found: list[ast.stmt] = []
    pending = list(statements)
    while pending:
        current = pending.pop()
        if current is skipped:
            continue
        found.append(current)
        for field in ("body", "orelse", "finalbody", "handlers"):
            pending.extend(getattr(current, field, None) or [])
    return [_shallow(statement) for statement in found]


def _shallow(statement: ast.stmt) -> ast.stmt:
    """A compound statement without its nested blocks (those are listed on their own),
    so that walking it sees its header only; a simple statement as it is."""
    if not any(getattr(statement, f, None) for f in ("body", "orelse", "finalbody", "handlers")):
        return statement
    header = copy.copy(statement)
    for field in ("body", "orelse", "finalbody", "handlers"):
        if hasattr(header, field):
            setattr(header, field, [])
    return header


def _no_delay(call: ast.Call) -> bool:
    """``delay_wgrad_compute=False`` handed to the build: a layer with no delayed wgrad,
    which no ``backward_dw`` list has to name."""
    return any(
        k.arg == "delay_wgrad_compute"
        and isinstance(k.value, ast.Constant)
        and k.value.value is False
        for k in call.keywords
    )


def _set_none(statements: list[ast.stmt], nested: bool = True) -> set[str]:
    """The ``self`` attributes the statements set to None (with ``nested``, also in the
    blocks nested in them: an ``elif`` chain's other branches)."""
    nodes = (n for s in statements for n in ast.walk(s)) if nested else iter(statements)
    return {
        target.attr
        for s in nodes
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) and s.value.value is None
        for target in s.targets
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }
