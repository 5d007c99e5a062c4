"""What a rule needs to know about the functions of the files linted in the same run.

Functions known by what they do, not by their names, so the rules keep working when a
helper is renamed, a project writes its own, or it sits in another module than its caller:

* for each per-parameter flag a rule gates on (``FLAGS``), the functions that return a
  value computed from it. Transformer Engine's ``get_accumulate_flag_in_param`` is
  ``return not getattr(weight_param, "overwrite_main_grad", False)``; a module that calls
  such a helper gates on its result without ever spelling the attribute;
* the bookkeeping helpers: functions that mark ``grad_added_to_main_grad = True`` on what
  they are given or make a dummy weight gradient for their caller. A function calling one
  has done the bookkeeping; a dummy one returns must reach autograd;
* the gradient helpers: functions that return a GEMM's product (``dy.t() @ x``,
  ``general_gemm(...)[0]``) and can write no main_grad (they never spell it and hand their
  arguments only to GEMMs and tensor methods that make new tensors). What one returns is a
  fresh weight gradient, and giving it the weight writes nothing into main_grad;
* whether the run uses Transformer Engine's delayed-wgrad contract (``delayed_wgrad``): some
  function reads the attribute ``skip_backward_post_hook`` (``p.skip_backward_post_hook``,
  ``getattr`` / ``hasattr`` with that name) or calls (or asks ``hasattr`` for)
  ``register_wgrad_accumulation_and_reduce_hooks``. A parameter TE's layers mark so gets its
  weight gradient in ``backward_dw()``, after autograd has finished with it: a
  gradient-ready hook that ignores the mark fires with ``.grad`` still None (GMLP028). Setting
  the mark (``param.skip_backward_post_hook = True``) and defining the method are not a
  use: TE's own modules do both.
* the weight users (``weight_users``): top-level functions that use a parameter as the
  weight Parameter (take ``P.main_grad`` / ``P.get_main_grad`` / a main_grad flag, or a
  ``weakref`` of it, also through ``P[i]``, a loop or comprehension variable over ``P``, or
  a lambda). A file that imports one and hands it a gathered or quantized copy of a weight
  hands the bookkeeping the copy (GMLP037 across files). Looked for only among the names
  that files naming an ``origin_`` twin and main_grad import (GMLP037 follows nothing else).

Found with CPython's ``ast`` in the few functions that spell the words, so it costs next to
nothing. From other files only functions defined at the top level count as bookkeeping
helpers: they are what a caller imports, while a method's name (``backward``) is shared by
unrelated classes. A helper defined outside the linted files is known only by the names in
``analysis.patterns.KNOWN_OVERWRITE_HELPERS``.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from functools import partial

from . import layer_facts

# The per-parameter flags whose helpers are looked for, by the field of ``RunFacts`` that
# holds their helpers.
FLAGS = {"overwrite": "overwrite_main_grad", "zero_out": "zero_out_wgrad"}
GRAD_ADDED = "grad_added_to_main_grad"
DUMMY = "dummy"


@dataclass(frozen=True)
class RunFacts:
    """Function names by what the functions do (see the module docstring). Sorted tuples,
    not sets: the cache key is built from the repr."""

    overwrite: tuple[str, ...] = ()
    zero_out: tuple[str, ...] = ()
    bookkeeping: tuple[str, ...] = ()
    gradient: tuple[str, ...] = ()
    # Layer classes that compute their weight gradient eagerly (``layer_facts``).
    eager_layers: tuple[str, ...] = ()
    # The spellings of the delayed-wgrad contract some function of the run uses (see the
    # module docstring): ``DELAYED_WGRAD_WORDS`` found read or called. Names, not paths:
    # the cache keys of the other files do not change when one more file uses it.
    delayed_wgrad: tuple[str, ...] = ()
    # Top-level functions using a parameter as the weight Parameter (see the module
    # docstring), as ``name:parameter:position`` (position among the positional parameters,
    # -1 for a keyword-only one).
    weight_users: tuple[str, ...] = ()

    def __or__(self, other: RunFacts) -> RunFacts:
        return RunFacts(
            **{
                f.name: tuple(sorted({*getattr(self, f.name), *getattr(other, f.name)}))
                for f in fields(self)
            }
        )

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))


NO_RUN_FACTS = RunFacts()
_WORDS = (*FLAGS.values(), GRAD_ADDED, DUMMY)
SKIP_HOOK = "skip_backward_post_hook"
REGISTER_WGRAD_HOOKS = "register_wgrad_accumulation_and_reduce_hooks"
DELAYED_WGRAD_WORDS = (SKIP_HOOK, REGISTER_WGRAD_HOOKS)
_DELAYED_WGRAD_BYTES = tuple(word.encode() for word in DELAYED_WGRAD_WORDS)
# What a weight user's text must hold (``main_grad`` covers its flags and getter).
WEIGHT_ATTRIBUTES = ("main_grad", "get_main_grad", GRAD_ADDED, *FLAGS.values())
_WEIGHT_USE_WORDS = ("main_grad", "zero_out_wgrad", "weakref")
_WEIGHT_USE_BYTES = tuple(word.encode() for word in _WEIGHT_USE_WORDS)
_ORIGIN_BYTES = (b"origin_", b"orig_", b"original_")  # analysis.provenance.ORIGIN_PREFIXES
# After the mark, what makes it an assignment (TE's layers set it in long ``__init__``s: those
# are not parsed for it).
_ASSIGNED = re.compile(r"[ \t]*=(?!=)")


def run_facts(contents: Iterable[tuple[str, bytes]]) -> RunFacts:
    """What another file may use of ``contents`` (the files of a run, as path and bytes)."""
    found = NO_RUN_FACTS
    layers: list[layer_facts.LayerClass] = []
    files: list[bytes] = []
    wanted: set[bytes] = set()  # names imported by files with an ``origin_`` twin
    for path, data in contents:
        files.append(data)
        if b"main_grad" in data and any(o in data for o in _ORIGIN_BYTES):
            wanted |= _imported_by(data)
        helpers = any(word.encode() in data for word in _WORDS) or _PRODUCT_BYTES.search(data)
        layered = b"Linear" in data and layer_facts.LAYER_CLASS_BYTES.search(data)
        # One use of the contract is enough: once both spellings are known, no file is
        # parsed for it again.
        contract = len(found.delayed_wgrad) < len(DELAYED_WGRAD_WORDS) and any(
            word in data for word in _DELAYED_WGRAD_BYTES
        )
        if helpers or layered or contract:
            text = data.decode("utf-8", errors="replace")
            if helpers:
                found = found | facts_in(text, imported=True)
            if contract:
                found = found | RunFacts(delayed_wgrad=delayed_wgrad_in(text))
            if layered:
                layers.extend(layer_facts.layer_classes(text, path))
    # GMLP037 follows calls from files with an ``origin_`` twin only: the functions worth
    # finding are those such files import, in the files that define one of them.
    weight_users = set()
    for data in files if wanted else ():
        defined = _top_level_defs(data) & wanted
        if defined and any(word in data for word in _WEIGHT_USE_BYTES):
            text = data.decode("utf-8", errors="replace")
            names = {name.decode() for name in defined}
            weight_users.update(weight_users_in(text, names))
    return replace(
        found,
        eager_layers=layer_facts.eager_layers(layers),
        weight_users=tuple(sorted(weight_users)),
    )


def facts_in(text: str, imported: bool = False) -> RunFacts:
    """What one file's text defines; with ``imported``, only the helpers another file can
    use (``HelperKind.methods_imported``)."""
    functions = _Functions(text)
    found: dict[str, set[str]] = {kind.field: set() for kind in HELPER_KINDS}
    for kind in HELPER_KINDS:
        for pattern in kind.lines:
            for function, top_level in functions.matching(pattern):
                if (top_level or not imported or kind.methods_imported) and kind.does(function):
                    found[kind.field].add(function.name)
    # The run's eager layers are judged over all its files at once (``run_facts``).
    # (A file's own classes are under the module "": its bare names need no import.)
    eager = () if imported else layer_facts.eager_layers(layer_facts.layer_classes(text, ""))
    contract = () if imported else delayed_wgrad_in(text)  # ``run_facts`` asks for it itself
    return RunFacts(
        **{field: tuple(sorted(names)) for field, names in found.items()},
        eager_layers=eager,
        delayed_wgrad=contract,
    )


def delayed_wgrad_in(text: str) -> tuple[str, ...]:
    """The spellings of the delayed-wgrad contract (``DELAYED_WGRAD_WORDS``) a function of
    ``text`` reads or calls (see the module docstring); sorted. Only the functions with a
    line that may use one (``_may_use``) are parsed; code at a module's or class's top
    level is not looked at."""
    offsets = _may_use(text)
    if not offsets:
        return ()
    functions = _Functions(text)
    if functions.text is not text:  # other line ends: the offsets of the normalised text
        offsets = _may_use(functions.text)
    used: set[str] = set()
    for function, _ in functions.at_offsets(offsets):
        used |= _contract_uses(function)
        if len(used) == len(DELAYED_WGRAD_WORDS):
            break
    return tuple(sorted(used))


_IMPORT_FROM = re.compile(rb"from[ \t]+[\w.]+[ \t]+import[ \t]*(\([^)]*\)|[^\n]*)")


def _top_level_defs(data: bytes) -> set[bytes]:
    """The names of the functions ``data`` defines at the top level (``def`` at column 0),
    found with ``bytes.find``."""
    names = set()
    start = 0 if data.startswith(b"def ") else data.find(b"\ndef ")
    while start >= 0:
        begin = data.find(b"def ", start) + 4
        end = data.find(b"(", begin)
        if end < 0:
            break
        names.add(data[begin:end].strip())
        start = data.find(b"\ndef ", end)
    return names


def _imported_by(data: bytes) -> set[bytes]:
    """The names ``from ... import`` statements of ``data`` import (before any ``as``)."""
    names = set()
    start = data.find(b"from ")
    while start >= 0:
        # Matched only where ``from `` is (a regular expression scanning the whole file
        # costs ten times more).
        match = _IMPORT_FROM.match(data, start)
        start = data.find(b"from ", start + 5)
        if match is None or (match.start() and data[match.start() - 1 : match.start()].isalnum()):
            continue
        for part in match.group(1).split(b","):
            words = part.split(b"#", 1)[0].strip(b" \t\r\n()\\").split()
            if words and words[0].decode("ascii", "replace").isidentifier():
                names.add(words[0])
    return names


def weight_users_in(text: str, names: set[str] | None = None) -> list[str]:
    """The top-level functions of ``text`` (named in ``names``, when given) that use a
    parameter as the weight Parameter, as ``name:parameter:position``
    (``RunFacts.weight_users``). Only such functions with a line spelling one of
    ``_WEIGHT_USE_WORDS`` are parsed."""
    offsets = sorted(start for word in _WEIGHT_USE_WORDS for start in _find_all(text, word))
    if not offsets:
        return []
    functions = _Functions(text)
    if functions.text is not text:
        offsets = sorted(
            start for word in _WEIGHT_USE_WORDS for start in _find_all(functions.text, word)
        )
    found = []
    for function, _ in functions.at_offsets(offsets, top_level_only=True, names=names):
        owners, loops = _weight_owners(function)
        if not owners:
            continue
        args = function.args
        positional = [a.arg for a in (*args.posonlyargs, *args.args)]
        for position, name in [*enumerate(positional), *((-1, a.arg) for a in args.kwonlyargs)]:
            if name in owners or loops.get(name, set()) & owners:
                found.append(f"{function.name}:{name}:{position}")
    return found


def _find_all(text: str, word: str) -> Iterable[int]:
    start = text.find(word)
    while start >= 0:
        yield start
        start = text.find(word, start + len(word))


def _weight_owners(function: FunctionNode) -> tuple[set[str], dict[str, set[str]]]:
    """One walk of ``function`` (lambdas included): the names it takes main_grad, a
    main_grad flag or a weakref from (``X``, ``X[i]``), and the loop / comprehension
    variables over each plain name (``for w in X``)."""
    owners: set[str] = set()
    loops: dict[str, set[str]] = {}
    for node in _nodes_with_lambdas(function):
        if isinstance(node, ast.Attribute):
            if node.attr in WEIGHT_ATTRIBUTES and (name := _owner(node.value)) is not None:
                owners.add(name)
        elif isinstance(node, (ast.For, ast.comprehension)):
            if isinstance(node.iter, ast.Name) and isinstance(node.target, ast.Name):
                loops.setdefault(node.iter.id, set()).add(node.target.id)
        elif (
            isinstance(node, ast.Call)
            and node.args
            and _takes_from_first(node)
            and (name := _owner(node.args[0])) is not None
        ):
            owners.add(name)
    return owners, loops


def _takes_from_first(call: ast.Call) -> bool:
    """``weakref.ref(X)`` / ``ref(X)`` / ``proxy(X)``, or ``getattr`` / ``hasattr`` /
    ``setattr`` of a main_grad attribute on X."""
    callee = _callee_name(call)
    func = call.func
    if callee in ("ref", "proxy"):
        return isinstance(func, ast.Name) or (
            isinstance(func.value, ast.Name) and func.value.id == "weakref"
        )
    return (
        callee in ("getattr", "hasattr", "setattr")
        and isinstance(func, ast.Name)
        and len(call.args) >= 2
        and isinstance(call.args[1], ast.Constant)
        and call.args[1].value in WEIGHT_ATTRIBUTES
    )


def _nodes_with_lambdas(function: FunctionNode) -> Iterable[ast.AST]:
    """The function's nodes and its lambdas', not those of nested functions or classes."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _owner(expr: ast.AST) -> str | None:
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _may_use(text: str) -> list[int]:
    """Where ``text`` may read the mark or call the registration, in order: the mark as a
    string (``getattr(p, "skip_backward_post_hook", False)``) or an attribute not assigned
    to, the registration anywhere but after ``def``. Found with ``str.find``: a regular
    expression scanning for the words costs a hundred times more on a long file."""
    found = []
    for word in DELAYED_WGRAD_WORDS:
        start = text.find(word)
        while start >= 0:
            before = text[start - 1 : start] if start else ""
            end = start + len(word)
            if word == SKIP_HOOK:
                ok = before in ("'", '"') or (before == "." and not _ASSIGNED.match(text, end))
            else:
                ok = not text.endswith("def ", 0, start)
            if ok:
                found.append(start)
            start = text.find(word, end)
    return sorted(found)


