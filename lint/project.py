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
* the delayed-wgrad helpers (``wgrad_work``, ``hook_firing``): top-level functions another
  file of the run imports that run delayed wgrad work (pop a wgrad store, replay a wgrad
  graph, drain deferred wgrads into main_grad) or fire grad-accumulation / reduce hooks
  (``delayed_helpers``). GMLP019 counts a call of one, by its imported name, as that work
  or that firing, and leaves a work helper's own end to its callers.
* the alternatives (``alternatives``): attributes a class of the run gives a weight layer on
  one branch of an ``if`` and sets to None on the other, which builds other layers instead
  (``alternative_layers``), as ``Class.c=a,b``; only those some file naming ``backward_dw``
  spells on another object than ``self``. GMLP043 holds a list of ``X.c`` for backward_dw
  outside the class to them.

Found with CPython's ``ast`` in the few functions that spell the words, so it costs next to
nothing. From other files only functions defined at the top level count as bookkeeping
helpers: they are what a caller imports, while a method's name (``backward``) is shared by
unrelated classes. A helper defined outside the linted files is known only by the names in
``analysis.patterns.KNOWN_OVERWRITE_HELPERS``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from functools import partial

from . import layer_facts
from .alternative_layers import alternatives_in
from .contract_facts import DELAYED_WGRAD_BYTES, DELAYED_WGRAD_WORDS, delayed_wgrad_in
from .delayed_helpers import run_helpers
from .function_index import FunctionNode, Functions, callee_name, own_nodes
from .weight_users import (
    ORIGIN_BYTES,
    WEIGHT_USE_BYTES,
    imported_by,
    top_level_defs,
    weight_users_in,
)
from .wgrad_words import names_product

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
    # Top-level functions imported by another file of the run that run delayed wgrad work,
    # and those that fire a gradient hook (see the module docstring).
    wgrad_work: tuple[str, ...] = ()
    hook_firing: tuple[str, ...] = ()
    # Weight layers a class builds in place of one another, as ``Class.c=a,b``
    # (``alternative_layers``): GMLP043 holds lists of ``X.c`` for backward_dw to them.
    alternatives: tuple[str, ...] = ()

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


def run_facts(contents: Iterable[tuple[str, bytes]]) -> RunFacts:
    """What another file may use of ``contents`` (the files of a run, as path and bytes)."""
    found = NO_RUN_FACTS
    layers: list[layer_facts.LayerClass] = []
    files: list[bytes] = []
    named: list[tuple[str, bytes]] = []
    wanted: set[bytes] = set()  # names imported by files with an ``origin_`` twin
    for path, data in contents:
        files.append(data)
        named.append((path, data))
        if b"main_grad" in data and any(o in data for o in ORIGIN_BYTES):
            wanted |= imported_by(data)
        helpers = any(word.encode() in data for word in _WORDS) or _PRODUCT_BYTES.search(data)
        layered = b"Linear" in data and layer_facts.LAYER_CLASS_BYTES.search(data)
        # One use of the contract is enough: once both spellings are known, no file is
        # parsed for it again.
        contract = len(found.delayed_wgrad) < len(DELAYED_WGRAD_WORDS) and any(
            word in data for word in DELAYED_WGRAD_BYTES
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
        defined = top_level_defs(data) & wanted
        if defined and any(word in data for word in WEIGHT_USE_BYTES):
            text = data.decode("utf-8", errors="replace")
            names = {name.decode() for name in defined}
            weight_users.update(weight_users_in(text, names))
    work, fires = run_helpers(named)
    eager = layer_facts.eager_layers(layers)
    return replace(
        found,
        eager_layers=eager,
        alternatives=tuple(sorted(alternatives_in(named, eager))),
        weight_users=tuple(sorted(weight_users)),
        wgrad_work=tuple(work),
        hook_firing=tuple(fires),
    )


def facts_in(text: str, imported: bool = False) -> RunFacts:
    """What one file's text defines; with ``imported``, only the helpers another file can
    use (``HelperKind.methods_imported``)."""
    functions = Functions(text)
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
    alternatives = (
        ()
        if imported or "backward_dw" not in text
        else alternatives_in([("", text.encode())], eager)
    )
    return RunFacts(
        **{field: tuple(sorted(names)) for field, names in found.items()},
        eager_layers=eager,
        delayed_wgrad=contract,
        alternatives=tuple(sorted(alternatives)),
    )


# A line returning a product, where a gradient helper's text must pass.
_PRODUCT_LINE = re.compile(r"return\b[^\n]*(?:@|gemm|matmul|mm\()")
_PRODUCT_BYTES = re.compile(_PRODUCT_LINE.pattern.encode())


def _returns_flag(function: FunctionNode, attribute: str) -> bool:
    spelled: set[str] = set()
    returns: list[ast.AST] = []
    for node in own_nodes(function):
        if isinstance(node, ast.Assign) and _spells(node.value, attribute):
            spelled.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Return) and node.value is not None:
            returns.append(node.value)
    return any(
        _spells(value, attribute)
        or any(isinstance(n, ast.Name) and n.id in spelled for n in ast.walk(value))
        for value in returns
    )


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
    for node in own_nodes(function):
        if isinstance(node, ast.Call) and DUMMY in (callee_name(node) or ""):
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
        and callee_name(node) == "setattr"
        and len(node.args) == 3
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == GRAD_ADDED
        and _is_true(node.args[2])
    ):
        return node.args[0]
    return None


def _is_true(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


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
# Methods that hand back the same tensor in another dtype or layout, or a copy of it: a
# product converted is the same fresh product, a gradient converted the same gradient
# (``analysis.wgrad`` reads this set too).
CONVERTING = frozenset(
    {"to", "float", "half", "bfloat16", "type", "type_as", "contiguous", "clone", "astype", "cast"}
)


def _returns_fresh_product(function: FunctionNode) -> bool:
    """Returns a GEMM's product (``return a @ b``, ``return gemm(...)[0]``: a product bound
    to a local first is not looked for, it would mean parsing every function with a GEMM)
    and can write no main_grad: never spells it, and hands its parameters only to GEMMs
    and ``_PURE_CALLS``."""
    params = {a.arg for a in (*function.args.posonlyargs, *function.args.args)}
    returns_product = False
    for node in own_nodes(function):
        if isinstance(node, ast.Attribute) and node.attr in _MAIN_GRAD_WORDS:
            return False
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and any(word in node.value for word in _MAIN_GRAD_WORDS)
        ):
            return False
        if isinstance(node, ast.Call) and not _is_product(node):
            name = callee_name(node) or ""
            if name not in _PURE_CALLS and _mentions(node, params):
                return False
        if isinstance(node, ast.Return) and node.value is not None and _is_product(node.value):
            returns_product = True
    return returns_product


def _is_product(node: ast.AST) -> bool:
    """``a @ b``, or a GEMM-like call writing no given ``out=`` (``general_gemm(...)[0]``),
    also converted (``(dy.t() @ x).to(weight.dtype)``: the same fresh gradient)."""
    if isinstance(node, ast.Subscript):
        node = node.value
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in CONVERTING
    ):
        node = node.func.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return True
    if not isinstance(node, ast.Call) or any(k.arg == "out" for k in node.keywords):
        return False
    return names_product(callee_name(node) or "")


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
