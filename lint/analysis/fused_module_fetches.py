"""Which modules of a class its fused ops write the main_grad of, and which of them it
fetches Megatron-FSDP's main_grad for (GMLP050).

A *fetching helper* is a function of the file that binds ``param.main_grad`` from
``get_main_grad()`` for the parameters of a module it is handed (in a loop over
``M.parameters()``, itself or through a *binder*, a function that binds one such
parameter). A class's *fused modules* are the ``self.X`` whose settings feed an
``accumulate_into_main_grad=`` / ``fuse_wgrad_accumulation=`` argument, and those it walks
together with a fetched one (``chain(self.fc1.modules(), self.fc2.modules())``)."""

from __future__ import annotations

import libcst as cst

from . import class_model, patterns

FUSE_KEYWORDS = ("accumulate_into_main_grad", "fuse_wgrad_accumulation")


def binders(module) -> frozenset[str]:
    """Functions of the file (at any depth) that bind some ``P.main_grad`` from a
    ``get_main_grad`` call: a loop that calls one per parameter fetches as if inline."""
    return frozenset(
        node.name.value
        for node in class_model.walk_all(module)
        if type(node) is cst.FunctionDef
        and any(binds_fetched_main_grad(sub) for sub in patterns.walk(node.body))
    )


def bases_fetch(cls, helpers: set[str], context) -> bool:
    """A base class named by the class is defined in the file and fetches main_grad (or
    calls a fetching helper)."""
    bases = {context.code(base.value).strip() for base in cls.bases}
    return any(
        type(node) is cst.ClassDef
        and node.name.value in bases
        and any(
            patterns.spells(sub, "get_main_grad")
            or (type(sub) is cst.Call and patterns.callee_name(sub) in helpers)
            for sub in class_model.walk_all(node)
        )
        for node in context.module.body
    )


def helpers_passed_on(cls, names) -> bool:
    """A fetching helper named other than as the callee of a call (``partial(expose,
    self.fc2)``, ``map(expose, ...)``, a hook registered)."""
    callees = set()  # ids of the names that are callees, or the name a def binds
    for node in class_model.walk_all(cls.body):
        if type(node) is cst.FunctionDef:
            callees.add(id(node.name))
        if type(node) is cst.Call:
            callees.add(id(node.func))
            if type(node.func) is cst.Attribute:
                callees.add(id(node.func.attr))
    for node in class_model.walk_all(cls.body):
        if id(node) in callees:
            continue
        if type(node) is cst.Name and node.value in names:
            return True
        if (
            type(node) is cst.Attribute
            and node.attr.value in names
            and id(node.attr) not in callees
        ):
            return True
    return False


def fetched_inline(cls, binders: frozenset[str], context):
    """Modules whose parameters a loop of the class fetches main_grad for itself: ``for p in
    self.fc2.parameters(): p.main_grad = p.get_main_grad()`` (or a binder called there)."""
    for node in class_model.walk_all(cls.body):
        walked = _fetching_loop_over(node, binders)
        module = self_module(walked, context) if walked is not None else None
        if module is not None:
            yield module


def _fetching_loop_over(node, binders: frozenset[str]):
    """M for ``for p in M.parameters():`` (or ``named_parameters()``) whose body binds a
    fetched main_grad, itself or through a binder; else None."""
    if type(node) is not cst.For:
        return None
    source = node.iter
    if not (
        type(source) is cst.Call
        and type(source.func) is cst.Attribute
        and source.func.attr.value in ("parameters", "named_parameters")
    ):
        return None
    return source.func.value if body_fetches(node.body, binders) else None


def body_fetches(body, binders: frozenset[str], handed: str | None = None) -> bool:
    """A loop body binds a fetched main_grad itself, or calls a binder (handed the loop's
    name ``handed``, by position or keyword, when one is given)."""
    for inner in patterns.walk(body):
        if binds_fetched_main_grad(inner):
            return True
        if (
            type(inner) is cst.Call
            and patterns.callee_name(inner) in binders
            and (
                handed is None
                or any(type(a.value) is cst.Name and a.value.value == handed for a in inner.args)
            )
        ):
            return True
    return False


def peers(cls, handed: set[str], context) -> dict[str, tuple[str, object]]:
    """Modules the class treats as one group with a module it fetches main_grad for: the
    arguments of one call, or the elements of one tuple or list, each a module of the class
    (``self.X``, or its ``modules()`` / ``parameters()`` / ``children()``), as a fused
    container's pre-forward hook walks ``chain(self.fc1.modules(), self.fc2.modules())``."""
    found: dict[str, tuple[str, object]] = {}
    for node in class_model.walk_all(cls.body):
        if type(node) is cst.Call:
            items = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
        elif type(node) in (cst.Tuple, cst.List):
            items = [element.value for element in node.elements]
        else:
            continue
        modules = [module_of_item(item, context) for item in items]
        if len(modules) < 2 or None in modules or not handed & set(modules):
            continue
        for module in modules:
            found.setdefault(module, (f"taken with {_quoted(sorted(handed & set(modules)))}", node))
    return found


def module_of_item(item, context) -> str | None:
    """``self.X`` for ``self.X.modules()`` / ``parameters()`` / ``children()``: a walk of
    the module's own pieces (a bare ``self.X`` in a list may be anything: an activation, the
    router)."""
    if not (
        type(item) is cst.Call
        and type(item.func) is cst.Attribute
        and item.func.attr.value in ("modules", "parameters", "named_parameters", "children")
    ):
        return None
    item = item.func.value
    if type(item) is cst.Attribute and type(item.value) is cst.Name and item.value.value == "self":
        return context.code(item).strip()
    return None