def _contract_uses(function: FunctionNode) -> set[str]:
    used: set[str] = set()
    for node in _own_nodes(function):
        if isinstance(node, ast.Attribute) and node.attr in DELAYED_WGRAD_WORDS:
            # Read, or called: ``p.skip_backward_post_hook = True`` marks, it does not ask.
            if isinstance(node.ctx, ast.Load):
                used.add(node.attr)
        elif (
            isinstance(node, ast.Call)
            and _callee_name(node) in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in DELAYED_WGRAD_WORDS
        ):
            used.add(node.args[1].value)
        elif isinstance(node, ast.Call) and _callee_name(node) == REGISTER_WGRAD_HOOKS:
            used.add(REGISTER_WGRAD_HOOKS)
    return used


_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)")
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef

# A line returning a product, where a gradient helper's text must pass.
_PRODUCT_LINE = re.compile(r"return\b[^\n]*(?:@|gemm|matmul|mm\()")
_PRODUCT_BYTES = re.compile(_PRODUCT_LINE.pattern.encode())


class _Functions:
    """The functions of one file's text, each parsed alone and only when a line of it
    matches what a kind of helper must hold: a file of thousands of lines may hold one
    three-line helper."""

    def __init__(self, text: str) -> None:
        # Lines as Python counts them: ``\r\n`` and ``\r`` end lines, a form feed does not.
        self.text = text.replace("\r\n", "\n").replace("\r", "\n")
        self.lines = self.text.split("\n")
        self.parsed: dict[int, FunctionNode | None] = {}

    def matching(self, pattern: re.Pattern) -> Iterable[tuple[FunctionNode, bool]]:
        """(function, defined at the top level) for each innermost function with a line
        matching ``pattern``."""
        return self.at_offsets(match.start() for match in pattern.finditer(self.text))

    def at_offsets(
        self, offsets: Iterable[int], top_level_only: bool = False, names=None
    ) -> Iterable[tuple[FunctionNode, bool]]:
        """(function, defined at the top level) for each innermost function holding one of
        ``offsets`` (ascending) of ``self.text``; with ``top_level_only``, or ``names`` (a
        set), the functions not at the top level, or not so named, are not parsed."""
        seen: set[int] = set()
        number, counted = 0, 0
        for offset in offsets:
            number += self.text.count("\n", counted, offset)
            counted = offset
            if number >= len(self.lines):
                break
            line = self.lines[number]
            start = number if _DEF.match(line) else _enclosing_def(self.lines, number)
            if start is None or start in seen:
                continue
            seen.add(start)
            top_level = _indent(self.lines[start]) == 0
            if top_level_only and not top_level:
                continue
            if names is not None and _DEF.match(self.lines[start]).group(2) not in names:
                continue
            function = self.function_at(start)
            if function is not None:
                yield function, top_level

    def function_at(self, start: int) -> FunctionNode | None:
        if start not in self.parsed:
            block = textwrap.dedent("\n".join(_block(self.lines, start)))
            try:
                tree = ast.parse(block)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None  # the file's own lint reports it (too deep included)
            function = tree.body[0] if tree is not None and tree.body else None
            ok = isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
            self.parsed[start] = function if ok else None
        return self.parsed[start]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _enclosing_def(lines: list[str], number: int) -> int | None:
    """The line of the innermost ``def`` whose body holds line ``number``: walking up, the
    first line indented less than everything passed so far that is a ``def``. A line that
    opens with a closing bracket (``) -> Tensor:`` of a signature split over lines, formatted
    at the ``def``'s indent) is passed over, as ``_block`` does."""
    limit = _indent(lines[number])
    for i in range(number - 1, -1, -1):
        stripped = lines[i].strip()
        if not stripped or stripped.startswith(("#", ")", "]")):
            continue
        indent = _indent(lines[i])
        if indent < limit:
            if _DEF.match(lines[i]):
                return i
            limit = indent
    return None


