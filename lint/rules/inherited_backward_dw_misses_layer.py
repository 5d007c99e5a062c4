"""GMLP020: a class whose delayed-wgrad protocol comes from a base in another file, and
whose layers that protocol's backward_dw never reaches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

cst = LazyModule("libcst")
classes = LazyModule("..analysis.classes", __package__)

# The examples subclass this base, linted with them as another file of the run.
EXAMPLE_BASE = (
    "blocks/attention.py",
    """
class SelfAttention(MegatronModule):
    def __init__(self, config, submodules):
        self.linear_qkv = build_module(submodules.linear_qkv, config)
        self.linear_proj = build_module(submodules.linear_proj, config)

    def backward_dw(self):
        self._backward_qkv_proj()
        self.linear_proj.backward_dw()

    def _backward_qkv_proj(self):
        self.linear_qkv.backward_dw()
""",
)


CODE = "GMLP020"
RULE = Rule(
    code=CODE,
    classes=(6,),
    name="inherited-backward-dw-misses-layer",
    summary=(
        "A class inherits the delayed-wgrad protocol (a base's `backward_dw` or "
        "`delay_wgrad_compute`), but the `backward_dw` it ends up with never reaches a weight "
        "layer it has: a layer it adds to a base of another file, a base's layer its "
        "overrides skip, or all of them when it has no `backward_dw` at all."
    ),
    flags=(
        "a subclass whose overrides (of `backward_dw` or a method it calls) no longer reach "
        "a layer a base builds and computes; a weight layer a subclass builds that the "
        "`backward_dw` resolved through bases in other files of the run never reaches; a "
        "subclass, with layers, of a base of another file taking `delay_wgrad_compute`, "
        "with no `backward_dw` anywhere"
    ),
    explanation="""
        Issue #19, class 6 (delayed wgrad across classes), in one file or across files.
        With `delay_wgrad_compute`, a layer's backward pass leaves the
        weight gradient for later, and the owner's `backward_dw()` must call each layer's
        `backward_dw()`. A model variant usually subclasses a block of another file: it adds
        or fuses a projection, or overrides a helper the base's `backward_dw` calls (to
        skip a projection it replaced). Its file need not spell `backward_dw` or
        `delay_wgrad_compute` at all; before, such a file was only syntax-checked. If the
        `backward_dw` it inherits never reaches the new layer, that layer's weight
        gradient is never computed and main_grad keeps what it held.

        Seen: the class model of this file joined with summaries of the classes, in the
        other files of the run, that define `backward_dw` or take `delay_wgrad_compute` in
        `__init__` (bases, each method's `self` attributes, what each attribute is given,
        the layers `__init__` builds). A file that subclasses such a class is analysed even
        when it names no trigger (for this rule only). A layer is reached when the resolved
        `backward_dw`, a method it calls through `self.` (overrides resolved for this
        class), a `super()` call, or an attribute holding delayed-wgrad callables (lists,
        dicts, `partial`s, lambdas given to `self.x`) mentions it. A subclass's own layers
        are GMLP014's when all its bases sit in this file; a base's layers are this rule's
        wherever the base sits: a layer the base builds and its own `backward_dw` computes
        is reported at the override (of `backward_dw`, or of a method it calls) after
        which it is no longer reached (the overriding method's `def`), unless the subclass's
        `__init__` skips the base's (no `super().__init__`) or rebuilds the attribute.

        The examples below subclass this base, in `blocks/attention.py` of the same run:

            class SelfAttention(MegatronModule):
                def __init__(self, config, submodules):
                    self.linear_qkv = build_module(submodules.linear_qkv, config)
                    self.linear_proj = build_module(submodules.linear_proj, config)

                def backward_dw(self):
                    self._backward_qkv_proj()
                    self.linear_proj.backward_dw()

                def _backward_qkv_proj(self):
                    self.linear_qkv.backward_dw()

        Not seen: bases in files outside the run, or in a file that neither defines
        `backward_dw` nor takes `delay_wgrad_compute` in an `__init__` (an intermediate base
        there is unknown, and such classes are not reported); a class name defined
        differently in two files (unknown); layers built outside `__init__` and the methods
        it calls through `self.`; modules registered under a computed name; which layers a
        configuration builds; a `backward_dw` that only raises (the class refuses delayed
        wgrad loudly).

        Since 2026-12-03 (issue #19's weak spots), on both sides (this file's classes and
        the summaries of other files): layers appended to a container one at a time
        (`self.local_experts.append(expert)` in a loop), set by key (`self.gates[name] =
        ...`), registered with `add_module` / `setattr` under a literal name, or built by
        helpers `__init__` calls (`self._build_projections()`); bases and layer classes
        named through an import alias (`from blocks.mlp import ExpertMLP as _Base`).
    """,
    fix="""
        Override `backward_dw` in the subclass (calling `super().backward_dw()` and the new
        layer's `backward_dw()`), or keep the base's helper reaching the layer. No automatic
        fix.
    """,
    fix_summary="none (call the layer's backward_dw from the class's backward_dw)",
    valid=(
        Example(
            """
            from blocks.attention import SelfAttention


            class GatedAttention(SelfAttention):
                def __init__(self, config, submodules):
                    super().__init__(config, submodules)
                    self.linear_gate = build_module(submodules.linear_gate, config)

                def backward_dw(self):
                    super().backward_dw()
                    self.linear_gate.backward_dw()
            """,
            others=(EXAMPLE_BASE,),
        ),
        Example(
            """
            from blocks.attention import SelfAttention


            class VisionAttention(SelfAttention):
                def __init__(self, config, submodules):
                    super().__init__(config, submodules)
                    self.linear_qkv = build_module(submodules.linear_qkv, config)
            """,
            others=(EXAMPLE_BASE,),
        ),
    ),
    invalid=(
        Example(
            """
            from blocks.attention import SelfAttention


            class GatedAttention(SelfAttention):
                def __init__(self, config, submodules):
                    super().__init__(config, submodules)
                    self.linear_gate = build_module(submodules.linear_gate, config)
            """,
            line=7,
            others=(EXAMPLE_BASE,),
        ),
        Example(
            """
            from blocks.attention import SelfAttention


            class FusedAttention(SelfAttention):
                def _backward_qkv_proj(self):
                    pass
            """,
            line=5,
            others=(EXAMPLE_BASE,),
        ),
    ),
    reads_subclasses=True,
)
# -- the check ------------------------------------------------------------------------
MISSED = (
    "`self.{attr}` is a weight layer, but the `backward_dw` `{name}` inherits from "
    "`{owner}` ({path}) never reaches it: with delayed wgrad its weight gradient is never "
    "computed"
)
UNREACHED = (
    "`{name}` overrides `{methods}`, and its backward_dw no longer reaches `self.{attrs}`, "
    "which `{owner}` builds and its backward_dw computes: with delayed wgrad those weight "
    "gradients are never computed"
)
NONE = (
    "`{name}` takes delay_wgrad_compute through `{base}` ({path}) and builds weight layers "
    "({attrs}) but has no backward_dw: with delayed wgrad their weight gradients are never "
    "computed"
)


def check(context: ModuleContext, out: Collector) -> None:
    if classes.BACKWARD_DW not in context.source and not context.class_facts:
        return
    index = context.shared(classes.class_index_with_run)
    alone = context.shared(classes.class_index)  # what GMLP014 sees
    for model in index.classes.values():
        if context.class_facts and index.crosses_files(model) and alone.may_inherit_unknown(model):
            _check_own_layers(index, model, out)
        if len(index.lineage(model)) > 1:
            _check_inherited_layers(index, model, out)


def _check_own_layers(index, model, out: Collector) -> None:
    """The layers the class's own ``__init__`` builds, against a protocol of another file."""
    bdw = classes.BACKWARD_DW
    owner = index.owner(model, bdw)
    if owner is None:
        if model.layers and not index.may_inherit_unknown(model):
            lineage = index.lineage(model)
            base = next((c for c in lineage if isinstance(c, classes.Outside)), None)
            if base is not None and any(c.spells_delay for c in lineage):
                attrs = ", ".join(f"`self.{a}`" for a in model.layers)
                message = NONE.format(
                    name=model.name, base=base.name, path=base.fact.path, attrs=attrs
                )
                out.report(CODE, model.node.name, message)
        return
    if not _resolvable(index, model):
        return
    if not isinstance(owner, classes.Outside) and classes.SUPER not in owner.mentions[bdw]:
        return  # a backward_dw of this file that hands on to nobody: GMLP014's
    reached = index.reached_attributes(model, bdw)
    where = _origin(index, model)
    for attr, assignment in model.layers.items():
        if attr not in reached:
            out.report(CODE, assignment, MISSED.format(attr=attr, name=model.name, **where))


def _check_inherited_layers(index, model, out: Collector) -> None:
    """The layers a base builds and its own ``backward_dw`` computes, which this class's
    overrides (of ``backward_dw`` or of a method it calls) no longer reach."""
    bdw = classes.BACKWARD_DW
    init = model.mentions.get("__init__")
    if init is not None and classes.SUPER not in init:
        return  # the bases' __init__ does not run: their layers are not built
    if index.owner(model, bdw) is None or not _resolvable(index, model):
        return
    reached = index.reached_attributes(model, bdw)
    for base in index.lineage(model)[1:]:
        if index.owner(base, bdw) is None or not _resolvable(index, base):
            continue
        of_base = index.reached_attributes(base, bdw)
        lost = [a for a in base.layers if a in of_base and a not in reached]
        lost = [a for a in lost if a not in model.layers]
        overrides = [m for m in model.mentions if m == bdw or m in of_base]
        if lost and overrides:
            message = UNREACHED.format(
                name=model.name,
                methods="`, `".join(overrides),
                owner=base.name,
                attrs="`, `self.".join(lost),
            )
            out.report(CODE, _override_site(model, overrides), message)
            return


def _override_site(model, overrides: list[str]):
    """Where the loss is made: the name of the first overriding method the class body
    defines (what a reviewer points at), else the class's name."""
    for stmt in model.node.body.body:
        if type(stmt) is cst.FunctionDef and stmt.name.value in overrides:
            return stmt.name
    return model.node.name


def _resolvable(index, model) -> bool:
    bdw = classes.BACKWARD_DW
    if index.only_raises(model, bdw):
        return False  # the class refuses delayed wgrad loudly
    return not (index.may_inherit_unknown(model) and classes.super_chain_open(index, model, bdw))


def _origin(index, model) -> dict[str, str]:
    """The class of another file whose backward_dw the model runs (or hands on to)."""
    for current in index.lineage(model):
        if isinstance(current, classes.Outside) and classes.BACKWARD_DW in current.mentions:
            return {"owner": current.name, "path": current.fact.path}
    return {"owner": "a base", "path": "another file"}