def methods(cls):
    for stmt in cls.body.body:
        if type(stmt) is cst.FunctionDef:
            yield stmt


def self_module(expr, context) -> str | None:
    """``self.X`` for ``self.X`` or an attribute chain rooted there (``self.X.a.b``)."""
    chain = expr
    while type(chain) is cst.Attribute and type(chain.value) is cst.Attribute:
        chain = chain.value
    if (
        type(chain) is cst.Attribute
        and type(chain.value) is cst.Name
        and chain.value.value == "self"
    ):
        return context.code(chain).strip()
    return None


def fused_modules(cls, context) -> dict[str, tuple[str, object]]:
    """Modules whose setting feeds a fused op's main_grad switch: ``self.X`` -> (why, the
    argument). Nested functions included (ops are often built in a closure)."""
    found: dict[str, tuple[str, object]] = {}
    for method in methods(cls):
        nodes = list(class_model.walk_all(method.body))
        locals_: dict[str, str] = {}
        for node in nodes:
            if type(node) is cst.Assign and len(node.targets) == 1:
                target = node.targets[0].target
                module = self_module(node.value, context)
                if type(target) is cst.Name and module is not None:
                    locals_[target.value] = module
        for node in nodes:
            if type(node) is not cst.Call:
                continue
            for arg in node.args:
                if arg.keyword is None or arg.keyword.value not in FUSE_KEYWORDS:
                    continue
                value = arg.value
                module = self_module(value, context)
                if module is None and type(value) is cst.Name:
                    module = locals_.get(value.value)
                if module is not None:
                    found.setdefault(module, (f"{arg.keyword.value}=", arg))
    return found


def fetching_helpers(scope, binders: frozenset[str]) -> frozenset[str]:
    """Functions directly in ``scope`` (a module or class) that bind ``P.main_grad`` from
    ``get_main_grad`` over the parameters of one of their parameters, by name."""
    body = scope.body if type(scope) is cst.Module else scope.body.body
    return frozenset(
        stmt.name.value
        for stmt in body
        if type(stmt) is cst.FunctionDef and fetches_over_parameter(stmt, binders)
    )


def fetches_over_parameter(function, binders: frozenset[str]) -> bool:
    names = {param.name.value for param in function.params.params}
    for node in patterns.walk(function.body):
        walked = _fetching_loop_over(node, binders)
        if type(walked) is cst.Name and walked.value in names:
            return True
    return False


def binds_fetched_main_grad(node) -> bool:
    if type(node) is cst.Assign:
        return any(patterns.is_attr(t.target, patterns.MAIN_GRAD) for t in node.targets) and (
            mentions_fetch(node.value)
        )
    if type(node) is cst.Call and patterns.callee_name(node) == "setattr" and len(node.args) == 3:
        return patterns.string_value(node.args[1].value) == patterns.MAIN_GRAD and (
            mentions_fetch(node.args[2].value)
        )
    return False


def mentions_fetch(expr) -> bool:
    return any(patterns.spells(node, "get_main_grad") for node in patterns.walk(expr))


def helper_calls(method, helpers: frozenset[str], context):
    """(call, helper, modules) for each call of a fetching helper in ``method``; modules is
    None when the argument is not ``self.X`` nor a loop variable over a display of them."""
    loops: dict[str, list[str] | None] = {}
    nodes = list(class_model.walk_all(method.body))  # the first call is found by line later
    for node in nodes:
        if type(node) is cst.For and type(node.target) is cst.Name:
            elements = None
            if type(node.iter) in (cst.Tuple, cst.List):
                elements = [self_module(e.value, context) for e in node.iter.elements]
                if None in elements:
                    elements = None
            loops[node.target.value] = elements
    for node in nodes:
        if type(node) is not cst.Call or not calls_helper(node, helpers):
            continue
        if any(arg.star for arg in node.args):
            yield node, patterns.callee_name(node), None
            continue
        # the module: the one positional argument, or the one keyword naming a module
        # (``module=self.fc1``); other keywords are options (``force=True``)
        positional = [arg for arg in node.args if arg.keyword is None]
        keyed = [arg for arg in node.args if arg.keyword is not None]
        modules_keyed = [
            arg
            for arg in keyed
            if self_module(arg.value, context) is not None
            or (type(arg.value) is cst.Name and arg.value.value in loops)
        ]
        args = positional if positional else modules_keyed
        if len(args) != 1 or (positional and modules_keyed):
            yield node, patterns.callee_name(node), None
            continue
        value = args[0].value
        module = self_module(value, context)
        if module is not None and type(value.value) is cst.Name:
            yield node, patterns.callee_name(node), [module]
        elif type(value) is cst.Name and loops.get(value.value):
            yield node, patterns.callee_name(node), loops[value.value]
        else:
            yield node, patterns.callee_name(node), None


def calls_helper(call, helpers: frozenset[str]) -> bool:
    """``helper(...)``, or ``self.helper(...)`` / ``cls.helper(...)`` / ``Class.helper(...)``:
    a name's attribute, not a module's (``self.fc1.helper`` is another object's method)."""
    func = call.func
    if type(func) is cst.Name:
        return func.value in helpers
    return (
        type(func) is cst.Attribute and func.attr.value in helpers and type(func.value) is cst.Name
    )


def _quoted(modules) -> str:
    return ", ".join(f"`{m}`" for m in modules)
