"""Semantics-preserving mutations of a Python snippet, for measuring whether gmlp-lint's rules
find a bug class or only the syntax they were written from (issue #19: "design for the class
of bug, not the instance"), as ruff and black test themselves on generated inputs.

Each mutation is a function ``source -> source``; it returns the source unchanged where it
does not apply. Every one keeps what the code does (given the contract's usual types: tensors
and Parameters, flags that are plain values): names, the place of a statement, the spelling
of an attribute access or a call, and the shape of the control flow change, the data flow
does not. A statement that carries a ``# bug`` comment keeps it (a moved one leaves a copy on
the call that replaces it). ``MUTATIONS`` lists them in table order.
"""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

# Attributes of the contract (what a rule's facts are about).
CONTRACT_ATTRS = frozenset(
    {
        "main_grad",
        "grad_added_to_main_grad",
        "overwrite_main_grad",
        "zero_out_wgrad",
        "__fsdp_param__",
    }
)
# Names a framework calls a function or method by: renaming them changes what the code does.
PROTOCOL_NAMES = frozenset({"forward", "backward", "backward_dw", "setup_context", "jvp", "vjp"})
# The autograd context's own methods and attributes.
CTX_PROTOCOL = frozenset(
    {
        "save_for_backward",
        "saved_tensors",
        "needs_input_grad",
        "mark_dirty",
        "mark_non_differentiable",
        "set_materialize_grads",
    }
)
INPLACE_METHODS = frozenset({"add_", "copy_", "zero_", "fill_", "mul_", "addmm_", "baddbmm_"})
# Parameter names of the torch functions a snippet calls, for keyword spellings.
TORCH_SIGNATURES = {
    "zeros_like": ("input",),
    "empty_like": ("input",),
    "ones_like": ("input",),
    "matmul": ("input", "other"),
    "mm": ("input", "mat2"),
}
MARK = "# bug"
# How code names the Parameter beside its copy (``origin_weight`` for ``weight``): a rename
# keeps the prefix, as the rules' pages say they read it.
TWIN_PREFIXES = ("origin_", "original_", "orig_")
_RESERVED = frozenset(keyword.kwlist) | frozenset(dir(builtins))


def _parse(source: str) -> cst.Module:
    return cst.parse_module(source)


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _marked(node: cst.CSTNode) -> bool:
    return MARK in _code(node)


def _mark_comment() -> cst.TrailingWhitespace:
    return cst.TrailingWhitespace(
        whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(MARK), newline=cst.Newline()
    )


# --------------------------------------------------------------------------- names


