"""GMLP043: a layer listed for its backward_dw from outside its class, while the class
builds other layers in its place on another path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

listed_layers = LazyModule("..analysis.listed_layers", __package__)

CODE = "GMLP043"

# The layer class of the examples, in another file of the run: under hyper-connections it
# builds ``e_proj`` and ``h_proj`` and sets ``eh_proj`` to None (Megatron-LM's MTP layer).
_MTP_LAYER = (
    (
        "mtp.py",
        """
class MTPLayer(MegatronModule):
    def __init__(self, config, submodules):
        super().__init__(config)
        if config.enable_hyper_connections:
            self.e_proj = build_module(submodules.e_proj, config=config)
            self.h_proj = build_module(submodules.h_proj, config=config)
            self.eh_proj = None
        else:
            self.eh_proj = build_module(submodules.eh_proj, config=config)
            self.e_proj = None
            self.h_proj = None
""",
    ),
)

RULE = Rule(
    code=CODE,
    classes=(6,),
    name="delayed-wgrad-list-misses-alternative",
    summary=(
        "Code outside a layer class lists one of its layers for `backward_dw` by attribute "
        "(`backward_dw['attn'].append(layer.eh_proj)`), while the class builds other layers "
        "in that one's place on another path (`e_proj`, `h_proj`, with `eh_proj = None`) and "
        "the listing function never names them: there the list holds None and the layers "
        "built instead never get their weight gradients."
    ),
    flags=(
        "`X.c` listed for backward_dw outside `X`'s class (`X.c.backward_dw`, put alone or "
        "in a literal into a container named for `dw` / `wgrad`, or walked by a `for` that "
        "calls `backward_dw`), where a class of the run gives `self.c` a weight layer on one "
        "branch of an `if` and sets it to None on the other, which builds other layers the "
        "listing function never names"
    ),
    explanation="""
        Issue #19, class 6 (delayed wgrad across classes). A schedule that runs the
        weight-gradient pass on its own (Megatron-LM's fine-grained 1F1B callables) lists a
        layer's delayed-wgrad members one by one and calls their `backward_dw` later. The
        list is written against one shape of the layer: when the layer class builds
        different projections on another path (under hyper-connections Megatron-LM's MTP
        layer builds `e_proj` and `h_proj` and sets `eh_proj` to None), the list holds None
        there (an AttributeError in the delayed pass) and the projections built instead are
        never in it: with `delay_wgrad_compute` their weight gradients never reach main_grad
        (Megatron-LM #5471, f5cc9c92).

        Seen: the classes of every file of the run (`lint/alternative_layers.py`): an `if`
        in `__init__` (or a method it calls) one branch of which gives `self.c` a weight
        layer (as GMLP014 reads one) while the other sets `self.c = None` (there, or before
        the `if`) and gives weight layers to attributes the first branch does not build
        (layers handed `delay_wgrad_compute=False` are not counted; an attribute the method
        also builds outside that `if`, `if self.c is None: self.c = ...`, is not taken;
        nor is a class whose name two files of the run define, nor an attribute another
        class of the run gives a layer without such a choice: the listing is matched to
        the class by the attribute's name alone); and in the file being
        linted (not a test: a path under `tests/` or a `test_*.py` file pins its
        configuration), `X.c` (any `X` but `self` / `cls`) listed for
        backward_dw: `X.c.backward_dw`, `X.c` alone or inside a list, tuple, set, dict or
        conditional expression assigned to a target or handed to `append` / `extend` /
        `insert` on a receiver with a name part `dw`, `wgrad` or `wgrads` (whose name
        also says the delayed work, `backward_dw` or `delayed` / `deferred` / `pending` /
        `queued`, or in a file that calls some `X.backward_dw()`), or inside the
        literal a `for` walks whose body calls `backward_dw` (a `backward_dw` only compared
        or asserted on is no listing). Reported unless the function holding the listing
        (its outermost function) names every attribute built in `c`'s place, as an
        attribute (`X.e_proj`), a string, or an f-string with text of its own that can
        spell it (`f"{p}_proj"`), or the file spells each as a word anywhere
        (another function that picks between two listings, a tuple of names).

        Not seen: which class `X` is (the attribute's name decides: a listing of a class
        that builds other alternatives under the same attribute name is judged by them;
        an attribute name other classes of the run also build is not asked about);
        layers built instead on a path the class chooses without an `if` (a loop, a
        factory method returning different sets, `setattr` with computed names); listings
        through names other than those above (`fns = []`, then `register(fns)`), through
        `getattr(X, "c")`, or in a file that never spells `backward_dw`; an
        alternative named in the function or the file but never listed (any mention of it
        counts), or named only through a method (`layer.hc_projs()`, a false alarm) or an
        f-string with no text of its own; a container named for `wgrad` / `dw` that holds
        no backward_dw work in a file that runs backward_dw elsewhere (a false alarm);
        layers the class builds on every path and the list misses (GMLP014 and GMLP020
        look at a class's own `backward_dw`, not at lists outside it).
    """,
    fix="""
        List the layers of the path the layer took: `[layer.e_proj, layer.h_proj] if
        layer.config.enable_hyper_connections else [layer.eh_proj]`, or skip the None ones
        and add the others. No automatic fix.
    """,
    fix_summary="none (list the layers the class built on that path)",
    valid=(
        Example(
            """
            def build_mtp_callables(layer, backward_dw):
                projs = (
                    [layer.e_proj, layer.h_proj]
                    if layer.config.enable_hyper_connections
                    else [layer.eh_proj]
                )
                backward_dw["attn"].extend(projs)
                return backward_dw
            """,
            others=_MTP_LAYER,
        ),
        Example(
            """
            class MTPLayer(MegatronModule):
                def backward_dw(self):
                    self.eh_proj.backward_dw()
            """,
            others=_MTP_LAYER,
        ),
        Example(
            """
            def build_mtp_callables(layer, backward_dw):
                forward_funcs = [layer.eh_proj]
                return forward_funcs, backward_dw
            """,
            others=_MTP_LAYER,
        ),
    ),
    invalid=(
        Example(
            """
            def build_mtp_callables(layer, backward_dw):
                backward_dw["attn"].append(layer.eh_proj)
                return backward_dw
            """,
            line=2,
            others=_MTP_LAYER,
        ),
        Example(
            """
            def run_delayed_wgrad(layer):
                for proj in (layer.eh_proj, layer.mtp_model_layer):
                    proj.backward_dw()
            """,
            line=2,
            others=_MTP_LAYER,
        ),
        Example(
            """
            def flush(layer):
                layer.eh_proj.backward_dw()
            """,
            line=2,
            others=_MTP_LAYER,
        ),
    ),
)

MESSAGE = (
    "`{receiver}.{attribute}` is listed for backward_dw here, but `{owner}` builds "
    "{missing} in its place on another path (setting `{attribute}` to None), and this "
    "function never names {them}: there backward_dw meets None and those layers' weight "
    "gradients are never computed"
)


def check(context: ModuleContext, out: Collector) -> None:
    if not context.alternatives:
        return
    for miss in context.shared(listed_layers.missed_alternatives):
        missing = ", ".join(f"`{a}`" for a in miss.missing)
        message = MESSAGE.format(
            receiver=miss.receiver,
            attribute=miss.attribute,
            owner=miss.owner,
            missing=missing,
            them="it" if len(miss.missing) == 1 else "them",
        )
        out.report(CODE, miss.listed, message)
