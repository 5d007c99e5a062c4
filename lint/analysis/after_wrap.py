"""A model changed after it was built and wrapped for data parallelism (issue #19, class 8).

Megatron's DDP and Megatron-FSDP give each parameter its ``main_grad`` (a view of a bucket)
when they wrap the model: ``get_model(model_cfg, ddp_cfg, ...)``, Megatron-Bridge's
``provider.provide_distributed_model(ddp_config=...)``. What is decided or added after the
wrap does not reach the buckets: adapters attached then (``model = peft(model)``) are
Parameters no bucket holds, with no ``main_grad`` for their fused-wgrad linears to write, and
the fusion switch turned off on the provider afterwards (``provider.gradient_accumulation_fusion
= False``) leaves the layers already built with the fused path on. Megatron-Bridge attaches
PEFT through ``pre_wrap_hook`` and decides the switch before building, for that reason.

Per function: a call of a wrapping builder (``WRAPPING_BUILDERS``) handed a DDP
configuration or switch (an argument or keyword spelling ``ddp``); after it, on a path from
it, either an assignment to a fusion switch (``FUSION_SWITCHES``) on the object the builder
was called on or handed first, or a call whose name spells an adapter transform
(``ADAPTER_WORDS``) handed a name the builder's result was bound to. Reported at that
statement.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import paths, patterns
from .module import Unit

WRAPPING_BUILDERS = frozenset({"get_model", "provide_distributed_model"})
FUSION_SWITCHES = frozenset({"gradient_accumulation_fusion", "fuse_wgrad_accumulation"})
ADAPTER_WORDS = ("peft", "lora", "adapter")


@dataclass(frozen=True)
class LateChange:
    site: cst.CSTNode  # the statement that changes the model after the wrap
    what: str  # "fusion" or "adapters"
    builder: cst.Call


def late_changes(unit: Unit) -> list[LateChange]:
    if type(unit.owner) is not cst.FunctionDef:
        return []
    code = unit.context.code
    builds = []  # (node, call, bound names, the object built from)
    for root, node in unit.expression_roots():
        for call in _wrapping_calls(root):
            bound = _bound_names(root) if type(root) is cst.Assign else set()
            builds.append((node, call, bound, _built_from(call, code)))
    if not builds:
        return []
    found = []
    for root, node in unit.expression_roots():
        for start, call, bound, source in builds:
            if node is start or not paths.reaches(start, [node.index]):
                continue
            what = _change(root, bound, source, code)
            if what is not None:
                found.append(LateChange(root, what, call))
                break
    return found


def _wrapping_calls(root) -> Iterator[cst.Call]:
    for sub in patterns.walk(root):
        if (
            type(sub) is cst.Call
            and patterns.callee_name(sub) in WRAPPING_BUILDERS
            and any(_spells_ddp(arg) for arg in sub.args)
        ):
            yield sub


def _spells_ddp(arg: cst.Arg) -> bool:
    if arg.keyword is not None and "ddp" in arg.keyword.value.lower():
        return not (type(arg.value) is cst.Name and arg.value.value in ("False", "None"))
    word = patterns.last_word(arg.value)
    return word is not None and "ddp" in word.lower()


def _bound_names(assign: cst.Assign) -> set[str]:
    return {
        n.value
        for target in assign.targets
        for n in patterns.walk(target.target)
        if type(n) is cst.Name
    }


def _built_from(call: cst.Call, code) -> str | None:
    """The object the model is built from: the builder's receiver (``provider`` of
    ``provider.provide_distributed_model(...)``), else its first positional argument."""
    if type(call.func) is cst.Attribute:
        return code(call.func.value).strip()
    first = patterns.positional_args(call)
    return code(first[0].value).strip() if first else None


def _change(root, bound: set[str], source: str | None, code) -> str | None:
    if type(root) is cst.Assign and source is not None:
        for target in root.targets:
            t = target.target
            if (
                type(t) is cst.Attribute
                and t.attr.value in FUSION_SWITCHES
                and code(t.value).strip() == source
            ):
                return "fusion"
    for sub in patterns.walk(root):
        if type(sub) is not cst.Call:
            continue
        name = (patterns.callee_name(sub) or "").lower()
        if not any(word in name for word in ADAPTER_WORDS):
            continue
        if any(type(a.value) is cst.Name and a.value.value in bound for a in sub.args):
            return "adapters"
    return None