class _Bindings(cst.CSTVisitor):
    """Names bound inside functions, names bound at module level, every identifier, and the
    functions and classes the file defines."""

    def __init__(self) -> None:
        self.depth = 0
        self.local: list[str] = []
        self.module_level: set[str] = set()
        self.declared: set[str] = set()  # global / nonlocal
        self.identifiers: set[str] = set()
        self.functions: dict[str, list[cst.FunctionDef]] = {}
        self.top_functions: set[str] = set()
        self.classes: list[str] = []

    def _bind(self, name: str) -> None:
        if self.depth:
            if name not in self.local:
                self.local.append(name)
        else:
            self.module_level.add(name)

    def _bind_target(self, target: cst.CSTNode) -> None:
        for name in m.findall(target, m.Name()):
            if not _is_attr_or_subscript_part(target, name):
                self._bind(name.value)

    def visit_Name(self, node: cst.Name) -> None:
        self.identifiers.add(node.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.setdefault(node.name.value, []).append(node)
        if self.depth == 0:
            self.top_functions.add(node.name.value)
        self._bind(node.name.value) if self.depth else self.module_level.add(node.name.value)
        self.depth += 1
        for param in _all_params(node.params):
            self._bind(param.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.depth -= 1

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.depth += 1
        for param in _all_params(node.params):
            self._bind(param.name.value)

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.depth -= 1

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node.name.value)
        self.module_level.add(node.name.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._bind_target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind_target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind_target(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind_target(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind_target(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bind_target(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind_target(node.target)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self.module_level.add(_code(alias.asname.name if alias.asname else alias.name))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            self.module_level.add(_code(alias.asname.name if alias.asname else alias.name))

    def visit_Global(self, node: cst.Global) -> None:
        self.declared.update(item.name.value for item in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.declared.update(item.name.value for item in node.names)


def _is_attr_or_subscript_part(target: cst.CSTNode, name: cst.Name) -> bool:
    """``name`` is not bound by ``target``: an attribute, or inside an attribute's value or a
    subscript (``a.b = ...``, ``a[i] = ...``)."""
    for node in m.findall(target, m.Attribute() | m.Subscript()):
        if any(inner is name for inner in m.findall(node, m.Name())):
            return True
    return False


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    found = [*params.posonly_params, *params.params, *params.kwonly_params]
    if isinstance(params.star_arg, cst.Param):
        found.append(params.star_arg)
    if params.star_kwarg is not None:
        found.append(params.star_kwarg)
    return found


def _bindings(module: cst.Module) -> _Bindings:
    found = _Bindings()
    module.visit(found)
    return found


def _short(name: str, taken: set[str]) -> str:
    """A short name for ``name`` (its parts' initials, ``weight`` -> ``w``), keeping an
    ``origin_`` prefix, not in ``taken``."""
    for prefix in TWIN_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return prefix + _short(name[len(prefix) :], taken)
    parts = [part for part in name.split("_") if part]
    stem = "".join(part[0] for part in parts).lower() or "v"
    candidate, index = stem, 0
    while candidate in taken or candidate in _RESERVED:
        index += 1
        candidate = f"{stem}{index}"
    taken.add(candidate)
    return candidate


class _Rename(cst.CSTTransformer):
    """Rename the identifiers of ``names`` (Name nodes that are variables; attribute names
    only where ``attrs`` maps them on a receiver named in ``receivers`` or anywhere when
    ``receivers`` is None; keyword arguments of the file's own functions)."""

    def __init__(
        self,
        names: dict[str, str],
        attrs: dict[str, str] | None = None,
        receivers: frozenset[str] | None = None,
        local_functions: frozenset[str] = frozenset(),
    ) -> None:
        self.names = names
        self.attrs = attrs or {}
        self.receivers = receivers
        self.local_functions = local_functions

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        new = self.names.get(updated_node.value)
        return updated_node.with_changes(value=new) if new else updated_node

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute):
        attr = original_node.attr.value
        new = self.attrs.get(attr)
        on_receiver = self.receivers is None or (
            isinstance(original_node.value, cst.Name)
            and original_node.value.value in self.receivers
        )
        if new and on_receiver:
            return updated_node.with_changes(attr=cst.Name(new))
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        if original_node.keyword is None:
            return updated_node
        return updated_node.with_changes(keyword=original_node.keyword)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        callee = _callee_name(original_node)
        if callee not in self.local_functions:
            return updated_node
        args = [
            arg.with_changes(keyword=cst.Name(self.names[arg.keyword.value]))
            if arg.keyword is not None and arg.keyword.value in self.names
            else arg
            for arg in updated_node.args
        ]
        return updated_node.with_changes(args=args)

    def leave_ImportAlias(self, original_node, updated_node):
        return original_node

    def leave_FunctionDef(self, original_node, updated_node):
        new = self.names.get(original_node.name.value)
        return updated_node.with_changes(name=cst.Name(new) if new else original_node.name)

    def leave_ClassDef(self, original_node, updated_node):
        new = self.names.get(original_node.name.value)
        return updated_node.with_changes(name=cst.Name(new) if new else original_node.name)


def _callee_name(call: cst.Call) -> str | None:
    if isinstance(call.func, cst.Name):
        return call.func.value
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    return None


def rename_locals(source: str) -> str:
    """Every parameter and local variable gets a short name (``weight`` -> ``w``,
    ``wgrad`` -> ``w1``, ``origin_weight`` -> ``origin_w``: a twin prefix stays); ``self``,
    ``ctx`` and ``cls`` keep theirs."""
    module = _parse(source)
    found = _bindings(module)
    keep = found.module_level | found.declared | {"self", "ctx", "cls", "_"}
    taken = set(found.identifiers) | _all_attr_names(module)
    mapping: dict[str, str] = {}
    renamed = [name for name in found.local if name not in keep and name not in found.functions]
    # ``origin_w`` stays the twin of ``w``: stems first, then their ``origin_`` names.
    for name in sorted(renamed, key=lambda n: n.startswith(TWIN_PREFIXES)):
        prefix = next((p for p in TWIN_PREFIXES if name.startswith(p)), "")
        stem = name[len(prefix) :] if prefix else None
        if stem in mapping and prefix + mapping[stem] not in taken:
            mapping[name] = prefix + mapping[stem]
            taken.add(mapping[name])
        else:
            mapping[name] = _short(name, taken)
    if not mapping:
        return source
    functions = frozenset(found.functions)
    return module.visit(_Rename(mapping, local_functions=functions)).code


def _all_attr_names(module: cst.Module) -> set[str]:
    return {node.attr.value for node in m.findall(module, m.Attribute())}


def rename_ctx_attrs(source: str) -> str:
    """The autograd context's attributes holding weights (``ctx.weight``,
    ``ctx.origin_weight_ref``) get other names, in every function of the file."""
    module = _parse(source)
    names = {
        node.attr.value
        for node in m.findall(module, m.Attribute(value=m.Name("ctx")))
        if node.attr.value not in CTX_PROTOCOL
        and ("weight" in node.attr.value or "param" in node.attr.value)
    }
    if not names:
        return source
    taken = set(_bindings(module).identifiers) | _all_attr_names(module)
    mapping = {name: _short(name, taken) + "_kept" for name in sorted(names)}
    return module.visit(_Rename({}, mapping, frozenset({"ctx"}))).code


def rename_classes(source: str) -> str:
    """Every class of the file gets another name (``GroupedMLP`` -> ``Block0``)."""
    module = _parse(source)
    found = _bindings(module)
    taken = set(found.identifiers)
    mapping = {}
    for index, name in enumerate(found.classes):
        new = f"Block{index}"
        while new in taken:
            new += "x"
        mapping[name] = new
    if not mapping:
        return source
    return module.visit(_Rename(mapping, {})).code


def _methods_of_external_subclasses(module: cst.Module, local_classes: set[str]) -> set[str]:
    """Method names of the classes that extend a class of another file: they may override
    its methods (renaming them would change what runs)."""
    found = set()
    for node in m.findall(module, m.ClassDef()):
        bases = [_code(arg.value) for arg in node.bases]
        if any(base not in local_classes and base != "object" for base in bases):
            found.update(f.name.value for f in m.findall(node.body, m.FunctionDef()))
    return found


def rename_functions(source: str) -> str:
    """Every function of the file that no framework calls by name (not ``forward``,
    ``backward``, ``backward_dw``, dunders, nor a method of a class extending a class of
    another file) gets another name, at its calls too."""
    module = _parse(source)
    found = _bindings(module)
    taken = set(found.identifiers) | _all_attr_names(module)
    overriding = _methods_of_external_subclasses(module, set(found.classes))
    mapping = {}
    for index, name in enumerate(sorted(found.functions)):
        if name in PROTOCOL_NAMES or name.startswith("__") or name in overriding:
            continue
        new = f"step{index}"
        while new in taken:
            new += "x"
        mapping[name] = new
    if not mapping:
        return source
    # Methods are reached as attributes (self.f, Cls.f): rename those attribute names too.
    return module.visit(_Rename(mapping, mapping, None, frozenset())).code


# --------------------------------------------------------------------------- statements


def _free_locals(node: cst.CSTNode, bound: list[str]) -> list[str]:
    """The names ``node`` loads that the enclosing functions bind, in order of appearance."""
    names = []
    skip = set()
    for attribute in m.findall(node, m.Attribute()):
        skip.add(id(attribute.attr))
    for arg in m.findall(node, m.Arg()):
        if arg.keyword is not None:
            skip.add(id(arg.keyword))
    for name in m.findall(node, m.Name()):
        if id(name) in skip:
            continue
        if name.value in bound and name.value not in names:
            names.append(name.value)
    return names


def _writes_main_grad(line: cst.SimpleStatementLine) -> bool:
    """A one-statement line that writes through main_grad (a call handed it or called on it,
    an augmented or subscript assignment to it) and binds no local name."""
    if len(line.body) != 1:
        return False
    (statement,) = line.body
    text = _code(statement)
    names_main_grad = m.findall(statement, m.Attribute(attr=m.Name("main_grad"))) or (
        '"main_grad"' in text or "get_main_grad" in text
    )
    if not names_main_grad or "super(" in text or m.findall(statement, m.NamedExpr()):
        return False
    if m.findall(statement, m.Yield() | m.Await()):
        return False
    if isinstance(statement, cst.Expr):
        return isinstance(statement.value, cst.Call)
    if isinstance(statement, cst.AugAssign):
        return isinstance(statement.target, (cst.Attribute, cst.Subscript))
    if isinstance(statement, cst.Assign):
        return all(
            isinstance(target.target, cst.Subscript) and "main_grad" in _code(target.target)
            for target in statement.targets
        )
    return False


class _ExtractHelpers(cst.CSTTransformer):
    """Move each main_grad write of a function into a module-level helper handed the
    function's names the statement uses (the weight among them)."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken
        self.scopes: list[list[str]] = []
        self.helpers: list[cst.FunctionDef] = []
        self.pending: list[cst.FunctionDef] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        inner = _Bindings()
        inner.depth = 1
        for param in _all_params(node.params):
            inner._bind(param.name.value)
        node.body.visit(inner)
        self.scopes.append(inner.local)

    def leave_FunctionDef(self, original_node, updated_node):
        self.scopes.pop()
        return updated_node

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if not self.scopes or not _writes_main_grad(original_node):
            return updated_node
        bound = [name for scope in self.scopes for name in scope]
        params = _free_locals(original_node.body[0], bound)
        name = "_write_main_grad"
        index = 0
        while name in self.taken:
            index += 1
            name = f"_write_main_grad{index}"
        self.taken.add(name)
        helper = cst.FunctionDef(
            name=cst.Name(name),
            params=cst.Parameters(params=[cst.Param(cst.Name(p)) for p in params]),
            body=cst.IndentedBlock(body=[original_node.with_changes(leading_lines=[])]),
        )
        self.pending.append(helper)
        call = cst.Expr(cst.Call(cst.Name(name), args=[cst.Arg(cst.Name(p)) for p in params]))
        trailing = _mark_comment() if _marked(original_node) else cst.TrailingWhitespace()
        return updated_node.with_changes(body=[call], trailing_whitespace=trailing)


def extract_main_grad_write(source: str) -> str:
    """Each statement that writes through main_grad (``general_gemm(..., out=w.main_grad)``,
    ``w.main_grad.add_(g)``, ``w.main_grad += g``) moves into a helper function of the file,
    handed the weight and the other local names it uses; the statement becomes its call."""
    module = _parse(source)
    taken = set(_bindings(module).identifiers)
    body = []
    for statement in module.body:
        mover = _ExtractHelpers(taken)
        new = statement.visit(mover)
        for helper in mover.pending:
            body.append(helper.with_changes(leading_lines=[cst.EmptyLine()]))
        body.append(new)
    return module.with_changes(body=body).code


_UNSAFE_TO_HOIST = m.IfExp() | m.BooleanOperation() | m.Lambda() | m.ListComp() | m.GeneratorExp()
_UNSAFE_TO_HOIST |= m.SetComp() | m.DictComp()


def _hoistable_main_grad(expression: cst.CSTNode) -> cst.Attribute | None:
    """The first ``X.main_grad`` read in ``expression`` (X a name or attribute chain) that is
    evaluated whatever the rest evaluates to (not in a conditional, boolean operand, lambda or
    comprehension)."""
    guarded = set()
    for node in m.findall(expression, _UNSAFE_TO_HOIST):
        guarded.update(id(inner) for inner in m.findall(node, m.Attribute()))
    for node in m.findall(expression, m.Attribute(attr=m.Name("main_grad"))):
        if id(node) in guarded:
            continue
        if _is_chain(node.value):
            return node
    return None


def _is_chain(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.Name):
        return True
    return isinstance(node, cst.Attribute) and _is_chain(node.value)


class _InFunctions(cst.CSTTransformer):
    """A transformer that knows how many functions deep it is (``depth``): the mutations
    change statements inside functions only."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0

    def visit_FunctionDef(self, node) -> None:
        self.depth += 1

    def leave_FunctionDef(self, original_node, updated_node):
        self.depth -= 1
        return updated_node


class _ReplaceNode(cst.CSTTransformer):
    def __init__(self, text: str, replacement: cst.BaseExpression) -> None:
        self.text = text
        self.replacement = replacement

    def leave_Attribute(self, original_node, updated_node):
        if _code(original_node) == self.text:
            return self.replacement
        return updated_node


class _BindMainGrad(_InFunctions):
    def __init__(self, local: str) -> None:
        super().__init__()
        self.local = local

    def _bind(self, access: cst.Attribute, marked: bool) -> cst.SimpleStatementLine:
        """``main_grad = X.main_grad``, marked as the statement it was taken from (a rule
        that reports the read of main_grad reports it here now)."""
        return cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(cst.Name(self.local))], access)],
            trailing_whitespace=_mark_comment() if marked else cst.TrailingWhitespace(),
        )

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if not self.depth or len(original_node.body) != 1:
            return updated_node
        (statement,) = original_node.body
        kinds = (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Expr, cst.Return)
        if not isinstance(statement, kinds):
            return updated_node
        reads = statement.value  # an assignment's targets are bound after it is read
        if reads is None:
            return updated_node
        access = _hoistable_main_grad(reads)
        if access is None:
            return updated_node
        text = _code(access)
        if not isinstance(statement, (cst.Expr, cst.Return)):
            targets = statement.targets if isinstance(statement, cst.Assign) else [statement]
            if any(text in _code(t.target) for t in targets):
                return updated_node
        replaced = updated_node.visit(_ReplaceNode(text, cst.Name(self.local)))
        return cst.FlattenSentinel([self._bind(access, _marked(original_node)), replaced])

    def leave_If(self, original_node, updated_node):
        if not self.depth:
            return updated_node
        access = _hoistable_main_grad(original_node.test)
        if access is None:
            return updated_node
        test = updated_node.test.visit(_ReplaceNode(_code(access), cst.Name(self.local)))
        marked = (
            MARK in _code(original_node.body.header)
            if hasattr(original_node.body, "header")
            else False
        )
        return cst.FlattenSentinel(
            [self._bind(access, marked), updated_node.with_changes(test=test)]
        )


def bind_main_grad_local(source: str) -> str:
    """Before each statement (or ``if``) that reads ``X.main_grad`` unconditionally, bind
    ``mg_local = X.main_grad`` and read the local instead (a name that says nothing: the
    rule must follow the binding)."""
    module = _parse(source)
    taken = set(_bindings(module).identifiers)
    local = "mg_local"
    while local in taken:
        local += "_"
    return _bind_main_grad(module, local)


def bind_main_grad_named(source: str) -> str:
    """As ``bind_main_grad_local``, with the local named ``main_grad`` (as Transformer
    Engine spells it), where no variable of the file has that name."""
    module = _parse(source)
    found = _bindings(module)
    if "main_grad" in found.local or "main_grad" in found.module_level:
        return source
    return _bind_main_grad(module, "main_grad")


def _bind_main_grad(module: cst.Module, local: str) -> str:
    # An ``elif`` test is evaluated only when the ``if`` before it fails: leave those alone
    # by not hoisting out of If nodes that are another If's orelse (libcst gives them as If).
    return module.visit(_SkipElif(_BindMainGrad(local))).code


class _SkipElif(cst.CSTTransformer):
    """Run ``inner`` but keep every ``elif`` test as it was."""

    def __init__(self, inner: _BindMainGrad) -> None:
        self.inner = inner
        self.elifs: set[int] = set()

    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.If):
            self.elifs.add(id(node.orelse))

    def visit_FunctionDef(self, node) -> None:
        self.inner.visit_FunctionDef(node)

    def leave_FunctionDef(self, original_node, updated_node):
        return self.inner.leave_FunctionDef(original_node, updated_node)

    def leave_SimpleStatementLine(self, original_node, updated_node):
        return self.inner.leave_SimpleStatementLine(original_node, updated_node)

    def leave_If(self, original_node, updated_node):
        if id(original_node) in self.elifs:
            return updated_node
        return self.inner.leave_If(original_node, updated_node)


# --------------------------------------------------------------------------- control flow


def _negate(test: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression
        return inner.with_changes(lpar=[], rpar=[]) if inner.lpar else inner
    if isinstance(test, (cst.BooleanOperation, cst.IfExp, cst.NamedExpr, cst.Lambda)):
        test = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.UnaryOperation(cst.Not(), test)


class _SwapIfElse(cst.CSTTransformer):
    def leave_If(self, original_node, updated_node):
        if not isinstance(updated_node.orelse, cst.Else):
            return updated_node
        body, orelse = updated_node.body, updated_node.orelse.body
        if not isinstance(body, cst.IndentedBlock) or not isinstance(orelse, cst.IndentedBlock):
            return updated_node
        # The comments on the ``if`` and ``else`` lines stay on those lines.
        return updated_node.with_changes(
            test=_negate(updated_node.test),
            body=orelse.with_changes(header=body.header),
            orelse=updated_node.orelse.with_changes(body=body.with_changes(header=orelse.header)),
        )


def swap_if_else(source: str) -> str:
    """``if c: A else: B`` becomes ``if not c: B else: A`` (``if not c`` becomes ``if c``)."""
    return _parse(source).visit(_SwapIfElse()).code


def _single_assign(block: cst.BaseSuite) -> tuple[str, cst.BaseExpression, bool] | None:
    if not isinstance(block, cst.IndentedBlock) or len(block.body) != 1:
        return None
    (line,) = block.body
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    (statement,) = line.body
    if (
        isinstance(statement, cst.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0].target, cst.Name)
    ):
        return statement.targets[0].target.value, statement.value, _marked(line)
    return None


def _paren(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, (cst.IfExp, cst.Lambda, cst.NamedExpr)):
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return node


class _IfToIfExp(cst.CSTTransformer):
    def leave_If(self, original_node, updated_node):
        if not isinstance(updated_node.orelse, cst.Else):
            return updated_node
        first = _single_assign(updated_node.body)
        second = _single_assign(updated_node.orelse.body)
        if first is None or second is None or first[0] != second[0]:
            return updated_node
        headers = [updated_node.body, updated_node.orelse.body]
        marked = first[2] or second[2] or any(MARK in _code(h.header) for h in headers)
        value = cst.IfExp(
            test=_paren(updated_node.test), body=_paren(first[1]), orelse=_paren(second[1])
        )
        return cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(cst.Name(first[0]))], value)],
            leading_lines=updated_node.leading_lines,
            trailing_whitespace=_mark_comment() if marked else cst.TrailingWhitespace(),
        )


