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

from .. import triggers
from . import paths, patterns, provenance
from .module import Unit

# The builders whose calls make a file worth analysing (triggers.py), by name.
WRAPPING_BUILDERS = frozenset(call.rstrip("(") for call in triggers.WRAPPING_BUILDERS)
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
            bound = provenance.bound_names(root) if type(root) is cst.Assign else set()
            builds.append((node, call, bound, _built_from(call, code)))
    if not builds:
        return []
    build_nodes = [start.index for start, *_ in builds]
    found = []
    for root, node in unit.expression_roots():
        for start, call, bound, source in builds:
            if node is start or not paths.reaches(start, [node.index]):
                continue
            # set before a build it reaches (a loop building again): a setting for that build
            if paths.reaches(node, build_nodes):
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
            and not any(_switched_off(arg) for arg in sub.args)
        ):
            yield sub


def _spells_ddp(arg: cst.Arg) -> bool:
    if arg.keyword is not None and "ddp" in arg.keyword.value.lower():
        return not _switched_off(arg)
    word = patterns.last_word(arg.value)
    return word is not None and "ddp" in word.lower()


def _switched_off(arg: cst.Arg) -> bool:
    """``wrap_with_ddp=False`` (or ``None``): the builder is told not to wrap."""
    return (
        arg.keyword is not None
        and "ddp" in arg.keyword.value.lower()
        and type(arg.value) is cst.Name
        and arg.value.value in ("False", "None")
    )


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
    # ``model = peft(model)``: the model rebound to what the transform hands back
    if type(root) is cst.Assign and type(root.value) is cst.Call:
        rebound = provenance.bound_names(root) & bound
        if rebound and _adapter_call(root.value, rebound):
            return "adapters"
    # ``apply_lora(model)`` as a statement: a transform in place, named for attaching
    if type(root) is cst.Expr and type(root.value) is cst.Call:
        name = (patterns.callee_name(root.value) or "").lower()
        if name.startswith(ATTACHING_PREFIXES) and _adapter_call(root.value, bound):
            return "adapters"
    return None


# Names of a call that changes the model in place (``apply_lora(model)``); a call that only
# reads it (``save_hf_adapter(model)``, ``print_lora_parameters(model)``) is none.
ATTACHING_PREFIXES = ("apply", "add", "attach", "inject", "enable", "wrap", "convert", "insert")


def _adapter_call(call: cst.Call, names: set[str]) -> bool:
    """A call named for an adapter transform handed one of ``names``."""
    name = (patterns.callee_name(call) or "").lower()
    if not any(word in name for word in ADAPTER_WORDS):
        return False
    return any(type(a.value) is cst.Name and a.value.value in names for a in call.args)
