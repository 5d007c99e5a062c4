"""The dummy-gradient protocol as the rules see it: where a function marks a parameter with
``grad_added_to_main_grad`` (and the block of code that belongs to the mark), which locals it
hands back as gradients, which helpers of the module do that bookkeeping, and which weight an
expression names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from ..wgrad_words import names_product
from . import patterns
from .cfg import Node
from .module import ModuleContext, Unit, compound_suites, suite_body

# Prefixes and suffixes that name the same weight in another role: the parameter object
# saved beside a restored tensor (``origin_weight``), the module's parameter bound to a
# local (``weight_param``), its final or quantized form (``fc1_weight_final``).
_STEM_PREFIXES = ("origin_", "orig_", "original_")
_STEM_SUFFIXES = ("_object", "_obj", "_param", "_og", "_final", "_fp8", "_quantized")


@dataclass(frozen=True)
class Mark:
    """``X.grad_added_to_main_grad = True`` (or the ``setattr`` spelling)."""

    stmt: cst.CSTNode  # the small statement
    subject: cst.BaseExpression  # X
    node: Node
    block: Sequence[cst.CSTNode]  # the suite the statement sits in
    guard: cst.If | None  # the ``if`` whose body is that suite, if any


def marks(unit: Unit) -> list[Mark]:
    """Every grad_added_to_main_grad mark of the unit's own code."""
    found: list[Mark] = []
    for stmt, suite in unit.statements():
        subject = marked_subject(stmt)
        mark = None if subject is None else mark_at(unit, stmt, suite, subject)
        if mark is not None:
            found.append(mark)
    return found


def mark_at(unit: Unit, stmt: cst.CSTNode, suite, subject: cst.BaseExpression) -> Mark | None:
    """The mark of ``subject`` that ``stmt`` (in ``suite``) makes, with its graph node and
    the ``if`` whose body it opens; None where the statement has no node (dead code)."""
    node = unit.node_for(stmt)
    if node is None:
        return None
    guard = None
    if node.enclosing_ifs:
        stmt_if, side = node.enclosing_ifs[0]
        if side == "body" and suite is suite_body(stmt_if.body):
            guard = stmt_if
    return Mark(stmt, subject, node, suite, guard)


def marked_subject(stmt: cst.CSTNode) -> cst.BaseExpression | None:
    """X for ``X.grad_added_to_main_grad = True`` or
    ``setattr(X, "grad_added_to_main_grad", True)``; None otherwise (also for ``ctx``, where
    forward records whether the parameter has the attribute)."""
    found = patterns.attribute_set(stmt, patterns.GRAD_ADDED)
    if found is None or not (
        patterns.is_true_literal(found[1]) or _asks_own_flag(found[0], found[1])
    ):
        return None
    subject = found[0]
    if isinstance(subject, cst.Name) and subject.value == "ctx":
        return None
    return subject


def _asks_own_flag(subject, value) -> bool:
    """``w.grad_added_to_main_grad = hasattr(w, "grad_added_to_main_grad")``: True on every
    parameter Megatron's DDP set up (it gives each the attribute), so a mark there (blind
    corpus 16: PaddleFleet's FP8 wgrad path marking so while handing back the real
    gradient)."""
    if patterns.callee_name(value) != "hasattr" or len(value.args) != 2:
        return False
    owner, name = (arg.value for arg in value.args)
    same = cst.Module([]).code_for_node(owner) == cst.Module([]).code_for_node(subject)
    return same and patterns.string_value(name) == patterns.GRAD_ADDED


