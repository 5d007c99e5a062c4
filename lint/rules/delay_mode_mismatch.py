"""GMLP021: a layer's backward_dw called under a different delay mode than it was built with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

classes = LazyModule("..analysis.classes", __package__)
modes = LazyModule("..analysis.delay_modes", __package__)

CODE = "GMLP021"
RULE = Rule(
    code=CODE,
    classes=(6,),
    name="delay-mode-mismatch",
    summary=(
        "A class builds a layer with one delay mode (`delay_wgrad_compute=A`) but its "
        "`backward_dw` calls that layer's `backward_dw()` only under a test of another mode "
        "(`B`): where A holds and B does not, the layer's weight gradient is never computed."
    ),
    flags=(
        "`self.x.backward_dw()` in the class's `backward_dw` under a test (an enclosing "
        "`if`, or an earlier `if ...: return`) whose delay-mode terms differ from those of "
        "the `delay_wgrad_compute=` the class built `self.x` with; reported at that test "
        "(the nearest one that reads a mode), where the wrong mode is written"
    ),
    explanation="""
        Issue #19, class 6 (delayed wgrad across classes: delay-mode mismatches between a
        layer and the module that builds it). A layer built with
        `delay_wgrad_compute=A` computes only the input gradient in backward when A
        holds; its weight gradient waits for `backward_dw()`. The owner decides whether to
        call it: `if B: self.x.backward_dw()`, or `if not B: return` at the top of its
        `backward_dw`. When B reads the delay mode from somewhere else than A (the config's
        setting while the class computed its own mode, `config.delay_wgrad_compute or
        overlap`; a literal `True` passed to the layer while the owner asks the config),
        there are configurations in which the layer delays and the owner never calls it.

        Seen: classes of the file with their `__init__`'s layers (as GMLP014 knows them)
        built with a `delay_wgrad_compute=` keyword that is not `False`; the mode *terms*
        of an expression: attribute chains or names ending in `delay_wgrad_compute`
        (`self.` dropped) and `["delay_wgrad_compute"]` / `.get("delay_wgrad_compute")`
        look-ups. `self.delay_wgrad_compute` is the term `__init__` copies into it when it
        copies one; a computed one is a term of its own. In the class's own `backward_dw`
        (defined in this file), each `self.x.backward_dw()` is matched with the tests it
        runs under; a test that reads the layer's own `self.x.delay_wgrad_compute` is
        always right; an unguarded call is always made (a layer that does not delay
        returns at once).

        Also seen: modes given through a kwargs dict (`kwargs["delay_wgrad_compute"] = A`,
        `{"delay_wgrad_compute": A}`, `dict(delay_wgrad_compute=A)`; a literal `True` set
        under `if B:` is mode `B`) and to the base (`super().__init__(..., **kwargs)`, its
        `super().backward_dw()`; a guard on `self.delay_wgrad_compute` that the class never
        assigns reads the base's own mode and is right).

        Not seen: modes passed through a config object built for the layer, layers built
        by `build_module` from a spec (their mode is the config's), a `backward_dw` of
        another file, and whether two different terms always agree at run time (a guard on
        `config.delay_wgrad_compute` for a layer built with a parameter the caller fills
        from that same config is reported; suppress it with the reason).

        Ops built by another method (a fused container's `Sequential` of Transformer Engine
        ops, `GroupedLinear(..., delay_wgrad_compute=fc1_delay)` with `fc1_delay =
        self.linear_fc1.delay_wgrad_compute` in that method): a `backward_dw()` the class's
        `backward_dw` calls on anything but a `self.<layer>` or `super()` (`children[2]`, an
        op in a loop) is taken to be theirs, and its test must read a mode term one of them
        was built with; a test reading none of them is reported (blind corpus 9's
        Megatron-LM `TEGroupedMLP`, gated on `config.delay_wgrad_compute` where the ops
        took each wrapper's combined mode).

        Terms are compared by their text with `self.` dropped: a constructor parameter named
        otherwise than the attribute a base class of another file keeps it in (`c` kept as
        `self.config`) reads as another term, and is reported.
    """,
    fix="""
        Test the mode the layer was built with (or the layer's own
        `self.x.delay_wgrad_compute`) before calling its `backward_dw()`, or call it
        unconditionally. No automatic fix.
    """,
    fix_summary="none (test the mode the layer was built with)",
    valid=(
        Example(
            """
            class SharedExperts(MegatronModule):
                def __init__(self, config):
                    self.delay_wgrad_compute = config.delay_wgrad_compute or config.overlap
                    self.linear_fc1 = TELinear(
                        config.hidden, config.ffn, delay_wgrad_compute=self.delay_wgrad_compute
                    )

                def backward_dw(self):
                    if not self.delay_wgrad_compute:
                        return
                    self.linear_fc1.backward_dw()
            """
        ),
        Example(
            """
            class SharedExperts(MegatronModule):
                def __init__(self, config):
                    self.linear_fc1 = TELinear(
                        config.hidden, config.ffn, delay_wgrad_compute=config.delay_wgrad_compute
                    )

                def backward_dw(self):
                    if self.config.delay_wgrad_compute:
                        self.linear_fc1.backward_dw()
            """
        ),
        Example(
            """
            class SharedExperts(MegatronModule):
                def __init__(self, config):
                    self.linear_fc1 = TELinear(config.hidden, config.ffn, delay_wgrad_compute=True)

                def backward_dw(self):
                    if self.linear_fc1.delay_wgrad_compute:
                        self.linear_fc1.backward_dw()
            """
        ),
        Example(
            """
            class GroupedMLP(MegatronModule):
                def _make_ops(self):
                    fc1_delay = self.linear_fc1.delay_wgrad_compute
                    return Sequential(
                        GroupedLinear(self.n, self.h, self.f, delay_wgrad_compute=fc1_delay),
                        GroupedLinear(self.n, self.f, self.h, delay_wgrad_compute=fc1_delay),
                    )

                def backward_dw(self):
                    if self._fused and self.linear_fc1.delay_wgrad_compute:
                        for op in self._ops:
                            op.backward_dw()
                        return
                    self.linear_fc1.backward_dw()
            """
        ),
    ),
    invalid=(
        Example(
            """
            class SharedExperts(MegatronModule):
                def __init__(self, config):
                    self.delay_wgrad_compute = config.delay_wgrad_compute or config.overlap
                    self.linear_fc1 = TELinear(
                        config.hidden, config.ffn, delay_wgrad_compute=self.delay_wgrad_compute
                    )

                def backward_dw(self):
                    if self.config.delay_wgrad_compute:
                        self.linear_fc1.backward_dw()
            """,
            line=9,
        ),
        Example(
            """
            class Mixer(MegatronModule):
                def __init__(self, config):
                    self.in_proj = TELinear(config.hidden, config.inner, delay_wgrad_compute=True)

                def backward_dw(self):
                    if not self.config.delay_wgrad_compute:
                        return
                    self.in_proj.backward_dw()
            """,
            line=6,
        ),
        Example(
            """
            class GroupedMLP(MegatronModule):
                def _make_ops(self):
                    fc1_delay = self.linear_fc1.delay_wgrad_compute
                    return Sequential(
                        GroupedLinear(self.n, self.h, self.f, delay_wgrad_compute=fc1_delay),
                        GroupedLinear(self.n, self.f, self.h, delay_wgrad_compute=fc1_delay),
                    )

                def backward_dw(self):
                    if self._fused and self.config.delay_wgrad_compute:
                        for op in self._ops:
                            op.backward_dw()
                        return
                    self.linear_fc1.backward_dw()
            """,
            line=10,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "`{layer}` was built with delay mode `{built}` but its backward_dw() runs only "
    "under `{guard}`: where the first holds and the second does not, its weight gradient "
    "is never computed"
)

OPS_MESSAGE = (
    "the ops this class builds were given delay mode `{built}` but their backward_dw() runs "
    "only under `{guard}`: where the first holds and the second does not, their weight "
    "gradients are never computed"
)


def check(context: ModuleContext, out: Collector) -> None:
    if classes.DELAY not in context.source or classes.BACKWARD_DW not in context.source:
        return
    index = context.shared(classes.class_index)
    for model in index.classes.values():
        built = modes.built_modes(model)
        ops = modes.method_built_modes(model)
        if not built and not ops:
            continue
        own = modes.own_mode(model)
        for guarded in modes.guarded_calls(index, model):
            if guarded.layer == modes.OPS and ops and guarded.terms:
                _check_ops(
                    guarded, ops + list(built.values()), own, modes.loop_names(index, model), out
                )
                continue
            if guarded.layer not in built or not guarded.terms:
                continue
            if f"{guarded.layer}.{classes.DELAY}" in guarded.terms:
                continue  # the layer's own mode: always right
            if (
                guarded.layer == modes.SUPER
                and modes.OWN in guarded.terms
                and not modes.assigns_own(model)
            ):
                continue  # the base keeps the mode it was built with: its own
            guard = _expand(guarded.terms, own)
            mode = _expand(built[guarded.layer][0], own)
            if guard != mode:
                layer = guarded.layer if guarded.layer == modes.SUPER else f"self.{guarded.layer}"
                message = MESSAGE.format(layer=layer, built=_show(mode), guard=_show(guard))
                # At the test that reads the other mode: that is the line to change.
                out.report(CODE, guarded.test or guarded.call, message)


def _check_ops(guarded, ops, own, loop_names: frozenset[str], out: Collector) -> None:
    """A ``backward_dw()`` called on what holds ops a method built (not a ``self.<layer>``):
    the test must read the mode of one of them (or of anything the class built), or the
    receiver's own; a test reading a loop's or a comprehension's variable, or an item
    (``ops[0].delay_wgrad_compute``), reads some op's own mode and is left alone."""
    guard = _expand(guarded.terms, own)
    receiver = modes.dotted(guarded.call.func.value)
    if f"{receiver}.{classes.DELAY}" in guard:
        return  # the op's own mode
    if any(term.startswith("?") or term.split(".")[0] in loop_names for term in guard):
        return
    built = [_expand(mode, own) for mode, _ in ops]
    if any(guard & mode for mode in built):
        return  # reads the mode of one of them (each op's own test is GMLP014's and TE's)
    message = OPS_MESSAGE.format(
        built=" / ".join(_show(mode) for mode in built), guard=_show(guard)
    )
    out.report(CODE, guarded.test or guarded.call, message)


def _expand(found: frozenset[str], own: frozenset[str] | None) -> frozenset[str]:
    if own is None or modes.OWN not in found:
        return found
    return (found - {modes.OWN}) | own


def _show(found: frozenset[str]) -> str:
    return ", ".join(sorted(found))