def if_to_conditional_expression(source: str) -> str:
    """``if c: x = a else: x = b`` becomes ``x = a if c else b``."""
    return _parse(source).visit(_IfToIfExp()).code


class _IfExpToIf(_InFunctions):
    def leave_SimpleStatementLine(self, original_node, updated_node):
        if not self.depth or len(updated_node.body) != 1:
            return updated_node
        (statement,) = updated_node.body
        value = getattr(statement, "value", None)
        if not isinstance(value, cst.IfExp):
            return updated_node
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:

            def make(v):
                return statement.with_changes(value=v.with_changes(lpar=[], rpar=[]))
        elif isinstance(statement, cst.Return):

            def make(v):
                return statement.with_changes(
                    value=v.with_changes(lpar=[], rpar=[]),
                    whitespace_after_return=cst.SimpleWhitespace(" "),
                )
        else:
            return updated_node
        trailing = updated_node.trailing_whitespace
        header = _mark_comment() if _marked(original_node) else cst.TrailingWhitespace()
        return cst.If(
            test=value.test.with_changes(lpar=[], rpar=[]),
            body=cst.IndentedBlock(
                [cst.SimpleStatementLine([make(value.body)], trailing_whitespace=trailing)],
                header=header,
            ),
            orelse=cst.Else(
                cst.IndentedBlock(
                    [cst.SimpleStatementLine([make(value.orelse)], trailing_whitespace=trailing)]
                )
            ),
            leading_lines=updated_node.leading_lines,
        )


