"""A module that fetches Megatron-FSDP's main_grad for its own parameters only
(``self.parameters(recurse=False)``) while the fused weight-gradient work runs in its
submodules (issue #19, class 8; GMLP050).

fastmoe's Megatron wrapper turned ``gradient_accumulation_fusion`` on for each expert's
linears (``expert.htoh4.gradient_accumulation_fusion = ...``) and, before running them,
bound ``param.main_grad = param.get_main_grad()`` over ``self.parameters(recurse=False)``
(blind corpus 19): the experts' weights live in submodules, which ``recurse=False`` leaves
out, so the fused ops meet main_grad None.

Automodel's TE experts (blind corpus 17) did the same through a hook: a function of the file
fetching over ``module.parameters(recurse=False)`` of the module it is handed, registered as
a forward pre-hook on ``self`` (the wrapper, which owns no weight) rather than on the
``GroupedLinear`` children built with ``fuse_wgrad_accumulation=``.

Seen: in a class, a ``for`` over ``self.parameters(recurse=False)`` (or
``named_parameters``) whose body binds a fetched main_grad, itself or through a binder of the
file, or ``self.register_forward_pre_hook(F)`` / ``register_forward_hook(F)`` with F a
function of the file whose loop over its first parameter's ``parameters(recurse=False)``
fetches so; and, in the same class, a fusion switch given to another object: an assignment
to ``X.<switch>`` with X not ``self``, or a call bound to ``self.X`` handed ``<switch>=``.
A class with another fetch loop (over its children's parameters) is left alone. Not seen:
submodules that fuse by their own default, switches set from another file.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import class_model, patterns
from .fused_module_fetches import FUSE_KEYWORDS, body_fetches

# TE's two spellings of the fused-wgrad switch, and Megatron's own
SWITCHES = frozenset({*FUSE_KEYWORDS, "gradient_accumulation_fusion"})
PARAMETER_WALKS = frozenset({"parameters", "named_parameters"})


HOOK_REGISTRATIONS = frozenset({"register_forward_pre_hook", "register_forward_hook"})


def own_parameter_fetches(module: cst.Module, binders: frozenset[str]) -> Iterator[cst.Call]:
    """The ``self.parameters(recurse=False)`` calls of such fetch loops, and the
    registrations of such hooks on ``self``."""
    hooks = _own_parameter_fetchers(module, binders)
    for cls in patterns.walk(module):
        if type(cls) is not cst.ClassDef:
            continue
        nodes = list(class_model.walk_all(cls.body))
        found = [
            node.iter
            for node in nodes
            if type(node) is cst.For
            and _own_parameters(node.iter, "self")
            and body_fetches(node.body, binders)
        ]
        found += [node for node in nodes if _registers_on_self(node, hooks)]
        # another fetch loop of the class (over the children's parameters) may be the one
        # that reaches the submodules
        elsewhere = any(
            type(node) is cst.For
            and not _own_parameters(node.iter, "self")
            and body_fetches(node.body, binders)
            for node in nodes
        )
        if found and not elsewhere and any(_fuses_another(node) for node in nodes):
            yield from found


def _own_parameter_fetchers(module: cst.Module, binders: frozenset[str]) -> frozenset[str]:
    """Functions of the file that fetch over their first parameter's own parameters."""
    names = set()
    for function in patterns.walk(module):
        if type(function) is not cst.FunctionDef or not function.params.params:
            continue
        first = function.params.params[0].name.value
        if any(
            type(node) is cst.For
            and _own_parameters(node.iter, first)
            and body_fetches(node.body, binders)
            for node in patterns.walk(function.body)
        ):
            names.add(function.name.value)
    return frozenset(names)


def _registers_on_self(node: cst.CSTNode, hooks: frozenset[str]) -> bool:
    """``self.register_forward_pre_hook(F)`` with F one of ``hooks``."""
    if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
        return False
    if node.func.attr.value not in HOOK_REGISTRATIONS or not _is_self(node.func.value):
        return False
    args = patterns.positional_args(node)
    return bool(args) and type(args[0].value) is cst.Name and args[0].value.value in hooks


def _own_parameters(expr: cst.BaseExpression, owner: str) -> bool:
    """``owner.parameters(recurse=False)`` / ``owner.named_parameters(recurse=False)``."""
    if type(expr) is not cst.Call or type(expr.func) is not cst.Attribute:
        return False
    func = expr.func
    value = func.value
    if func.attr.value not in PARAMETER_WALKS or not (
        type(value) is cst.Name and value.value == owner
    ):
        return False
    return any(
        arg.keyword is not None
        and arg.keyword.value == "recurse"
        and type(arg.value) is cst.Name
        and arg.value.value == "False"
        for arg in expr.args
    )


def _fuses_another(node: cst.CSTNode) -> bool:
    """``expert.fc1.gradient_accumulation_fusion = on`` (not ``self.<switch>``), or
    ``self.fc1 = Linear(..., fuse_wgrad_accumulation=on)``."""
    if type(node) is not cst.Assign:
        return False
    for target in node.targets:
        tgt = target.target
        if type(tgt) is cst.Attribute and tgt.attr.value in SWITCHES and not _is_self(tgt.value):
            return True
        if (
            patterns.attribute_of(tgt, "self") is not None
            and type(node.value) is cst.Call
            and any(
                arg.keyword is not None and arg.keyword.value in SWITCHES for arg in node.value.args
            )
        ):
            return True
    return False


def _is_self(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Name and expr.value == "self"
