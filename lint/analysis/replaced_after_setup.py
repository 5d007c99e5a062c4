"""main_grad set up on a module that the same function then replaces (GMLP058; issue #19,
class 8).

The set-up (``late_main_grads.is_setup_call``: a helper of the file that binds
``p.main_grad`` for the module it is handed, or one named for it) gives the parameters of the
object it is handed their buffers. When the function afterwards binds the same ``self``
attribute to a new module (``_attach_main_grads(self.op, cfg)`` and then ``self.op =
TEGroupedMLPForTest(...)``, blind corpus 22) and sets nothing up on it again, the module
that runs has parameters without main_grad: its fused wgrad finds none.

Per function, over the statements of its body in order (``try`` and ``with`` bodies read in
place; not the branches of an ``if`` or a loop): a set-up call handed ``self.X`` first (by
position or keyword), then an assignment of ``self.X`` to a new module (a call handed no
positional name or attribute and not naming ``self.X``), with nothing after it in the
function that sets ``self.X`` up again (a set-up call naming it, or main_grad bound inline,
in any nested block). Locals are left alone: a name may be reused on purpose for a reference
model without main_grad; wrappers (``torch.compile(op)``, ``DDP(self.op)``) keep the
parameters.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import patterns
from .late_main_grads import is_setup_call
from .layer_builds import is_self_attr
from .module import Unit


def replaced_after_setup(
    unit: Unit, helpers: frozenset[str]
) -> Iterator[tuple[cst.Call, str, cst.CSTNode]]:
    """(the set-up call, the target as written, the assignment that replaces it)."""
    statements = list(_in_order(unit.body))
    for index, stmt in enumerate(statements):
        for call, target in _setups(stmt, helpers):
            later = statements[index + 1 :]
            for position, after in enumerate(later):
                if target in _replaced(after):
                    rest = later[position + 1 :]
                    if not any(_sets_up_again(s, target, helpers) for s in rest):
                        yield call, target, after
                    break


def _in_order(statements) -> Iterator[cst.CSTNode]:
    """The statements as they run one after another: a ``try`` body (then its ``finally``)
    and a ``with`` body are read in place; the branches of an ``if`` or a loop are not."""
    for stmt in statements:
        if type(stmt) is cst.Try:
            yield from _in_order(stmt.body.body)
            if stmt.finalbody is not None:
                yield from _in_order(stmt.finalbody.body.body)
        elif type(stmt) is cst.With:
            yield from _in_order(stmt.body.body)
        else:
            yield stmt


def _setups(stmt: cst.CSTNode, helpers: frozenset[str]) -> Iterator[tuple[cst.Call, str]]:
    """(call, target) for each set-up call in a simple statement handed ``self.X`` first (by
    position or keyword)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return
    for sub in patterns.walk(stmt):
        if type(sub) is cst.Call and is_setup_call(sub, helpers):
            target = _target(sub.args[0].value) if sub.args else None  # positional or keyword
            if target is not None:
                yield sub, target


def _sets_up_again(stmt: cst.CSTNode, target: str, helpers: frozenset[str]) -> bool:
    """Anywhere in ``stmt`` (nested blocks too): a set-up call naming the target, or
    ``main_grad`` bound inline (``for p in self.op.parameters(): p.main_grad = ...``)."""
    return _sets_up(
        stmt, helpers, lambda call: any(_target(n) == target for n in patterns.walk(call))
    )


def _sets_up(stmt: cst.CSTNode, helpers: frozenset[str], names_it, after=None) -> bool:
    """A set-up call in ``stmt`` that ``names_it``, or ``X.main_grad`` bound, after the node
    ``after`` in source order when given."""
    passed = after is None
    for sub in patterns.walk(stmt):
        if sub is after:
            passed = True
            continue
        if not passed:
            continue
        if type(sub) is cst.Call and is_setup_call(sub, helpers) and names_it(sub):
            return True
        if patterns.attribute_set(sub, patterns.MAIN_GRAD) is not None:
            return True
    return False


