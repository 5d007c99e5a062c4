"""GMLP050: main_grad fetched for some of the modules whose parameters fused ops write."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
class_model = LazyModule("..analysis.class_model", __package__)

CODE = "GMLP050"
RULE = Rule(
    code=CODE,
    classes=(8,),
    name="main-grad-fetch-misses-module",
    summary=(
        "A class builds fused ops whose weight gradients go into the main_grad of several "
        "of its modules' parameters, and fetches Megatron-FSDP's main_grad (through a helper "
        "handed one module) for only some of them."
    ),
    flags=(
        "a helper of the file that binds `param.main_grad` from `get_main_grad()` for the "
        "parameters of a module it is handed, called in a class on `self.A` (directly or in a "
        "loop over a display) but on no `self.B`, where `self.B`'s setting feeds an "
        "`accumulate_into_main_grad=` / `fuse_wgrad_accumulation=` argument in the same class"
    ),
    explanation="""
        Issue #19, class 8 (Megatron-LM #5209's shape, one module further). Under
        Megatron-FSDP `param.main_grad` is None until `param.get_main_grad()` is bound to
        it. Integration code that hands several of its modules' parameters to fused
        Transformer Engine ops (a grouped MLP's fc1 and fc2, with
        `accumulate_into_main_grad=self.linear_fcN.fuse_wgrad_accumulation`) must expose the
        buffer for every one of them before the ops run. Exposing it for fc1 only leaves
        fc2's main_grad None: the op fails, or writes a stale buffer from an earlier step.

        Seen: the modules of a class whose settings (`self.X.<...>`, or a local bound to
        such an expression in the same function) are passed as `accumulate_into_main_grad=`
        or `fuse_wgrad_accumulation=` to a call anywhere in the class; the helpers of the
        file (methods of the class, static or not, and top-level functions) that bind
        `P.main_grad` (assignment or `setattr`) from an expression calling `get_main_grad`,
        in a loop over `M.parameters()` / `M.named_parameters()` of a parameter `M` (or call,
        in that loop, a function of the file that binds one so); the
        calls of those helpers in the class, whose one argument (positional or keyword) is
        `self.X` or a loop variable
        over a tuple or list of `self.X`. The class's fused modules are also those it takes
        together with a fetched one (the arguments of one call, the elements of one tuple or
        list, each `self.X.modules()` / `parameters()` / `children()`: a fused container's
        pre-forward hook walks `chain(self.fc1.modules(), self.fc2.modules())`; a bare
        `self.X` in a list may be an activation or the router, and does not count). A loop
        of the class over `self.X.parameters()` that binds the fetch itself counts as
        fetching X; keywords beside the module (`force=True`) are options.
        Reported at the first such call when at least one fused module is handed to a
        helper somewhere in the class and another is handed to none (the calls of every
        method together: one hook per module is fine).

        Left alone: a class that hands a helper anything else (`self.modules()`, a
        parameter, an attribute of a module), which may reach the rest, or names it other
        than as a callee (`partial(expose, self.fc2)`, `map(expose, ...)`, a registered
        hook); a class whose base, defined in the file, fetches too; a class with one fused
        module.

        Not seen: helpers of other files, fetches written out inline for one module, and
        fused modules named through a container (`self.linears[0]`).
    """,
    fix="""
        Hand every module whose parameters the fused ops write to the fetching helper
        before the ops run. No automatic fix.
    """,
    fix_summary="none (fetch main_grad for every fused module)",
    valid=(
        Example(
            """
            class GroupedMLP(Module):
                def _make_ops(self):
                    return Sequential(
                        GroupedLinear(accumulate_into_main_grad=self.fc1.fuse_wgrad_accumulation),
                        GroupedLinear(accumulate_into_main_grad=self.fc2.fuse_wgrad_accumulation),
                    )

                @staticmethod
                def _expose(module):
                    for param in module.parameters(recurse=False):
                        if getattr(param, "main_grad", None) is None:
                            param.main_grad = param.get_main_grad()

                def _pre_forward(self, *_):
                    self._expose(self.fc1)
                    self._expose(self.fc2)
            """
        ),
        Example(
            """
            def expose(module):
                for name, param in module.named_parameters():
                    setattr(param, "main_grad", param.get_main_grad())


            class GroupedMLP(Module):
                def _make_ops(self):
                    fuse2 = self.fc2.fuse_wgrad_accumulation
                    one = GroupedLinear(accumulate_into_main_grad=self.fc1.fuse_wgrad_accumulation)
                    return one, GroupedLinear(accumulate_into_main_grad=fuse2)

                def _hook_fc1(self, *_):
                    expose(self.fc1)

                def _hook_fc2(self, *_):
                    expose(self.fc2)
            """
        ),
        Example(
            """
            class GroupedMLP(Module):
                def _make_ops(self):
                    return (
                        GroupedLinear(accumulate_into_main_grad=self.fc1.fuse_wgrad_accumulation),
                        GroupedLinear(accumulate_into_main_grad=self.fc2.fuse_wgrad_accumulation),
                    )

                def _expose(self, module):
                    for param in module.parameters():
                        param.main_grad = param.get_main_grad()

                def _pre_forward(self, *_):
                    for module in self.children():
                        self._expose(module)
            """
        ),
    ),
    invalid=(
        Example(
            """
            class GroupedMLP(Module):
                def _make_ops(self):
                    return Sequential(
                        GroupedLinear(accumulate_into_main_grad=self.fc1.fuse_wgrad_accumulation),
                        GroupedLinear(accumulate_into_main_grad=self.fc2.fuse_wgrad_accumulation),
                    )

                @staticmethod
                def _expose(module):
                    for param in module.parameters(recurse=False):
                        if getattr(param, "main_grad", None) is None:
                            param.main_grad = param.get_main_grad()

                def _pre_forward(self, *_):
                    self._expose(self.fc1)
            """,
            line=15,
        ),
        Example(
            """
            def expose(module):
                for name, param in module.named_parameters():
                    setattr(param, "main_grad", param.get_main_grad())


            class GroupedMLP(Module):
                def build(self):
                    fuse = self.fc2.fuse_wgrad_accumulation
                    self.ops = [
                        Linear(fuse_wgrad_accumulation=self.fc1.fuse_wgrad_accumulation),
                        Linear(fuse_wgrad_accumulation=fuse),
                        Linear(fuse_wgrad_accumulation=self.fc3.fuse_wgrad_accumulation),
                    ]

                def pre_forward(self, *_):
                    for module in (self.fc1, self.fc3):
                        expose(module)
            """,
            line=17,
        ),
    ),
)

FUSE_KEYWORDS = ("accumulate_into_main_grad", "fuse_wgrad_accumulation")
MESSAGE = (
    "main_grad is fetched for {fetched} but not for {missed}, whose parameters the fused ops "
    "of `{cls}` also write ({why} on line {line}): under Megatron-FSDP their main_grad "
    "stays None; hand {missed} to `{helper}` too"
)


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if "get_main_grad" not in source or not any(word in source for word in FUSE_KEYWORDS):
        return
    binders = _binders(context.module)
    helpers = _fetching_helpers(context.module, binders)
    for node in patterns.walk(context.module):
        if type(node) is cst.ClassDef:
            _check_class(node, helpers, binders, out)


def _binders(module) -> frozenset[str]:
    """Functions of the file (at any depth) that bind some ``P.main_grad`` from a
    ``get_main_grad`` call: a loop that calls one per parameter fetches as if inline."""
    return frozenset(
        node.name.value
        for node in class_model.walk_all(module)
        if type(node) is cst.FunctionDef
        and any(_binds_fetched_main_grad(sub) for sub in patterns.walk(node.body))
    )


def _check_class(cls, helpers: dict[str, str], binders: frozenset[str], out: Collector) -> None:
    helpers = {**helpers, **_fetching_helpers(cls, binders)}
    names = {*helpers, *binders}
    if _bases_fetch(cls, names, out) or _helpers_passed_on(cls, names):
        return  # a base of the file, a partial or a map may fetch the others
    handed: dict[str, tuple] = {}  # module text -> (first call, helper name)
    for method in _methods(cls):
        for call, helper, modules in _helper_calls(method, helpers, out):
            if modules is None:
                return  # a helper handed something else: it may reach the other modules
            for module in modules:
                handed.setdefault(module, (call, helper))
    if not handed:
        return
    for module in _fetched_inline(cls, binders, out):
        handed.setdefault(module, (None, ""))
    fused = _fused_modules(cls, out)
    for module, evidence in _peers(cls, set(handed), out).items():
        fused.setdefault(module, evidence)
    fetched = [module for module in fused if module in handed]
    missed = [module for module in fused if module not in handed]
    calls = [handed[m] for m in fetched if handed[m][0] is not None]
    if not calls or not missed:
        return
    first_call, helper = min(calls, key=lambda item: out.context.line_of(item[0]))
    why, where = fused[missed[0]]
    out.report(
        CODE,
        first_call,
        MESSAGE.format(
            fetched=", ".join(f"`{m}`" for m in fetched),
            missed=", ".join(f"`{m}`" for m in missed),
            cls=cls.name.value,
            why=why,
            line=out.context.line_of(where),
            helper=helper,
        ),
    )


def _bases_fetch(cls, helpers: set[str], out: Collector) -> bool:
    """A base class named by the class is defined in the file and fetches main_grad (or
    calls a fetching helper)."""
    bases = {out.context.code(base.value).strip() for base in cls.bases}
    return any(
        type(node) is cst.ClassDef
        and node.name.value in bases
        and any(
            patterns.spells(sub, "get_main_grad")
            or (type(sub) is cst.Call and patterns.callee_name(sub) in helpers)
            for sub in class_model.walk_all(node)
        )
        for node in out.context.module.body
    )


def _helpers_passed_on(cls, names) -> bool:
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


def _fetched_inline(cls, binders: frozenset[str], out: Collector):
    """Modules whose parameters a loop of the class fetches main_grad for itself: ``for p in
    self.fc2.parameters(): p.main_grad = p.get_main_grad()`` (or a binder called there)."""
    for node in class_model.walk_all(cls.body):
        if type(node) is not cst.For:
            continue
        source = node.iter
        if not (
            type(source) is cst.Call
            and type(source.func) is cst.Attribute
            and source.func.attr.value in ("parameters", "named_parameters")
        ):
            continue
        module = _self_module(source.func.value, out)
        if module is None:
            continue
        if any(
            _binds_fetched_main_grad(inner)
            or (type(inner) is cst.Call and patterns.callee_name(inner) in binders)
            for inner in patterns.walk(node.body)
        ):
            yield module


def _peers(cls, handed: set[str], out: Collector) -> dict[str, tuple[str, object]]:
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
        modules = [_module_of_item(item, out) for item in items]
        if len(modules) < 2 or None in modules or not handed & set(modules):
            continue
        for module in modules:
            found.setdefault(module, (f"taken with {_quoted(sorted(handed & set(modules)))}", node))
    return found


def _quoted(modules) -> str:
    return ", ".join(f"`{m}`" for m in modules)


def _module_of_item(item, out: Collector) -> str | None:
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
        return out.context.code(item).strip()
    return None


def _methods(cls):
    for stmt in cls.body.body:
        if type(stmt) is cst.FunctionDef:
            yield stmt


def _self_module(expr, out: Collector) -> str | None:
    """``self.X`` for ``self.X`` or an attribute chain rooted there (``self.X.a.b``)."""
    chain = expr
    while type(chain) is cst.Attribute and type(chain.value) is cst.Attribute:
        chain = chain.value
    if (
        type(chain) is cst.Attribute
        and type(chain.value) is cst.Name
        and chain.value.value == "self"
    ):
        return out.context.code(chain).strip()
    return None


def _fused_modules(cls, out: Collector) -> dict[str, tuple[str, object]]:
    """Modules whose setting feeds a fused op's main_grad switch: ``self.X`` -> (why, the
    argument). Nested functions included (ops are often built in a closure)."""
    found: dict[str, tuple[str, object]] = {}
    for method in _methods(cls):
        nodes = list(class_model.walk_all(method.body))
        locals_: dict[str, str] = {}
        for node in nodes:
            if type(node) is cst.Assign and len(node.targets) == 1:
                target = node.targets[0].target
                module = _self_module(node.value, out)
                if type(target) is cst.Name and module is not None:
                    locals_[target.value] = module
        for node in nodes:
            if type(node) is not cst.Call:
                continue
            for arg in node.args:
                if arg.keyword is None or arg.keyword.value not in FUSE_KEYWORDS:
                    continue
                value = arg.value
                module = _self_module(value, out)
                if module is None and type(value) is cst.Name:
                    module = locals_.get(value.value)
                if module is not None:
                    found.setdefault(module, (f"{arg.keyword.value}=", arg))
    return found


def _fetching_helpers(scope, binders: frozenset[str]) -> dict[str, str]:
    """Functions directly in ``scope`` (a module or class) that bind ``P.main_grad`` from
    ``get_main_grad`` over the parameters of one of their parameters: name -> name."""
    body = scope.body if type(scope) is cst.Module else scope.body.body
    found = {}
    for stmt in body:
        if type(stmt) is cst.FunctionDef and _fetches_over_parameter(stmt, binders):
            found[stmt.name.value] = stmt.name.value
    return found


def _fetches_over_parameter(function, binders: frozenset[str]) -> bool:
    names = {param.name.value for param in function.params.params}
    for node in patterns.walk(function.body):
        if type(node) is not cst.For:
            continue
        source = node.iter
        if not (
            type(source) is cst.Call
            and type(source.func) is cst.Attribute
            and source.func.attr.value in ("parameters", "named_parameters")
            and type(source.func.value) is cst.Name
            and source.func.value.value in names
        ):
            continue
        if any(
            _binds_fetched_main_grad(inner)
            or (type(inner) is cst.Call and patterns.callee_name(inner) in binders)
            for inner in patterns.walk(node.body)
        ):
            return True
    return False


def _binds_fetched_main_grad(node) -> bool:
    if type(node) is cst.Assign:
        return any(patterns.is_attr(t.target, patterns.MAIN_GRAD) for t in node.targets) and (
            _mentions_fetch(node.value)
        )
    if type(node) is cst.Call and patterns.callee_name(node) == "setattr" and len(node.args) == 3:
        return patterns.string_value(node.args[1].value) == patterns.MAIN_GRAD and (
            _mentions_fetch(node.args[2].value)
        )
    return False


def _mentions_fetch(expr) -> bool:
    return any(patterns.spells(node, "get_main_grad") for node in patterns.walk(expr))


def _helper_calls(method, helpers: dict[str, str], out: Collector):
    """(call, helper, modules) for each call of a fetching helper in ``method``; modules is
    None when the argument is not ``self.X`` nor a loop variable over a display of them."""
    loops: dict[str, list[str] | None] = {}
    nodes = list(class_model.walk_all(method.body))  # the first call is found by line later
    for node in nodes:
        if type(node) is cst.For and type(node.target) is cst.Name:
            elements = None
            if type(node.iter) in (cst.Tuple, cst.List):
                elements = [_self_module(e.value, out) for e in node.iter.elements]
                if None in elements:
                    elements = None
            loops[node.target.value] = elements
    for node in nodes:
        if type(node) is not cst.Call or not _calls_helper(node, helpers):
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
            if _self_module(arg.value, out) is not None
            or (type(arg.value) is cst.Name and arg.value.value in loops)
        ]
        args = positional if positional else modules_keyed
        if len(args) != 1 or (positional and modules_keyed):
            yield node, patterns.callee_name(node), None
            continue
        value = args[0].value
        module = _self_module(value, out)
        if module is not None and type(value.value) is cst.Name:
            yield node, patterns.callee_name(node), [module]
        elif type(value) is cst.Name and loops.get(value.value):
            yield node, patterns.callee_name(node), loops[value.value]
        else:
            yield node, patterns.callee_name(node), None


def _calls_helper(call, helpers: dict[str, str]) -> bool:
    """``helper(...)``, or ``self.helper(...)`` / ``cls.helper(...)`` / ``Class.helper(...)``:
    a name's attribute, not a module's (``self.fc1.helper`` is another object's method)."""
    func = call.func
    if type(func) is cst.Name:
        return func.value in helpers
    return (
        type(func) is cst.Attribute and func.attr.value in helpers and type(func.value) is cst.Name
    )
