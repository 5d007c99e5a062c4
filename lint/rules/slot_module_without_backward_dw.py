"""GMLP039: a module plugged into a slot whose backward_dw the run calls, with none."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

CODE = "GMLP039"

# The files a slot example is linted with: the spec that plugs ``LinearMixer`` into the
# ``self_attention`` slot, and a schedule that calls that slot's ``backward_dw``.
_SPECS = (
    "specs.py",
    """
from example import LinearMixer, LinearMixerSubmodules
from layer import TransformerLayer, TransformerLayerSubmodules
from megatron.core.transformer.spec_utils import ModuleSpec


def mixer_spec(backend):
    return ModuleSpec(
        module=LinearMixer,
        submodules=LinearMixerSubmodules(
            in_proj=backend.column_parallel_linear(), out_proj=backend.row_parallel_linear()
        ),
    )


def layer_spec(backend):
    return ModuleSpec(
        module=TransformerLayer,
        submodules=TransformerLayerSubmodules(self_attention=mixer_spec(backend)),
    )
""",
)
_SCHEDULE = (
    "schedule.py",
    """
class LayerNode:
    def __init__(self, layer):
        self.attn_dw = layer.self_attention.backward_dw

    def backward_dw(self):
        self.attn_dw()
""",
)
_OTHERS = (_SPECS, _SCHEDULE)

RULE = Rule(
    code=CODE,
    classes=(6,),
    name="slot-module-without-backward-dw",
    summary=(
        "A module class that builds weight layers is plugged through a spec into a slot "
        "whose `backward_dw` the run calls (`layer.self_attention.backward_dw()`), but it "
        "has no `backward_dw`: with delayed wgrad its layers' weight gradients are never "
        "computed (or the call raises)."
    ),
    flags=(
        "a class given as `ModuleSpec(module=C, ...)` (or as the class itself) to a slot "
        "keyword (`self_attention=`, `mlp=`) or dict key whose `X.<slot>.backward_dw` some "
        "file of the run calls or reads, also through locals, conditionals and functions "
        "returning the spec in files naming `ModuleSpec`, whose construction builds weight "
        "layers and which has no `backward_dw` of its own or through bases, all defined in "
        "the run"
    ),
    explanation="""
        Issue #19, class 6 (delayed wgrad across classes). Megatron-style layers are built
        from specs: `ModuleSpec(module=C, submodules=CSubmodules(in_proj=..., out_proj=...))`
        given to a slot of a layer (`TransformerLayerSubmodules(self_attention=spec)`). A
        schedule that overlaps the weight-gradient pass (1F1B with all-to-all overlap,
        `delay_wgrad_compute`) calls the slot's `backward_dw` from outside the class
        (`layer.self_attention.backward_dw()`, or keeps `layer.self_attention.backward_dw`
        to call later). A new attention or mixer class plugged into that slot that builds
        its own projections but never got a `backward_dw` leaves their weight gradients
        uncomputed under delayed wgrad (the TE layers were built with the delay mode from
        the config), or the schedule fails on the missing method: Megatron-LM #2997 added
        `GatedDeltaNet.backward_dw` for this.

        Seen, across the files of the run (found before the files are linted, with CPython's
        `ast`, in the files naming `ModuleSpec` and `backward_dw` only): the slots whose
        `backward_dw` is called or read as `X.<slot>.backward_dw` (not on a comment line,
        not `ModuleSpec`'s own keywords: a wrapper's `self.module.backward_dw()` names no
        slot; a file that asks `hasattr` / `getattr` for that slot's `backward_dw` guards
        its calls there, and those are not counted); the classes handed to such a slot as a
        keyword (`self_attention=`) or dict key (`"self_attention": ...`):
        `ModuleSpec(module=C)` or `ModuleSpec(C)`, the class itself, a name bound to one in
        the function or at the top of the file, either side of a conditional, or the call of
        a function of a file naming `ModuleSpec` that returns one (followed through such
        functions, by name); classes imported under an alias by their real name. The class
        is reported, in its own file, when every base up to `torch.nn.Module` (or
        `MegatronModule`) is defined in the run, no class of the lineage spells
        `backward_dw` or defines `__getattr__`, no class of it refuses delayed wgrad in any
        method (an `assert` on `delay_wgrad_compute`, or an `if` on it that raises), and its
        construction builds weight layers as GMLP014 counts them (a `Linear` the run does
        not show to be eager, `build_module` of a `*_proj` / `linear_*` spec, a member
        handed `delay_wgrad_compute=`).

        Not seen: a slot called through a name that is not an attribute chain
        (`getattr(layer, name).backward_dw()`, `module.backward_dw()` over a list of
        modules), slots the schedule reaches through another attribute name than the spec
        keyword, specs stored in containers (`specs[i]`, a list comprehension), modified
        after they are built (`spec.submodules.self_attention = ...`), or built by functions
        of files that never spell `ModuleSpec`; classes whose bases sit outside the run
        (they may define `backward_dw`), a class name two files define when the spec file
        does not import it from one of them, and whether the configuration ever turns
        delayed wgrad or the overlapping schedule on for a model using that spec. A slot
        keyword shared by unrelated layers is taken as the same slot. A slot spelled only in
        comments, docstrings or other strings is not taken as called (an f-string's
        replacement field is a string to this scan too).
    """,
    fix="""
        Give the class a `backward_dw` that calls the `backward_dw` of each weight layer it
        builds (or raise for delayed wgrad in `__init__`). No automatic fix.
    """,
    fix_summary="none (give the class a backward_dw)",
    valid=(
        Example(
            """
            class LinearMixer(MegatronModule):
                def __init__(self, config, submodules):
                    super().__init__(config)
                    self.in_proj = build_module(submodules.in_proj, config)
                    self.out_proj = build_module(submodules.out_proj, config)

                def forward(self, x):
                    return self.out_proj(self.in_proj(x))

                def backward_dw(self):
                    self.in_proj.backward_dw()
                    self.out_proj.backward_dw()
            """,
            others=_OTHERS,
        ),
        Example(
            """
            class MixerBase(MegatronModule):
                def backward_dw(self):
                    for projection in self.projections:
                        projection.backward_dw()


            class LinearMixer(MixerBase):
                def __init__(self, config, submodules):
                    super().__init__(config)
                    self.in_proj = build_module(submodules.in_proj, config)
                    self.out_proj = build_module(submodules.out_proj, config)
                    self.projections = [self.in_proj, self.out_proj]
            """,
            others=_OTHERS,
        ),
    ),
    invalid=(
        Example(
            """
            class LinearMixer(MegatronModule):
                def __init__(self, config, submodules):
                    super().__init__(config)
                    self.in_proj = build_module(submodules.in_proj, config)
                    self.out_proj = build_module(submodules.out_proj, config)

                def forward(self, x):
                    return self.out_proj(self.in_proj(x))
            """,
            line=1,
            others=_OTHERS,
        ),
    ),
    reads_slots=True,
)

MESSAGE = (
    "`{name}` is plugged into slot `{slot}` ({spec}), whose backward_dw the run calls "
    "({caller}), but it builds weight layers ({layers}) and has no backward_dw: with "
    "delayed wgrad their weight gradients are never computed"
)


def check(context: ModuleContext, out: Collector) -> None:
    if not context.slot_facts:
        return
    import libcst as cst

    classes = {
        statement.name.value: statement
        for statement in context.module.body
        if isinstance(statement, cst.ClassDef)
    }
    for fact in context.slot_facts:
        node = classes.get(fact.name)
        if node is None:
            continue
        layers = ", ".join(f"`self.{attr}`" for attr in fact.layers)
        message = MESSAGE.format(
            name=fact.name, slot=fact.slot, spec=fact.spec, caller=fact.caller, layers=layers
        )
        out.report(CODE, node.name, message)