def conditional_expression_to_if(source: str) -> str:
    """``x = a if c else b`` (and ``return a if c else b``) becomes an ``if``/``else``."""
    return _parse(source).visit(_IfExpToIf()).code


def _ends_flow(block: list[cst.BaseStatement]) -> bool:
    if not block:
        return False
    last = block[-1]
    return isinstance(last, cst.SimpleStatementLine) and isinstance(
        last.body[-1], (cst.Return, cst.Raise)
    )


class _EarlyReturn(cst.CSTTransformer):
    """In each function body, the first top-level ``if``/``else``: the ``if`` branch runs the
    rest of the body and returns, the ``else`` branch's statements follow it unindented."""

    def leave_FunctionDef(self, original_node, updated_node):
        body = list(updated_node.body.body)
        index = next(
            (
                i
                for i, stmt in enumerate(body)
                if isinstance(stmt, cst.If) and isinstance(stmt.orelse, cst.Else)
            ),
            None,
        )
        if index is None:
            return updated_node
        statement = body[index]
        if not isinstance(statement.body, cst.IndentedBlock) or not isinstance(
            statement.orelse.body, cst.IndentedBlock
        ):
            return updated_node
        if m.findall(original_node.body, m.Yield()):
            return updated_node
        tail = body[index + 1 :]
        first = list(statement.body.body)
        if not _ends_flow(first):
            first += tail
            if not _ends_flow(first):
                first.append(cst.SimpleStatementLine([cst.Return()]))
        new_if = statement.with_changes(body=statement.body.with_changes(body=first), orelse=None)
        rest = list(statement.orelse.body.body) + tail
        new_body = [*body[:index], new_if, *rest]
        return updated_node.with_changes(body=updated_node.body.with_changes(body=new_body))