def _replaced(stmt: cst.CSTNode) -> set[str]:
    """The ``self.X`` a simple assignment statement binds to a new module: a call handed no
    positional name or attribute (``TEGroupedMLPForTest(config=cfg, ...)``), not a wrapper
    of an object it is handed (``torch.compile(op)``, ``DDP(self.op)``), a name, ``None`` or
    a value naming the target (``self.op = self.op.cuda()``)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return set()
    found = set()
    for small in stmt.body:
        if type(small) is not cst.Assign or type(small.value) is not cst.Call:
            continue
        if any(
            type(a.value) in (cst.Name, cst.Attribute)
            for a in patterns.positional_args(small.value)
        ):
            continue
        mentioned = {_target(n) for n in patterns.walk(small.value)}
        for target in small.targets:
            text = _target(target.target)
            if text is not None and text not in mentioned:
                found.add(text)
    return found


def _target(expr: cst.BaseExpression) -> str | None:
    """``self.X`` as text for a ``self`` attribute; None for anything else (a local name may
    be reused for another model on purpose: a reference without main_grad)."""
    if is_self_attr(expr):
        return f"self.{expr.attr.value}"
    return None


# Wrappers that shard a module's parameters into new Parameter objects (Megatron-FSDP's and
# torch's ``fully_shard``, ``FullyShardedDataParallel``): attributes set on the old ones,
# main_grad among them, stay behind. By exact name: helpers named for FSDP
# (``load_fsdp_checkpoint(model)``, ``register_fsdp_forward_method``) keep the parameters.
SHARDING_WRAPPERS = frozenset({"fully_shard", "FullyShardedDataParallel", "FSDP", "MegatronFSDP"})


def sharded_after_setup(unit: Unit) -> Iterator[tuple[cst.Call, str, cst.CSTNode]]:
    """(the set-up call, the module as written, the wrap) for main_grad set up on a module
    (by a call named for it, anywhere in a statement of the function's body, an ``if``
    included) that a later statement hands to a sharding wrapper, with no set-up of it after
    the wrap (blind corpus 25: Wan2.2's ``setup_main_grad_for_te_linear(model)`` before
    ``model, optimizer = fully_shard(module=model, ...)``)."""
    statements = list(_in_order(unit.body))
    for index, stmt in enumerate(statements):
        for sub in patterns.walk(stmt):
            if type(sub) is not cst.Call or not _named_setup(sub) or not sub.args:
                continue
            module = sub.args[0].value
            if type(module) not in (cst.Name, cst.Attribute):
                continue
            text = unit.context.code(module).strip()
            later = statements[index + 1 :]
            for position, after in enumerate(later):
                wrap = _wrap_of(after, text, unit)
                if wrap is None:
                    continue
                rest = later[position + 1 :]
                if not _set_up_after(after, wrap, text, unit) and not any(
                    _set_up_after(s, None, text, unit) for s in rest
                ):
                    yield sub, text, after
                break


def _named_setup(call: cst.Call) -> bool:
    """A call named for setting main_grad up (``setup_main_grad_for_te_linear``): a helper
    of the file that binds main_grad for its own tensors is no set-up of what it is handed."""
    return is_setup_call(call, frozenset())


def _wrap_of(stmt: cst.CSTNode, module: str, unit: Unit) -> cst.Call | None:
    """The call of a sharding wrapper in ``stmt`` handed ``module`` (by position or
    keyword)."""
    for sub in patterns.walk(stmt):
        if (
            type(sub) is cst.Call
            and patterns.callee_name(sub) in SHARDING_WRAPPERS
            and any(unit.context.code(arg.value).strip() == module for arg in sub.args)
        ):
            return sub
    return None


def _set_up_after(stmt: cst.CSTNode, wrap: cst.Call | None, module: str, unit: Unit) -> bool:
    """A set-up of ``module`` (a call named for it handed the module, or ``X.main_grad``
    bound) in ``stmt``, after ``wrap`` in source order when given."""

    def names_it(call: cst.Call) -> bool:
        return any(unit.context.code(arg.value).strip() == module for arg in call.args)

    return _sets_up(stmt, frozenset(), names_it, wrap)
