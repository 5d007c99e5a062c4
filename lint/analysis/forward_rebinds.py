"""A module's weight rebound to a fresh Parameter on every forward (issue #19, class 2).

Megatron gives each Parameter its main_grad (and grad-accumulation hook, and
`overwrite_main_grad` / `zero_out_wgrad` flags) once, when the model is wrapped. A module
that puts a *new* ``Parameter`` in its attribute on the way into each forward (an offload
step bringing experts back: ``setattr(self, f"weight{i}", Parameter(host.to("cuda")))``,
``self.weight = nn.Parameter(...)``, ``self.register_parameter(name, Parameter(...))``)
hands the autograd Function an object with none of that: a fused wgrad raises or writes a
buffer nobody reduces, and the optimizer steps the old Parameter. Copying into the
Parameter (``self.weight.data = ...``, ``.copy_()``) keeps the object and is right.

Seen: in a class, the methods a forward runs (``forward``, the class's methods it calls as
``self.m(...)``, two calls deep, and methods registered with
``register_forward_pre_hook(self.m)``), binding an attribute of an object the module owns
to a ``Parameter(...)`` call, directly or through a local bound to one. Owned: ``self``, its
attributes and their items (``self.fc1``, ``self.experts[i]``), and locals the method binds
to one of those or walks them with (``for expert in self.experts``, ``enumerate(...)``,
``self.experts.children()``), also through the module's registry
(``expert._parameters["weight"] = ...``, ``vars(expert)["weight"] = ...``): a submodule's
Parameter was wrapped with the module's, so
``expert.weight = nn.Parameter(...)`` loses its main_grad just as ``self.weight = ...``
does. Not reported: a binding under a test that reads like lazy creation (``None``,
``hasattr``, ``init``, ``materializ``, ``lazy``: the first forward building the weights
before any wrapping), or in a method that puts main_grad back on something itself. A
module-level function of the file that such a method hands an owned object
(``onload(self.fc1, device)``) is read the same way, its parameter standing for the object
(one call deep). Not seen: rebinding from helpers of other classes or files, from hooks
registered elsewhere, or of a module handed in by a caller outside the class.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import iteration, patterns
from .module import ModuleContext, suite_body

PARAMETER = "Parameter"
# What a file spells when it makes a fresh Parameter (``_is_parameter``).
FRESH_WORDS = (PARAMETER, "__class__", "type(")
ENTRY = "forward"
HOOK_REGISTRATIONS = frozenset({"register_forward_pre_hook", "register_forward_hook"})
# How many ``self.m()`` calls deep from forward a rebinding is looked for.
DEPTH = 2
# Words of a test that guards lazy creation of the weights on the first forward.
LAZY_WORDS = ("None", "hasattr", "init", "materializ", "lazy")


@dataclass(frozen=True)
class Rebinding:
    site: cst.CSTNode  # the statement that binds the attribute
    method: str
    attribute: str  # its text: ``self.weight`` or the setattr name expression


def rebindings(context: ModuleContext) -> list[Rebinding]:
    """For ``context.shared``: the forward-path rebindings of a file that names main_grad
    (only there is the lost bookkeeping anybody's)."""
    source = context.source
    if "main_grad" not in source or not any(word in source for word in FRESH_WORDS):
        return []
    found = []
    free = {s.name.value: s for s in context.module.body if type(s) is cst.FunctionDef}
    handed: dict[str, set[str]] = {}  # free function -> its parameters handed an owned object
    for node in (u.owner for u in context.units):
        if type(node) is cst.ClassDef:
            methods = {s.name.value: s for s in suite_body(node.body) if type(s) is cst.FunctionDef}
            for name in _run_by_forward(methods):
                found.extend(_in_method(context, methods[name]))
                for callee, params in _owned_arguments(methods[name], free):
                    handed.setdefault(callee, set()).update(params)
    for callee, params in handed.items():
        found.extend(_in_method(context, free[callee], frozenset(params)))
    return found


def _owned_arguments(method: cst.FunctionDef, free: dict[str, cst.FunctionDef]):
    """(function, parameter names) for each call of a module-level function of the file
    that hands it, positionally or by keyword, an object the module owns
    (``onload(self.fc1, device)``): that function binds on the module's own objects."""
    owned = _owned_locals(method)
    for call in _calls(method):
        function = free.get(call.func.value) if type(call.func) is cst.Name else None
        if function is None:
            continue
        params_of = function.params
        names = [p.name.value for p in (*params_of.posonly_params, *params_of.params)]
        params = set()
        for index, arg in enumerate(call.args):
            if arg.star or not _rooted(arg.value, owned):
                continue
            if arg.keyword is not None:
                params.add(arg.keyword.value)
            elif index < len(names):
                params.add(names[index])
        if params:
            yield function.name.value, params


def _run_by_forward(methods: dict[str, cst.FunctionDef]) -> set[str]:
    roots = {ENTRY} & methods.keys()
    for method in methods.values():
        for call in _calls(method):
            if patterns.callee_name(call) in HOOK_REGISTRATIONS:
                roots.update(n for a in call.args if (n := _self_method(a.value)) in methods)
    seen, frontier = set(roots), set(roots)
    for _ in range(DEPTH):
        frontier = {
            callee
            for name in frontier
            for call in _calls(methods[name])
            if (callee := _self_method(call.func)) in methods and callee not in seen
        }
        seen |= frontier
    return seen


def _calls(function: cst.FunctionDef) -> Iterator[cst.Call]:
    return (n for n in patterns.walk(function.body) if type(n) is cst.Call)


def _self_method(expr) -> str | None:
    """``m`` for ``self.m``."""
    if type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":
        return expr.attr.value
    return None


def _in_method(
    context: ModuleContext, method: cst.FunctionDef, roots: frozenset[str] = frozenset({"self"})
) -> Iterator[Rebinding]:
    """Rebindings in a method (``roots``: ``self``) or in a free function handed owned
    objects (``roots``: those parameters)."""
    fresh_locals = set()
    owned = _owned_locals(method, roots)
    for node in patterns.walk(method.body):
        if type(node) is cst.Assign and _is_parameter(node.value, ()):
            fresh_locals.update(t.target.value for t in node.targets if type(t.target) is cst.Name)
        if type(node) is cst.Assign and any(
            patterns.is_attr(t.target, patterns.MAIN_GRAD) for t in node.targets
        ):
            return  # main_grad put back here: the method carries the bookkeeping over
    for stmt, parents in _statements_with_tests(method.body.body, ()):
        if any(word in context.code(test) for test in parents for word in LAZY_WORDS):
            continue
        attribute = _bound_attribute(context, stmt, fresh_locals, owned)
        if attribute is not None:
            yield Rebinding(stmt, method.name.value, attribute)


def _statements_with_tests(body, tests) -> Iterator[tuple[cst.CSTNode, tuple]]:
    """Small statements of a body, with the tests of the ``if`` / ``while`` around them."""
    for stmt in body:
        kind = type(stmt)
        if kind is cst.SimpleStatementLine:
            for small in stmt.body:
                yield small, tests
        elif kind in (cst.If, cst.While):
            inner = (*tests, stmt.test)
            yield from _statements_with_tests(suite_body(stmt.body), inner)
            orelse = stmt.orelse
            while orelse is not None:
                if type(orelse) is cst.If:
                    inner = (*inner, orelse.test)
                    yield from _statements_with_tests(suite_body(orelse.body), inner)
                    orelse = orelse.orelse
                else:
                    yield from _statements_with_tests(suite_body(orelse.body), inner)
                    orelse = None
        elif kind in (cst.FunctionDef, cst.ClassDef):
            continue
        elif hasattr(stmt, "body"):
            yield from _statements_with_tests(suite_body(stmt.body), tests)
            for extra in (getattr(stmt, "orelse", None), getattr(stmt, "finalbody", None)):
                if extra is not None:
                    yield from _statements_with_tests(suite_body(extra.body), tests)
            for handler in getattr(stmt, "handlers", ()):
                yield from _statements_with_tests(suite_body(handler.body), tests)


def _owned_locals(
    method: cst.FunctionDef, roots: frozenset[str] = frozenset({"self"})
) -> frozenset[str]:
    """Locals of the method that hold an object the module owns: ``roots``, locals bound to
    one, or walking one element by element (submodules of ``self``, reached from ``self``
    alone)."""
    owned = set(roots)
    for node in patterns.walk(method.body):
        if type(node) is cst.Assign and _rooted(node.value, owned):
            owned.update(t.target.value for t in node.targets if type(t.target) is cst.Name)
        elif type(node) is cst.For:
            owned.update(
                name.value for name, seq in iteration.element_sequences(node) if _rooted(seq, owned)
            )
    return frozenset(owned)


def _rooted(expr, owned) -> bool:
    """``expr`` reaches an owned object through attributes, items and argument-less method
    calls (``self.experts[i]``, ``self.experts.children()``, ``self.experts.values()``)."""
    while True:
        kind = type(expr)
        if kind is cst.Name:
            return expr.value in owned
        if kind in (cst.Attribute, cst.Subscript):
            expr = expr.value
        elif kind is cst.Call and not expr.args and type(expr.func) is cst.Attribute:
            expr = expr.func.value
        else:
            return False


def _bound_attribute(context: ModuleContext, stmt, fresh_locals, owned) -> str | None:
    """The attribute of an owned object this statement binds to a fresh Parameter, as
    text."""
    if type(stmt) is cst.Assign and _is_parameter(stmt.value, fresh_locals):
        for t in stmt.targets:
            if type(t.target) is cst.Attribute and _rooted(t.target.value, owned):
                return context.code(t.target).strip()
            if _parameters_slot(t.target, owned):
                # ``expert._parameters["weight"] = Parameter(...)``: what setattr does
                return context.code(t.target).strip()
    if type(stmt) is cst.Expr and type(stmt.value) is cst.Call:
        call = stmt.value
        args = patterns.positional_args(call)
        name = patterns.callee_name(call)
        if (
            name == "setattr"
            and len(args) == 3
            and _rooted(args[0].value, owned)
            and _is_parameter(args[2].value, fresh_locals)
        ):
            return _named(context, args[0].value, args[1].value)
        if (
            name == "register_parameter"
            and len(args) == 2
            and type(call.func) is cst.Attribute
            and _rooted(call.func.value, owned)
            and _is_parameter(args[1].value, fresh_locals)
        ):
            return _named(context, call.func.value, args[0].value)
    return None


def _parameters_slot(target, owned) -> bool:
    """``X._parameters[key]`` of an owned ``X`` (the module's own registry of Parameters), or
    its attribute dict (``vars(X)[key]``, ``X.__dict__[key]``: read before the registry)."""
    if type(target) is not cst.Subscript:
        return False
    registry = target.value
    if type(registry) is cst.Attribute and registry.attr.value in ("_parameters", "__dict__"):
        return _rooted(registry.value, owned)
    args = patterns.positional_args(registry) if type(registry) is cst.Call else []
    return (
        patterns.callee_name(registry) == "vars"
        and len(args) == 1
        and _rooted(args[0].value, owned)
    )


def _named(context: ModuleContext, owner, name) -> str:
    """``self.w`` for the literal ``"w"``, ``getattr(self, name)`` otherwise."""
    literal = patterns.string_value(name)
    owner_text = context.code(owner).strip()
    if literal:
        return f"{owner_text}.{literal}"
    return f"getattr({owner_text}, {context.code(name).strip()})"


def _says_lazy(test) -> bool:
    """A name, attribute or string of the test has a word of ``LAZY_WORDS``."""
    for sub in patterns.walk(test):
        kind = type(sub)
        word = (
            sub.value
            if kind in (cst.Name, cst.SimpleString)
            else sub.attr.value
            if kind is cst.Attribute
            else ""
        )
        if any(lazy in word for lazy in LAZY_WORDS):
            return True
    return False


def _is_parameter(value, fresh_locals) -> bool:
    """A fresh Parameter: ``Parameter(...)``, the class of one called again
    (``type(w)(...)``, ``w.__class__(...)``), a local bound to one, or either side of a
    conditional expression that is one (on the other path the weight is kept)."""
    kind = type(value)
    if kind is cst.Name:
        return value.value in fresh_locals
    if kind is cst.IfExp:
        return not _says_lazy(value.test) and (
            _is_parameter(value.body, fresh_locals) or _is_parameter(value.orelse, fresh_locals)
        )
    if kind is not cst.Call:
        return False
    if patterns.callee_name(value) == PARAMETER:
        return True
    func = value.func
    same_class = (
        type(func) is cst.Call and patterns.callee_name(func) == "type" and len(func.args) == 1
    ) or (type(func) is cst.Attribute and func.attr.value == "__class__")
    return same_class