def early_return(source: str) -> str:
    """``if c: A else: B`` followed by ``T`` in a function body becomes ``if c: A; T; return``
    followed by ``B; T``."""
    return _parse(source).visit(_EarlyReturn()).code


class _Wrap(cst.CSTTransformer):
    def __init__(self, wrap: Callable[[list[cst.BaseStatement]], cst.BaseCompoundStatement]):
        self.wrap = wrap

    def leave_FunctionDef(self, original_node, updated_node):
        if "main_grad" not in _code(original_node.body) or not isinstance(
            updated_node.body, cst.IndentedBlock
        ):
            return updated_node
        body = list(updated_node.body.body)
        docstring = []
        if body and m.matches(
            body[0], m.SimpleStatementLine([m.Expr(m.SimpleString() | m.ConcatenatedString())])
        ):
            docstring = [body.pop(0)]
        if not body:
            return updated_node
        wrapped = self.wrap(body)
        return updated_node.with_changes(
            body=updated_node.body.with_changes(body=[*docstring, wrapped])
        )


def wrap_no_grad(source: str) -> str:
    """The body of each function that mentions main_grad runs under ``with torch.no_grad():``."""
    return (
        _parse(source)
        .visit(
            _Wrap(
                lambda body: cst.With(
                    [cst.WithItem(cst.parse_expression("torch.no_grad()"))], cst.IndentedBlock(body)
                )
            )
        )
        .code
    )


def wrap_try_finally(source: str) -> str:
    """The body of each function that mentions main_grad runs in ``try: ... finally: pass``."""
    return (
        _parse(source)
        .visit(
            _Wrap(
                lambda body: cst.Try(
                    cst.IndentedBlock(body),
                    finalbody=cst.Finally(
                        cst.IndentedBlock([cst.SimpleStatementLine([cst.Pass()])])
                    ),
                )
            )
        )
        .code
    )


# --------------------------------------------------------------------------- spellings


