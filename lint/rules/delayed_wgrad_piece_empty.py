"""GMLP025: a delayed-wgrad piece of a class with submodules that does nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

wgrad_pieces = LazyModule("..analysis.wgrad_pieces", __package__)

CODE = "GMLP025"
RULE = Rule(
    code=CODE,
    classes=(6,),
    name="delayed-wgrad-piece-empty",
    summary=(
        "A method that computes a delayed weight gradient (`backward_dw`, `*_dw`, "
        "`*wgrad*`) in a class that builds submodules has an empty body: the schedule that "
        "calls it computes no weight gradient, silently."
    ),
    flags=(
        "a method named `backward_dw`, `*_dw` or `*wgrad*` whose body is only `pass`, `...`, "
        "a docstring or a bare return, in a class whose `__init__` builds submodules "
        "(`build_module(...)`, a Linear / MLP / Attention / Experts / Layer class); not in "
        "a `Protocol` / `ABC`, not `@abstractmethod`; and a `backward_dw` or `*_dw` method "
        "of any class whose own body yields (a generator function: calling it runs nothing)"
    ),
    explanation="""
        Issue #19, class 6 (delayed wgrad across classes), found from lhb8125/Megatron-LM
        #30. With the weight gradient split from the backward pass, a schedule computes it
        later by calling the pieces each layer offers: `backward_dw`, or, in a fine-grained
        schedule (1F1B with all-to-all overlap), one piece per submodule
        (`_submodule_attention_router_compound_dw`, `_submodule_mlp_dw`). A piece left
        empty (a stub, a merge that lost the body) is called and returns: the weights of
        the submodules it stands for never receive a gradient, main_grad keeps the previous
        step's value, and nothing fails. Raising `NotImplementedError` instead is loud and
        not reported.

        Seen: classes at any depth of the file whose `__init__` assigns `self.X` a built
        submodule (a spec builder `build_module(...)`, or a call of a class whose name says
        Linear, MLP, Attention, Experts, Layer or Proj); their methods named `backward_dw`,
        ending in `_dw`, or containing `wgrad`, whose bodies hold nothing but `pass`, `...`,
        strings and bare / `None` returns. Files naming no other trigger are analysed when
        they define such a method (`_dw(self`).

        A piece named `backward_dw` or `*_dw` whose own body contains `yield` is a generator
        function, in any class: the schedule calls it for its effect (`layer.backward_dw()`)
        and the call only makes a generator, so none of the body runs. Reported at the
        first `yield`. `*wgrad*` methods may be generators on purpose (walking buffers) and
        are not judged so; nor is a `yield` inside a function nested in the piece.

        Not seen: a piece that does something unrelated (a log line) and no gradient work;
        a piece that calls a submodule's `backward_dw` but not every one's (GMLP014 and
        GMLP020 see layers, not submodules); which submodules a piece stands for (the
        finding lists all `__init__` builds); pieces held as lambdas or `partial`s. A class
        whose submodules never delay (no `delay_wgrad_compute` anywhere) may keep an empty
        piece on purpose: it is still reported, as the schedule cannot know.
    """,
    fix="""
        Call the submodules' delayed wgrad in the piece (`self.mlp.backward_dw()`), or raise
        `NotImplementedError` if the class does not support the split schedule. No
        automatic fix.
    """,
    fix_summary="none (call the submodules' `backward_dw`, or raise)",
    valid=(
        Example(
            """
            class TransformerLayer(MegatronModule):
                def __init__(self, config, submodules):
                    super().__init__(config)
                    self.self_attention = build_module(submodules.self_attention, config)
                    self.mlp = build_module(submodules.mlp, config)

                def _submodule_attention_dw(self):
                    self.self_attention.backward_dw()

                def _submodule_mlp_dw(self):
                    raise NotImplementedError("the MLP has no split wgrad here")
            """
        ),
        Example(
            """
            class LayerInterface(Protocol):
                def backward_dw(self) -> None:
                    ...


            class Base(MegatronModule):
                def backward_dw(self):
                    pass
            """
        ),
        Example(
            """
            class ExpertStack(nn.Module):
                def iter_wgrad_buffers(self):
                    for layer in self.layers:
                        yield layer.weight.main_grad

                def backward_dw(self):
                    def pending():
                        yield from self.layers

                    for layer in pending():
                        layer.backward_dw()
            """
        ),
    ),
    invalid=(
        Example(
            """
            class TransformerLayer(MegatronModule):
                def __init__(self, config, submodules):
                    super().__init__(config)
                    self.self_attention = build_module(submodules.self_attention, config)
                    self.mlp = build_module(submodules.mlp, config)

                def _submodule_attention_dw(self):
                    self.self_attention.backward_dw()

                def _submodule_mlp_dw(self):
                    pass
            """,
            line=10,
        ),
        Example(
            """
            class ExpertStack(nn.Module):
                def backward_dw(self):
                    for layer in reversed(self.layers):
                        yield layer.backward_dw()
            """,
            line=4,
        ),
    ),
)


MESSAGE = (
    "`{cls}.{method}` is a delayed-wgrad piece with an empty body while `{cls}` builds "
    "{submodules}: the schedule that calls it computes no weight gradient for them; call "
    "their `backward_dw()` or raise NotImplementedError"
)


GENERATOR = (
    "`{cls}.{method}` yields, so it is a generator function: the schedule's call "
    "(`{method}()`) makes a generator and runs none of its body, and no weight gradient is "
    "computed; do the work without `yield`"
)


def check(context: ModuleContext, out: Collector) -> None:
    for piece in context.shared(wgrad_pieces.empty_pieces):
        if piece.generator_yield is not None:
            message = GENERATOR.format(cls=piece.class_name, method=piece.method.name.value)
            out.report(CODE, piece.generator_yield, message)
            continue
        submodules = ", ".join(f"`self.{name}`" for name in piece.submodules)
        out.report(
            CODE,
            piece.method.name,
            MESSAGE.format(
                cls=piece.class_name, method=piece.method.name.value, submodules=submodules
            ),
        )
