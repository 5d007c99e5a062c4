"""GMLP054: `X.a.backward_dw()` reaches past a layer whose own `backward_dw` runs more."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
class_model = LazyModule("..analysis.class_model", __package__)
patterns = LazyModule("..analysis.patterns", __package__)

CODE = "GMLP054"
RULE = Rule(
    code=CODE,
    classes=(6,),
    name="backward-dw-bypasses-layer",
    summary=(
        "Code outside a class calls `backward_dw()` on one of its members (`layer.a`) "
        "where the class's own `backward_dw` runs that member's and others': the others' "
        "delayed weight gradients are never computed."
    ),
    flags=(
        "`X.a.backward_dw()` (`X` not `self` / `cls`) outside a class of the file whose "
        "`backward_dw` calls `self.a.backward_dw()` and `self.b.backward_dw()`, where nothing "
        "outside that class names `b`"
    ),
    explanation="""
        Issue #19, class 6 (delayed wgrad across classes). With `delay_wgrad_compute` a
        layer's weight gradients are computed only when something calls its `backward_dw`.
        A layer made of several delayed-wgrad members says which in its own `backward_dw`
        (Megatron's multi-token-prediction layer runs `self.eh_proj.backward_dw()` and
        `self.mtp_model_layer.backward_dw()`). A container that reaches past it
        (`for layer in self.layers: layer.mtp_model_layer.backward_dw()`) runs one member
        and skips the rest: `eh_proj`'s weight gradients never reach main_grad
        (blind corpus 10's held-out MTP-block variant).

        Seen: in one file, a class whose method `backward_dw` calls `self.a.backward_dw()`
        for two or more attributes (under any test); a call `X.a.backward_dw()` outside
        that class where `X` is not `self`, `cls` or `super()`. Reported when, for every
        class of the file whose `backward_dw` runs `a`, some other member it runs is named
        nowhere outside that class (as `Y.b` or as the string `"b"`): code that runs the
        members one by one on purpose (a schedule running attention's and the MLP's
        weight gradients in separate steps) names each. Left alone: a function that also
        calls `X.backward_dw()` itself (the member is run on purpose beside it, as
        overlapped shared experts are), and members every Megatron layer kind has under
        the same name (`linear_fc1`, `linear_proj`, `self_attention`, `mlp`, `experts`...),
        for which the attribute's name cannot say which class `X` is.

        `X` may be any expression (`self.layers[i]`), or the member a local bound once to
        it (`inner = layer.mtp_model_layer; inner.backward_dw()`).

        Not seen: classes of other files; members run through a loop or a list in the
        class's `backward_dw`; which class `X` is (the attribute's name decides).
    """,
    fix="""
        Call the layer's own `backward_dw()` (`layer.backward_dw()`), or run every member
        it runs. No automatic fix.
    """,
    fix_summary="none (call the layer's own backward_dw)",
    valid=(
        Example(
            """
            class MTPLayer:
                def backward_dw(self):
                    self.eh_proj.backward_dw()
                    self.mtp_model_layer.backward_dw()

            class MTPBlock:
                def backward_dw(self):
                    for layer in self.layers:
                        layer.backward_dw()
            """
        ),
        Example(
            """
            class TransformerLayer:
                def backward_dw(self):
                    self.self_attention.backward_dw()
                    self.mlp.backward_dw()

            def attn_dw_step(layer):
                layer.self_attention.backward_dw()

            def mlp_dw_step(layer):
                layer.mlp.backward_dw()
            """
        ),
    ),
    invalid=(
        Example(
            """
            class MTPLayer:
                def backward_dw(self):
                    self.eh_proj.backward_dw()
                    if hasattr(self, "mtp_model_layer"):
                        self.mtp_model_layer.backward_dw()

            class MTPBlock:
                def backward_dw(self):
                    for layer in self.layers:
                        layer.mtp_model_layer.backward_dw()
            """,
            line=10,
        ),
    ),
)

MESSAGE = (
    "`{call}` runs only `{attr}`'s delayed weight gradients, where `{cls}.backward_dw` also "
    "runs `{missing}`'s, which nothing here runs: those weight gradients never reach main_grad"
)
SELVES = frozenset({"self", "cls"})
# Members every Megatron layer kind has under these names (attention's and the MLP's
# projections, a transformer layer's halves): by the attribute's name alone, which class
# ``X`` is cannot be told, so a call on them is not judged.
GENERIC = frozenset(
    {"linear_fc1", "linear_fc2", "linear_proj", "linear_qkv", "self_attention",
     "cross_attention", "mlp", "experts", "shared_experts"}
)  # fmt: skip


def check(context: ModuleContext, out: Collector) -> None:
    if "backward_dw" not in context.source:
        return
    module = context.module
    members: dict[str, tuple[cst.ClassDef, tuple[str, ...]]] = {}
    for node in module.body:
        if type(node) is cst.ClassDef:
            run = _members_run(node)
            if len(run) >= 2:
                members[node.name.value] = (node, run)
    if not members:
        return
    for node in module.body:
        owner = node.name.value if type(node) is cst.ClassDef else None
        for function in class_model.walk_all(node):
            if type(function) is cst.FunctionDef:
                _check_function(context, function, owner, members, out)


def _check_function(context, function, owner, members, out) -> None:
    code = context.code
    calls = [n for n in patterns.walk(function.body) if type(n) is cst.Call]
    # ``inner = layer.mtp_model_layer`` (bound once): ``inner.backward_dw()`` is the member's
    aliases = _member_aliases(function)
    # ``layer.backward_dw()`` beside ``layer.shared_experts.backward_dw()``: the layer's own
    # ran, and the member is run on purpose (one its own skips, as overlapped shared experts)
    whole = {code(call.func.value).strip() for call in calls if _calls_backward_dw(call)}
    for call in calls:
        member = _member(call, aliases)
        if member is None:
            continue
        holder, attr = code(member.value).strip(), member.attr.value
        if holder in SELVES or holder in whole or attr in GENERIC:
            continue
        holders = [(n, c, run) for n, (c, run) in members.items() if attr in run and n != owner]
        missing = []
        for name, cls, run in holders:
            unnamed = [m for m in run if m != attr and not _named_outside(context.module, cls, m)]
            if not unnamed:
                break
            missing.append((name, unnamed))
        else:
            if missing:
                name, unnamed = missing[0]
                message = MESSAGE.format(
                    call=code(call).strip(), attr=attr, cls=name, missing="`, `".join(unnamed)
                )
                out.report(CODE, call, message)


def _calls_backward_dw(call) -> bool:
    return type(call.func) is cst.Attribute and call.func.attr.value == "backward_dw"


def _member(call, aliases):
    """``X.a`` for ``X.a.backward_dw()`` (``X`` any expression: a name, ``self.layers[i]``),
    or for ``m.backward_dw()`` with ``m`` a local bound once to ``X.a``."""
    if not _calls_backward_dw(call):
        return None
    receiver = call.func.value
    if type(receiver) is cst.Name:
        return aliases.get(receiver.value)
    return receiver if type(receiver) is cst.Attribute else None


def _member_aliases(function) -> dict:
    """Locals bound exactly once in the function, to an attribute ``X.a``."""
    bound: dict[str, list] = {}
    for node in patterns.walk(function.body):
        if type(node) is cst.Assign:
            for target in node.targets:
                if type(target.target) is cst.Name:
                    bound.setdefault(target.target.value, []).append(node.value)
        elif type(node) in (cst.For, cst.CompFor, cst.AugAssign, cst.AnnAssign):
            for sub in patterns.walk(node.target):
                if type(sub) is cst.Name:
                    bound.setdefault(sub.value, []).append(None)
    return {
        name: values[0]
        for name, values in bound.items()
        if len(values) == 1 and type(values[0]) is cst.Attribute
    }


def _members_run(cls) -> tuple[str, ...]:
    """The attributes ``a`` whose ``self.a.backward_dw()`` the class's ``backward_dw`` calls."""
    run: list[str] = []
    for item in cls.body.body:
        if type(item) is cst.FunctionDef and item.name.value == "backward_dw":
            for call in class_model.walk_all(item.body):
                if type(call) is not cst.Call:
                    continue
                member = _member(call, {})
                if (
                    member is not None
                    and type(member.value) is cst.Name
                    and member.value.value == "self"
                    and member.attr.value not in run
                ):
                    run.append(member.attr.value)
    return tuple(run)


def _named_outside(module, cls, attr: str) -> bool:
    """``Y.attr`` or the string ``"attr"`` somewhere in the module outside ``cls``."""
    for node in module.body:
        if node is cls:
            continue
        for sub in class_model.walk_all(node):
            kind = type(sub)
            if kind is cst.Attribute and sub.attr.value == attr:
                return True
            if kind is cst.SimpleString and sub.evaluated_value == attr:
                return True
    return False