class _Targets(cst.CSTVisitor):
    """The attribute nodes that are assignment or deletion targets."""

    def __init__(self) -> None:
        self.ids: set[int] = set()

    def _add(self, target: cst.CSTNode) -> None:
        if isinstance(target, cst.Attribute):
            self.ids.add(id(target))
        for element in getattr(target, "elements", ()):
            self._add(element.value)

    def visit_AssignTarget(self, node) -> None:
        self._add(node.target)

    def visit_AugAssign(self, node) -> None:
        self._add(node.target)

    def visit_AnnAssign(self, node) -> None:
        self._add(node.target)

    def visit_Del(self, node) -> None:
        self._add(node.target)

    def visit_For(self, node) -> None:
        self._add(node.target)


class _GetattrSpelling(cst.CSTTransformer):
    def __init__(self, targets: set[int]) -> None:
        self.targets = targets

    def leave_Attribute(self, original_node, updated_node):
        if original_node.attr.value not in CONTRACT_ATTRS or id(original_node) in self.targets:
            return updated_node
        return cst.Call(
            cst.Name("getattr"),
            [
                cst.Arg(updated_node.value),
                cst.Arg(cst.SimpleString(f'"{original_node.attr.value}"')),
            ],
            lpar=updated_node.lpar,
            rpar=updated_node.rpar,
        )


def getattr_spelling(source: str) -> str:
    """``X.main_grad`` (and the contract's other attributes) read as ``getattr(X, "main_grad")``."""
    module = _parse(source)
    targets = _Targets()
    module.visit(targets)
    return module.visit(_GetattrSpelling(targets.ids)).code


class _SetattrSpelling(cst.CSTTransformer):
    def leave_SimpleStatementLine(self, original_node, updated_node):
        if len(updated_node.body) != 1:
            return updated_node
        (statement,) = updated_node.body
        if not (
            isinstance(statement, cst.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, cst.Attribute)
            and statement.targets[0].target.attr.value in CONTRACT_ATTRS
        ):
            return updated_node
        target = statement.targets[0].target
        call = cst.Call(
            cst.Name("setattr"),
            [
                cst.Arg(target.value),
                cst.Arg(cst.SimpleString(f'"{target.attr.value}"')),
                cst.Arg(statement.value),
            ],
        )
        return updated_node.with_changes(body=[cst.Expr(call)])


def setattr_spelling(source: str) -> str:
    """``X.grad_added_to_main_grad = True`` (a contract attribute) as ``setattr(X, ..., True)``."""
    return _parse(source).visit(_SetattrSpelling()).code


class _HasattrSpelling(cst.CSTTransformer):
    def leave_Call(self, original_node, updated_node):
        if not (
            m.matches(updated_node.func, m.Name("getattr"))
            and len(updated_node.args) == 3
            and all(arg.keyword is None and not arg.star for arg in updated_node.args)
            and isinstance(updated_node.args[1].value, cst.SimpleString)
        ):
            return updated_node
        owner, name, default = (arg.value for arg in updated_node.args)
        attr = name.evaluated_value
        if not isinstance(attr, str) or not attr.isidentifier():
            return updated_node
        access = cst.Attribute(owner, cst.Name(attr))
        test = cst.Call(cst.Name("hasattr"), [cst.Arg(owner), cst.Arg(name)])
        return cst.IfExp(
            test=test,
            body=access,
            orelse=_paren(default),
            lpar=[cst.LeftParen()],
            rpar=[cst.RightParen()],
        )


def hasattr_spelling(source: str) -> str:
    """``getattr(X, "a", d)`` as ``(X.a if hasattr(X, "a") else d)``."""
    return _parse(source).visit(_HasattrSpelling()).code


class _UnboundMethod(cst.CSTTransformer):
    def leave_Call(self, original_node, updated_node):
        func = updated_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in INPLACE_METHODS):
            return updated_node
        if isinstance(func.value, cst.Name) and func.value.value in {"torch", "Tensor"}:
            return updated_node
        if "Tensor" in _code(func.value):
            return updated_node
        receiver = func.value
        args = [cst.Arg(receiver.with_changes(lpar=[], rpar=[])), *updated_node.args]
        args = [
            arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            if i < len(args) - 1
            else arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)
            for i, arg in enumerate(args)
        ]
        return updated_node.with_changes(
            func=cst.parse_expression(f"torch.Tensor.{func.attr.value}"), args=args
        )


def tensor_method_unbound(source: str) -> str:
    """``X.add_(g)`` (and ``copy_``, ``zero_``, ...) as ``torch.Tensor.add_(X, g)``."""
    return _parse(source).visit(_UnboundMethod()).code


class _AugAssignToMethod(cst.CSTTransformer):
    def leave_SimpleStatementLine(self, original_node, updated_node):
        if len(updated_node.body) != 1:
            return updated_node
        (statement,) = updated_node.body
        if not (
            isinstance(statement, cst.AugAssign)
            and isinstance(statement.operator, cst.AddAssign)
            and isinstance(statement.target, (cst.Name, cst.Attribute, cst.Subscript))
            and ("main_grad" in _code(statement.target) or _code(statement.target).endswith("grad"))
        ):
            return updated_node
        call = cst.Call(
            cst.Attribute(statement.target, cst.Name("add_")), [cst.Arg(statement.value)]
        )
        return updated_node.with_changes(body=[cst.Expr(call)])


def augassign_as_add_(source: str) -> str:
    """``X.main_grad += g`` (also a local holding it, or ``w.grad += g``) as
    ``X.main_grad.add_(g)``: for a tensor, ``+=`` is ``add_`` on the same object."""
    return _parse(source).visit(_AugAssignToMethod()).code