def _block(lines: list[str], start: int) -> list[str]:
    """The ``def`` at ``start`` and the lines of its body."""
    indent = _indent(lines[start])
    block = [lines[start]]
    for line in lines[start + 1 :]:
        stripped = line.strip()
        ends = stripped and _indent(line) <= indent and not stripped.startswith(("#", ")", "]"))
        if ends:
            break
        block.append(line)
    return block


def _returns_flag(function: FunctionNode, attribute: str) -> bool:
    spelled: set[str] = set()
    returns: list[ast.AST] = []
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign) and _spells(node.value, attribute):
            spelled.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Return) and node.value is not None:
            returns.append(node.value)
    return any(
        _spells(value, attribute)
        or any(isinstance(n, ast.Name) and n.id in spelled for n in ast.walk(value))
        for value in returns
    )


def _own_nodes(function: ast.AST) -> Iterable[ast.AST]:
    """The function's nodes, not those of functions or classes nested in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _spells(expr: ast.AST, attribute: str) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.Attribute) and node.attr == attribute:
            return True
        if isinstance(node, ast.Constant) and node.value == attribute:
            return True
    return False


def _does_bookkeeping(function: FunctionNode) -> bool:
    """Named for dummies, calls a dummy maker, or marks ``grad_added_to_main_grad = True`` on
    something other than ``ctx`` (where forward records whether a parameter has it)."""
    if DUMMY in function.name:
        return True
    for node in _own_nodes(function):
        if isinstance(node, ast.Call) and DUMMY in (_callee_name(node) or ""):
            return True
        subject = _marked_subject(node)
        if subject is not None and not (isinstance(subject, ast.Name) and subject.id == "ctx"):
            return True
    return False


def _marked_subject(node: ast.AST) -> ast.AST | None:
    """X of ``X.grad_added_to_main_grad = True`` or ``setattr(X, "grad_added...", True)``."""
    if isinstance(node, ast.Assign) and _is_true(node.value):
        for target in node.targets:
            if isinstance(target, ast.Attribute) and target.attr == GRAD_ADDED:
                return target.value
    if (
        isinstance(node, ast.Call)
        and _callee_name(node) == "setattr"
        and len(node.args) == 3
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == GRAD_ADDED
        and _is_true(node.args[2])
    ):
        return node.args[0]
    return None


def _is_true(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _callee_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


# Tensor methods and functions that make a new tensor (or inspect one) from their
# arguments: a gradient helper may hand its parameters to these and still write nothing.
_PURE_CALLS = frozenset(
    {
        "t", "transpose", "view", "reshape", "contiguous", "float", "half", "bfloat16", "to",
        "flatten", "permute", "unsqueeze", "squeeze", "size", "dim", "type", "sum", "mul",
        "len", "isinstance", "getattr", "hasattr", "tuple", "list", "range", "zip",
    }
)  # fmt: skip
_MAIN_GRAD_WORDS = ("main_grad", GRAD_ADDED)


def _returns_fresh_product(function: FunctionNode) -> bool:
    """Returns a GEMM's product (``return a @ b``, ``return gemm(...)[0]``: a product bound
    to a local first is not looked for, it would mean parsing every function with a GEMM)
    and can write no main_grad: never spells it, and hands its parameters only to GEMMs
    and ``_PURE_CALLS``."""
    params = {a.arg for a in (*function.args.posonlyargs, *function.args.args)}
    returns_product = False
    for node in _own_nodes(function):
        if isinstance(node, ast.Attribute) and node.attr in _MAIN_GRAD_WORDS:
            return False
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and any(word in node.value for word in _MAIN_GRAD_WORDS)
        ):
            return False
        if isinstance(node, ast.Call) and not _is_product(node):
            name = _callee_name(node) or ""
            if name not in _PURE_CALLS and _mentions(node, params):
                return False
        if isinstance(node, ast.Return) and node.value is not None and _is_product(node.value):
            returns_product = True
    return returns_product


def _is_product(node: ast.AST) -> bool:
    """``a @ b``, or a GEMM-like call writing no given ``out=`` (``general_gemm(...)[0]``)."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return True
    if not isinstance(node, ast.Call) or any(k.arg == "out" for k in node.keywords):
        return False
    name = (_callee_name(node) or "").lower()
    return "gemm" in name or "matmul" in name or name.endswith("mm")