def block_statements(block: Sequence[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """Every statement of a block, small and compound, at any depth (not into functions)."""
    for stmt in block:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body
            continue
        yield stmt
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        for sub in _sub_suites(stmt):
            yield from block_statements(sub)


def _sub_suites(stmt: cst.CSTNode) -> Iterator[Sequence[cst.CSTNode]]:
    if isinstance(stmt, cst.If):
        yield suite_body(stmt.body)
        if isinstance(stmt.orelse, cst.If):
            yield [stmt.orelse]
        elif isinstance(stmt.orelse, cst.Else):
            yield suite_body(stmt.orelse.body)
        return
    for suite in compound_suites(stmt):
        yield suite_body(suite)


def handed_back(unit: Unit) -> frozenset[str]:
    """Locals that leave the function as they are, as one of the gradients it returns: the
    elements of what ``return`` gives (``return dgrad, wgrad``, ``return x, [wgrad]``) and
    of what is stored into a returned container (``grads[i] = (grad_weight,)``)."""
    names: set[str] = set()
    containers: set[str] = set()
    for stmt, _ in unit.statements():
        if isinstance(stmt, cst.Return) and stmt.value is not None:
            for element in elements(stmt.value):
                if isinstance(element, cst.Name):
                    names.add(element.value)
    stores: list[tuple[str, cst.BaseExpression]] = []
    for stmt, _ in unit.statements():
        if isinstance(stmt, cst.Assign):
            for target in stmt.targets:
                root = target.target
                while isinstance(root, cst.Subscript):
                    root = root.value
                if root is not target.target and isinstance(root, cst.Name):
                    stores.append((root.value, stmt.value))
    containers = {root for root, _ in stores if root in unit.returned_names}
    for root, value in stores:
        if root in containers:
            names.update(e.value for e in elements(value) if isinstance(e, cst.Name))
    return frozenset(names)


def elements(expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The expression itself, or the elements of (nested) tuples and lists it displays."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        for element in expr.elements:
            yield from elements(element.value)
    elif isinstance(expr, cst.IfExp):
        yield from elements(expr.body)
        yield from elements(expr.orelse)
    else:
        yield expr


def assigned_name(stmt: cst.CSTNode) -> str | None:
    """The one plain name a simple assignment binds (``x = ...``), or None."""
    if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0].target
        if isinstance(target, cst.Name):
            return target.value
    if isinstance(stmt, cst.AnnAssign) and isinstance(stmt.target, cst.Name):
        return stmt.target.value
    return None


def stem(expr: cst.CSTNode) -> str | None:
    """The weight an expression names, as a comparable word: ``origin_fc1_weight``,
    ``ctx.fc1_weight`` and ``fc1_weight`` all give ``fc1_weight``. None for anything but a
    name or an attribute chain."""
    word = patterns.last_word(expr)
    if word is None:
        return None
    for prefix in _STEM_PREFIXES:
        if word.startswith(prefix) and len(word) > len(prefix):
            word = word[len(prefix) :]
    for suffix in _STEM_SUFFIXES:
        if word.endswith(suffix) and len(word) > len(suffix):
            word = word[: -len(suffix)]
    return word


def main_grad_owners(expr: cst.CSTNode) -> list[cst.BaseExpression]:
    """X for every ``X.main_grad`` / ``getattr(X, "main_grad", ...)`` inside ``expr``."""
    found = []
    for sub in patterns.walk(expr):
        if patterns.is_attr(sub, patterns.MAIN_GRAD):
            found.append(sub.value)
        elif type(sub) is cst.Call and patterns.is_getattr_of(sub, patterns.MAIN_GRAD):
            found.append(patterns.positional_args(sub)[0].value)
    return found


def keyword_value(unit: Unit, call: cst.Call, node: Node, word: str) -> cst.BaseExpression | None:
    """The value the call passes as ``word=``: spelled in the call, or an entry of a
    ``**kwargs`` whose one binding reaching ``node`` is a dict literal
    (``gemm_kwargs = {"out": w.main_grad, ...}``; ``gemm(x, dy, **gemm_kwargs)``)."""
    arg = patterns.keyword_arg(call, word)
    if arg is not None:
        return arg.value
    for arg in call.args:
        if arg.star == "**":
            entries = patterns.dict_entries(arg.value)
            if entries is None and type(arg.value) is cst.Name:
                defs = unit.reaching.reaching(arg.value.value, node)
                entries = patterns.dict_entries(defs[0].value) if len(defs) == 1 else None
            if entries is not None and word in entries:
                return entries[word]
    return None


def writes_main_grad_of(
    code: cst.CSTNode, word: str | None, bound: frozenset[str] = frozenset()
) -> bool:
    """``code`` writes the main_grad of the weight ``word`` names (``stem``): an in-place
    method of it (``w.main_grad.add_(...)``, not a reset) or a GEMM handed it
    (``gemm(x, dy, out=w.main_grad)``, ``fused_matmul_add(x, dy, w.main_grad)``), also
    through a local bound to it earlier in ``code`` (``mg = w.main_grad; gemm(x, dy, mg)``:
    the local's name is the writer's choice, the buffer is the same) or, for a caller that
    walks a function statement by statement, bound to it before ``code`` (``bound``)."""
    # local -> stem of the weight whose main_grad it holds
    aliases: dict[str, str | None] = dict.fromkeys(bound, word)
    for sub in patterns.walk(code):
        kind = type(sub)
        if kind is cst.Assign and len(sub.targets) == 1 and type(sub.targets[0].target) is cst.Name:
            owner = patterns.main_grad_owner(sub.value)
            aliases[sub.targets[0].target.value] = stem(owner) if owner is not None else None
            continue
        if kind is not cst.Call:
            continue
        func = sub.func
        if (
            type(func) is cst.Attribute
            and func.attr.value.endswith("_")
            and func.attr.value not in patterns.RESET_METHODS
            and _holds_main_grad_of(func.value, word, aliases)
        ):
            return True
        if looks_like_gemm(sub) and any(
            _holds_main_grad_of(arg.value, word, aliases)
            or any(stem(owner) == word for owner in main_grad_owners(arg.value))
            for arg in sub.args
        ):
            return True
    return False


def _holds_main_grad_of(expr: cst.CSTNode, word: str | None, aliases: dict) -> bool:
    if patterns.is_attr(expr, patterns.MAIN_GRAD):
        return stem(expr.value) == word
    return type(expr) is cst.Name and expr.value in aliases and aliases[expr.value] == word


def looks_like_gemm(call: cst.Call) -> bool:
    """A call that computes a product into an output: its name says so
    (``wgrad_words.names_product``: ``gemm``, ``matmul``, ``gmm``, ``...mm``), or it takes
    ``out=``."""
    if names_product(patterns.callee_name(call) or ""):
        return True
    return patterns.keyword_arg(call, "out") is not None


def has_product(expr: cst.CSTNode) -> bool:
    """Somewhere in ``expr`` a product is computed: ``@``, or a call ``looks_like_gemm``."""
    for sub in patterns.walk(expr):
        if type(sub) is cst.BinaryOperation and type(sub.operator) is cst.MatrixMultiply:
            return True
        if type(sub) is cst.Call and looks_like_gemm(sub):
            return True
    return False


def weight_gradient_product(expr: cst.CSTNode) -> cst.CSTNode | None:
    """The first product in ``expr`` (``@`` or a call that ``looks_like_gemm``) none of
    whose operands is a weight: a weight gradient (``dy.t() @ x``), not the input's
    (``dy @ w``)."""
    for sub in patterns.walk(expr):
        is_matmul = type(sub) is cst.BinaryOperation and type(sub.operator) is cst.MatrixMultiply
        if (is_matmul or (type(sub) is cst.Call and looks_like_gemm(sub))) and not (
            multiplies_weight(sub)
        ):
            return sub
    return None


# Words a name uses to say it holds a weight (``weight``, ``weight_fp8``, ``param``, ``w1``).
WEIGHT_WORDS = ("weight", "param")


def names_weight(name: str) -> bool:
    """A name that says it holds a weight (``weight``, ``w1``, ``param``)."""
    lowered = name.lower()
    return (
        any(word in lowered for word in WEIGHT_WORDS) or re.fullmatch(r"w\d*", lowered) is not None
    )


def multiplies_weight(product: cst.BaseExpression) -> bool:
    """A product (``dy @ w``, ``general_gemm(weight_fp8, dy)``, ``dy.matmul(weight)``) one
    of whose operands is a weight: it is the input gradient (dgrad), not the weight's own
    gradient (``x.t() @ dy`` multiplies the input and the output gradient, never the
    weight). Only the operands' roots count: ``x.to(weight.dtype)`` multiplies ``x``."""
    if isinstance(product, cst.Subscript):
        product = product.value  # ``general_gemm(...)[0]``
    if isinstance(product, cst.BinaryOperation):
        operands = [product.left, product.right]
    elif isinstance(product, cst.Call):
        operands = [a.value for a in product.args if a.keyword is None and not a.star]
        if isinstance(product.func, cst.Attribute):
            operands.append(product.func.value)  # ``dy.matmul(weight)``: the receiver
    else:
        return False
    return any(_operand_is_weight(operand) for operand in operands)


def _operand_is_weight(expr: cst.BaseExpression) -> bool:
    """The operand's root (through method calls, ``.T``, ``.t()``, subscripts) is a name
    or a field (``ctx.weight``) that says it holds a weight."""
    while True:
        if isinstance(expr, cst.Call):
            func = expr.func
            # ``weight.t()``: the receiver; ``torch.t(weight)``: its first argument.
            module = isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
            if isinstance(func, cst.Attribute) and not (module and func.value.value == "torch"):
                expr = func.value
            elif expr.args:
                expr = expr.args[0].value
            else:
                return False
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Attribute):
            if expr.attr.value in ("T", "mT", "H", "data"):
                expr = expr.value
            else:
                return names_weight(expr.attr.value)
        elif isinstance(expr, cst.Name):
            return names_weight(expr.value)
        else:
            return False


def mentions_torch(context: ModuleContext) -> bool:
    """The module binds ``torch`` at its top level (so a fix may allocate with it)."""
    for stmt in context.module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        bound = alias.asname.name if alias.asname else alias.name
                        while isinstance(bound, cst.Attribute):
                            bound = bound.value
                        if isinstance(bound, cst.Name) and bound.value == "torch":
                            return True
    return False


def empty_allocations(value: cst.CSTNode, node: Node, zero_out) -> Iterator[cst.Call]:
    """Empty allocations (GMLP003's candidate dummies) that are the value itself, or a side
    of a conditional expression whose test is not about zero_out_wgrad."""
    if isinstance(value, cst.Call):
        name = patterns.callee_name(value)
        if name in patterns.EMPTY_ALLOCATORS or name == "empty_strided":
            yield value
    elif isinstance(value, (cst.List, cst.Tuple)):
        for element in value.elements:
            yield from empty_allocations(element.value, node, zero_out)
    elif isinstance(value, cst.ListComp):
        yield from empty_allocations(value.elt, node, zero_out)
    elif isinstance(value, cst.IfExp) and not zero_out.expr(value.test, node):
        yield from empty_allocations(value.body, node, zero_out)
        yield from empty_allocations(value.orelse, node, zero_out)


def small_statements(suite: Sequence[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """The small statements directly in a suite (not those of its compound statements)."""
    for stmt in suite:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body
        elif not isinstance(stmt, cst.BaseCompoundStatement):
            yield stmt


def marks_grad_added(small: cst.CSTNode) -> bool:
    """``X.grad_added_to_main_grad = <not False>`` (or ``setattr(X, ..., <not False>)``) or a
    call of a ``*grad_added*`` helper."""
    if (
        isinstance(small, cst.Assign)
        and not patterns.is_false_literal(small.value)
        and any(patterns.is_attr(t.target, patterns.GRAD_ADDED) for t in small.targets)
    ):
        return True
    found = patterns.attribute_set(small, patterns.GRAD_ADDED)
    if found is not None and not patterns.is_false_literal(found[1]):
        return True
    return any("grad_added" in (patterns.callee_name(s) or "") for s in patterns.walk(small))