def _signatures(module: cst.Module) -> dict[str, tuple[str, ...]]:
    """The positional parameter names of the file's functions (methods without their first),
    for names defined once with no ``*args``/``**kwargs``."""
    found: dict[str, list[tuple[str, ...]]] = {}

    class Visitor(cst.CSTVisitor):
        def __init__(self) -> None:
            self.in_class = [False]

        def visit_ClassDef(self, node) -> None:
            self.in_class.append(True)

        def leave_ClassDef(self, original_node) -> None:
            self.in_class.pop()

        def visit_FunctionDef(self, node) -> None:
            params = node.params
            names = tuple(p.name.value for p in params.params)
            method = self.in_class[-1] and not any(
                m.matches(d.decorator, m.Name("staticmethod")) for d in node.decorators
            )
            if method:
                names = names[1:]
            plain = not (
                params.posonly_params
                or isinstance(params.star_arg, cst.Param)
                or params.star_kwarg
                or params.kwonly_params
            )
            found.setdefault(node.name.value, []).append(names if plain else None)
            self.in_class.append(False)

        def leave_FunctionDef(self, original_node) -> None:
            self.in_class.pop()

    module.visit(Visitor())
    return {
        name: sigs[0]
        for name, sigs in found.items()
        if len(sigs) == 1 and sigs[0] is not None and name not in PROTOCOL_NAMES
    }


def _torch_callee(call: cst.Call) -> str | None:
    func = call.func
    if (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == "torch"
        and func.attr.value in TORCH_SIGNATURES
    ):
        return func.attr.value
    return None


class _ToKeywords(cst.CSTTransformer):
    def __init__(self, signatures: dict[str, tuple[str, ...]]) -> None:
        self.signatures = signatures

    def leave_Call(self, original_node, updated_node):
        torch_name = _torch_callee(original_node)
        if torch_name:
            names = TORCH_SIGNATURES[torch_name]
        else:
            callee = _callee_name(original_node)
            if callee not in self.signatures or (
                isinstance(original_node.func, cst.Attribute)
                and not m.matches(original_node.func.value, m.Name("self") | m.Name("cls"))
            ):
                return updated_node
            names = self.signatures[callee]
        args = list(updated_node.args)
        positional = [a for a in args if a.keyword is None and not a.star]
        if not positional or any(a.star for a in args) or len(positional) > len(names):
            return updated_node
        new = []
        for index, arg in enumerate(args):
            if arg.keyword is None:
                arg = arg.with_changes(
                    keyword=cst.Name(names[index]),
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                )
            new.append(arg)
        return updated_node.with_changes(args=new)


def positional_to_keyword(source: str) -> str:
    """Positional arguments of the file's own functions (and of ``torch.zeros_like`` and
    friends) handed by keyword."""
    module = _parse(source)
    return module.visit(_ToKeywords(_signatures(module))).code


class _ToPositional(cst.CSTTransformer):
    def __init__(self, signatures: dict[str, tuple[str, ...]]) -> None:
        self.signatures = signatures

    def leave_Call(self, original_node, updated_node):
        callee = _callee_name(original_node)
        if callee not in self.signatures:
            return updated_node
        if isinstance(original_node.func, cst.Attribute) and not m.matches(
            original_node.func.value, m.Name("self") | m.Name("cls")
        ):
            return updated_node
        names = self.signatures[callee]
        args = list(updated_node.args)
        if any(a.star for a in args):
            return updated_node
        positional = [a for a in args if a.keyword is None]
        by_name = {a.keyword.value: a for a in args if a.keyword is not None}
        if not by_name:
            return updated_node
        new = list(positional)
        for name in names[len(positional) :]:
            if name not in by_name:
                break
            new.append(
                by_name.pop(name).with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)
            )
        if len(new) == len(positional):
            return updated_node
        new += list(by_name.values())
        new = [
            arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            if i < len(new) - 1
            else arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)
            for i, arg in enumerate(new)
        ]
        return updated_node.with_changes(args=new)


def keyword_to_positional(source: str) -> str:
    """Keyword arguments of the file's own functions handed by position, in parameter order."""
    module = _parse(source)
    return module.visit(_ToPositional(_signatures(module))).code


class _ReverseKeywords(cst.CSTTransformer):
    def leave_Call(self, original_node, updated_node):
        args = list(updated_node.args)
        keywords = [a for a in args if a.keyword is not None]
        if len(keywords) < 2 or any(a.star for a in args):
            return updated_node
        rest = [a for a in args if a.keyword is None]
        new = rest + keywords[::-1]
        # Each argument keeps its comma (and the comment after it); the one that was last
        # gets one if it had none (a trailing comma is valid on the one now last).
        was_last = args[-1]
        if was_last is not new[-1] and not isinstance(was_last.comma, cst.Comma):
            comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            new = [arg.with_changes(comma=comma) if arg is was_last else arg for arg in new]
        return updated_node.with_changes(args=new)


def keyword_order(source: str) -> str:
    """The keyword arguments of every call in reverse order."""
    return _parse(source).visit(_ReverseKeywords()).code


class _KeywordsToDict(_InFunctions):
    def __init__(self, taken: set[str]) -> None:
        super().__init__()
        self.taken = taken

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if not self.depth or len(updated_node.body) != 1:
            return updated_node
        (statement,) = updated_node.body
        call = getattr(statement, "value", None)
        if not isinstance(statement, (cst.Expr, cst.Assign, cst.Return)) or not isinstance(
            call, cst.Call
        ):
            return updated_node
        keywords = [a for a in call.args if a.keyword is not None]
        if not any(a.keyword.value == "out" for a in keywords) or any(a.star for a in call.args):
            return updated_node
        name = "gemm_kwargs"
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        entries = [
            cst.DictElement(cst.SimpleString(f'"{a.keyword.value}"'), a.value) for a in keywords
        ]
        trailing = _mark_comment() if _marked(original_node) else cst.TrailingWhitespace()
        binding = cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(cst.Name(name))], cst.Dict(entries))],
            trailing_whitespace=trailing,
        )
        args = [
            a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in call.args if a.keyword is None
        ]
        args.append(cst.Arg(cst.Name(name), star="**"))
        args = [
            arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            if i < len(args) - 1
            else arg
            for i, arg in enumerate(args)
        ]
        new_call = call.with_changes(args=args)
        replaced = updated_node.with_changes(body=[statement.with_changes(value=new_call)])
        return cst.FlattenSentinel([binding, replaced])