def _mentions(call: ast.Call, names: set[str]) -> bool:
    """The call is given (or called on) one of ``names``."""
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(call))


@dataclass(frozen=True)
class HelperKind:
    """One kind of helper: the ``RunFacts`` field naming them, the lines a helper's text
    must hold (a file is parsed only around those), and what its body must do."""

    field: str
    lines: tuple[re.Pattern, ...]
    does: Callable[[FunctionNode], bool]
    # Whether a method of another file counts: a flag helper is called by its own name,
    # while a bookkeeping method's name (``backward``) is shared by unrelated classes.
    methods_imported: bool = False


HELPER_KINDS = (
    *(
        HelperKind(
            kind, (re.compile(re.escape(attr)),), partial(_returns_flag, attribute=attr), True
        )
        for kind, attr in FLAGS.items()
    ),
    # A mark set to True, a dummy maker defined or called (lines that merely mention the
    # words, tests comparing the flag or ``dummy`` tensors, are not worth parsing for).
    HelperKind(
        "bookkeeping",
        (re.compile(GRAD_ADDED + r".*\bTrue\b"), re.compile(DUMMY + r"\w*[ \t]*\(")),
        _does_bookkeeping,
    ),
    HelperKind("gradient", (_PRODUCT_LINE,), _returns_fresh_product),
)