def keywords_to_dict(source: str) -> str:
    """A call given ``out=`` (a GEMM handed its destination) takes its keyword arguments
    from a dict built just before it: ``gemm_kwargs = {"out": ..., ...}``;
    ``gemm(x, dy, **gemm_kwargs)``."""
    module = _parse(source)
    taken = set(_bindings(module).identifiers)
    return module.visit(_KeywordsToDict(taken)).code


class _UnpackByIndex(cst.CSTTransformer):
    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if len(updated_node.body) != 1:
            return updated_node
        (statement,) = updated_node.body
        if not (
            isinstance(statement, cst.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, (cst.Tuple, cst.List))
        ):
            return updated_node
        elements = statement.targets[0].target.elements
        if any(isinstance(e, cst.StarredElement) for e in elements) or not elements:
            return updated_node
        if isinstance(statement.value, (cst.Tuple, cst.List)):
            return updated_node  # ``a, b = x, y`` binds each name directly
        name = "saved"
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        trailing = _mark_comment() if _marked(original_node) else cst.TrailingWhitespace()
        lines = [
            cst.SimpleStatementLine(
                [cst.Assign([cst.AssignTarget(cst.Name(name))], statement.value)],
                leading_lines=updated_node.leading_lines,
                trailing_whitespace=trailing,
            )
        ]
        for index, element in enumerate(elements):
            item = cst.Subscript(
                cst.Name(name), [cst.SubscriptElement(cst.Index(cst.Integer(str(index))))]
            )
            lines.append(
                cst.SimpleStatementLine(
                    [cst.Assign([cst.AssignTarget(element.value)], item)],
                    trailing_whitespace=trailing,
                )
            )
        return cst.FlattenSentinel(lines)


def unpack_by_index(source: str) -> str:
    """``a, b = value`` (``ctx.saved_tensors``, a GEMM's tuple; not a display) as
    ``saved = value`` then ``a = saved[0]`` and ``b = saved[1]`` (for a tuple or list value:
    the same objects)."""
    module = _parse(source)
    taken = set(_bindings(module).identifiers)
    return module.visit(_UnpackByIndex(taken)).code


# Functions of the file that nobody calls and that name the contract's settings, as a
# module's other code does (a config reader, a log line, a dummy factory): what one function
# asks or spells must not stand in for another's. (Not FSDP: a file naming it is FSDP code,
# a fact of the file that GMLP016's reset check rightly takes.)
UNRELATED_CONTEXT_FUNCTIONS = """


def _describe_gradient_strategy(config):
    return (
        config.overwrite_main_grad,
        config.data_parallel_sharding_strategy,
        config.gradient_accumulation_fusion,
        config.fuse_wgrad_accumulation,
        config.delay_wgrad_compute,
    )


def _describe_param_flags(param):
    return (
        getattr(param, "grad_added_to_main_grad", None),
        getattr(param, "overwrite_main_grad", None),
        getattr(param, "zero_out_wgrad", None),
    )


def _get_dummy_wgrad(shape, dtype):
    return torch.zeros(shape, dtype=dtype, requires_grad=False)
"""


def unrelated_context_functions(source: str) -> str:
    """Append functions that are never called: one reads ``overwrite_main_grad``, the
    sharding strategy and the wgrad fusion and delay switches from a config, one reads a
    parameter's flags, one makes a dummy wgrad. Nothing the file's other functions do
    changes. Only to files that spell main_grad already (the appended names spell it:
    elsewhere they would change which files are analysed, not what is asked)."""
    if "_describe_gradient_strategy" in source or "main_grad" not in source:
        return source
    return source.rstrip("\n") + "\n" + UNRELATED_CONTEXT_FUNCTIONS


MUTATIONS: dict[str, Callable[[str], str]] = {
    "rename-locals": rename_locals,
    "rename-ctx-attrs": rename_ctx_attrs,
    "rename-classes": rename_classes,
    "rename-functions": rename_functions,
    "extract-write-helper": extract_main_grad_write,
    "bind-main-grad-local": bind_main_grad_local,
    "bind-main-grad-named": bind_main_grad_named,
    "swap-if-else": swap_if_else,
    "if-to-ifexp": if_to_conditional_expression,
    "ifexp-to-if": conditional_expression_to_if,
    "early-return": early_return,
    "wrap-no-grad": wrap_no_grad,
    "wrap-try-finally": wrap_try_finally,
    "getattr": getattr_spelling,
    "setattr": setattr_spelling,
    "hasattr": hasattr_spelling,
    "tensor-method-unbound": tensor_method_unbound,
    "augassign-as-add_": augassign_as_add_,
    "positional-to-keyword": positional_to_keyword,
    "keyword-to-positional": keyword_to_positional,
    "keyword-order": keyword_order,
    "keywords-to-dict": keywords_to_dict,
    "unpack-by-index": unpack_by_index,
    "unrelated-context-functions": unrelated_context_functions,
}


def mutate(name: str, source: str) -> str | None:
    """``source`` after mutation ``name``; None where it does not apply (or makes no change)."""
    mutated = MUTATIONS[name](source)
    if mutated == source:
        return None
    compile(mutated, "<mutant>", "exec")
    return mutated
