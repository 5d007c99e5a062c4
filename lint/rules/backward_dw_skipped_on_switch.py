"""GMLP067: a `backward_dw` that returns before its work on a switch unrelated to the deferred
weight gradient."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

skipped_pieces = LazyModule("..analysis.skipped_pieces", __package__)
one_sided_pops = LazyModule("..analysis.one_sided_pops", __package__)

CODE = "GMLP067"
RULE = Rule(
    code=CODE,
    classes=(6,),
    name="backward-dw-skipped-on-switch",
    summary=(
        "A `backward_dw` returns before computing anything on a feature switch (off or on) "
        "that says nothing about the deferred weight gradient: in that configuration the "
        "layer's deferred wgrad is never computed."
    ),
    flags=(
        "`if not S: return` / `if S: return` (or `S is False` / `S == False`; the positive "
        "form with `S` a name or attribute, before a first piece that is the class's own "
        "`super().backward_dw()` / `Base.backward_dw(self)`; a bare `return` the whole body, "
        "no `else`) among the top-level statements of a method `backward_dw` before its "
        "first call of a piece (a name ending in `_dw` or containing `backward`), where `S` "
        "is about neither the deferred work (delay mode, wgrad store or queue, graph, "
        "`need_backward_dw`, requires-grad, training, pipeline stage, counts, an adapter "
        "enabled) nor whether "
        "there is any (layers the class holds, the method's own parameters, `is None`, "
        "`hasattr`, `len`); reported at the `return`; and, anywhere in `backward_dw`, the "
        "layer's store popped only on one side of an `if` on a switch saying where the "
        "gradient goes (`accumulate_into_main_grad`, `fuse_wgrad_accumulation`), the other "
        "side popping nothing and calling no method of `self` or `super()`, unless the file's "
        "deferring function tests that switch before its put"
    ),
    explanation="""
        Issue #19, class 6 (delayed wgrad across classes). The schedule calls
        `backward_dw()` once per step on every layer that deferred its weight gradient. An
        exit at its top is right when it says nothing was deferred (`if not
        self.delay_wgrad_compute: return`, Transformer Engine's `if not
        self.need_backward_dw(): return`, an empty wgrad store), that there is nothing to
        compute here (`if self.shared_experts is None`, `if not self.local_experts`, a
        pipeline stage without the layer, the caller asking for nothing; an arm that
        replays a CUDA graph and returns is no bare exit). An exit on a feature switch, in
        front of the work, off (`if not self.config.moe_shared_expert_overlap: return`
        before `super().backward_dw()`, a shared-expert MLP that meant to pick a stream,
        blind corpus 21) or on, in front of the class's own inherited work (`if
        self.config.moe_shared_expert_overlap: return` before `super().backward_dw()`, where
        the overlap should only move the work to a side stream, blind corpus 22), skips the
        layer's weight gradients in one configuration: they never reach main_grad, and the
        loss still falls on the other layers. In front of a member's flush (`if
        self.shared_expert_overlap: return` before `self.shared_experts.backward_dw()`) a
        switch that is on may say another path computes it, as Megatron's MoE layer does:
        left alone.

        Seen: methods named `backward_dw` of a class; their top-level statements in order up
        to the first one that calls a piece (a call whose name ends in `_dw` or contains
        `backward`: `super().backward_dw()`, `self._backward_qkv_proj()`); an `if` without
        `else` among them whose whole body is `return` (or `return None`, after logging
        calls at most) and whose test is a switch (a name or attribute: `S`) or negates one
        (`not S`, `S is False`, `S == False`) that is about neither the deferred work nor
        whether there is any. Those are: a name,
        attribute, string or call name with a token starting with `delay`, `wgrad`, `dw`,
        `store`, `defer`, `graph`, `pending`, `queue`, `empty`, `need`, `skip`, `train`,
        `freeze` / `frozen`, `process`, `stage`, `pipeline`, `num`, `count`, `disable` /
        `enable` (an adapter switched off ran nothing: `if self.disable_adapters: return`), or
        spelling
        `requires_grad`, `backward_dw`; the same in a value the class assigns to a `self`
        attribute the test reads (`self.enabled = cfg.delay_wgrad_compute`) or the function
        to a local it reads; a `self` attribute the class fills with layers (`ModuleList`,
        `build_module`, a `*Linear` / `*MLP` / `*Experts` call) or that the work after the
        exit uses too (`if not self.local_experts: return` before a loop over them); a
        parameter of the method; an `is` / `is not` or numeric comparison, `hasattr`, `len`.
        Reported at the `return`. A class whose `__init__` hands `delay_wgrad_compute` to
        its base (`super().__init__(..., delay_wgrad_compute=...)`) is left to GMLP038,
        which judges its `backward_dw` against the base's.

        The layer's own store popped inline (`self.wgrad_store.pop()`, a call `pop()` on a
        `self` attribute whose name ends in `store`, not `restore`) is a piece (blind corpus
        23: TE's `GroupedLinear.backward_dw` leaving on `if self.fuse_wgrad_accumulation:
        return` before the pop). Before it, a switch that is on is reported only when it
        says where the gradient goes (a name or `getattr` string spelling `accumulat` with
        `fuse` / `fusion`: `fuse_wgrad_accumulation`, `gradient_accumulation_fusion`), even
        where the work reads it again; another switch that is on may say nothing was stored
        (`if self.lora_only: return`, the review). Such a switch is never about the
        deferred work whatever its other tokens: gating the deferral on it is the seed's
        wrong flag.

        The same switch around the pop itself (blind corpus 25, a DeepGEMM grouped linear:
        `if not self.accumulate_into_main_grad: wgrad_list, _ = self.wgrad_store.pop()`,
        then `.grad` set from the list): the store holds the work in every mode, and where
        the gradient goes into main_grad the popped function is the GEMM that writes it.
        Reported at the pop when the `if`'s other side (its `else`, or with none the
        statements after it) pops nothing and calls no method of the object or its base
        (`super().backward_dw()`, `self._run_stored()` may pop); a switch spelling
        `accumulat` with `main_grad` (`accumulate_into_main_grad`) says where it goes here
        too (analysis/one_sided_pops.py). Left alone when a function of the file that puts
        work into a store tests the same switch in an `if` that returns, raises or holds
        the put: that op stores only one side's work (review 28).

        The switch may be spelled `S == True` / `S is True`, `getattr(cfg, "s", False)` or,
        on the positive side, `bool(S)`; a one-line `if S: return` counts as the block.

        Not seen: an exit further down (after some pieces ran: the rest skipped), an exit on
        a call or a combination (`if self.overlapped(): return`, `if a and b: return`), a
        positive switch before a member's flush however spelled, one inside
        a `with` block or with the work in its `else`, exits in a helper the method calls, a
        `backward_dw` whose work is neither a `*_dw` nor a `*backward*` call nor a store's
        `pop()`, a switch hidden behind `is None` (`if self.stream is None: return` where
        the stream exists only with the feature on), a `backward_dw` defined apart and
        patched onto the class, and whether the feature could be off while the layer defers
        (a switch that always goes with the delay mode in the configs validated elsewhere is
        reported).
    """,
    fix="""
        Keep the work on every path and let the switch choose only how it runs (a stream, an
        overlap). No automatic fix.
    """,
    fix_summary="none (compute the deferred wgrad on every path; switch only how)",
    valid=(
        Example(
            """
            class SharedExpertMLP(MLP):
                def backward_dw(self):
                    if self.config.moe_shared_expert_overlap:
                        with torch.cuda.stream(self.stream):
                            super().backward_dw()
                        torch.cuda.current_stream().wait_stream(self.stream)
                    else:
                        super().backward_dw()
            """
        ),
        Example(
            """
            class MambaLayer(MegatronModule):
                def backward_dw(self):
                    if not self.training:
                        return
                    if self.config.external_cuda_graph:
                        return
                    self.mixer.backward_dw()
            """
        ),
        Example(
            """
            class TransformerLayer(MegatronModule):
                def backward_dw(self):
                    if self.shared_experts is None:
                        return
                    if not self.config.delay_wgrad_compute:
                        return
                    self.shared_experts.backward_dw()
            """
        ),
    ),
    invalid=(
        Example(
            """
            class SharedExpertMLP(MLP):
                def backward_dw(self):
                    if not self.config.moe_shared_expert_overlap:
                        return
                    with torch.cuda.stream(self.stream):
                        super().backward_dw()
                    torch.cuda.current_stream().wait_stream(self.stream)
            """,
            line=4,
        ),
        Example(
            """
            class MambaLayer(MegatronModule):
                def backward_dw(self):
                    if self.config.sequence_parallel is False:
                        return None
                    self.mixer.backward_dw()
                    self.norm_dw()
            """,
            line=4,
        ),
        Example(
            """
            class SharedExpertMLP(MLP):
                def backward_dw(self):
                    if self.config.moe_shared_expert_overlap:
                        return
                    super(SharedExpertMLP, self).backward_dw()
            """,
            line=4,
        ),
        Example(
            """
            class GroupedLinear(TransformerEngineBaseModule):
                def backward_dw(self):
                    if self.fuse_wgrad_accumulation:
                        return
                    _, tensors = self.wgrad_store.pop()
                    self._deliver(tensors, fused=self.fuse_wgrad_accumulation)
                    for hook in self.wgrad_accumulation_and_reduce_hooks:
                        hook()
            """,
            line=4,
        ),
        Example(
            """
            class GroupedLinear(TransformerEngineBaseModule):
                def backward_dw(self):
                    if not self.wgrad_store.delay_wgrad_compute():
                        return
                    if not self.accumulate_into_main_grad:
                        wgrad_list, _ = self.wgrad_store.pop()
                        for weight, wgrad in zip(self.weights, wgrad_list):
                            weight.grad = wgrad if weight.grad is None else weight.grad + wgrad
                    for hook in self.wgrad_accumulation_and_reduce_hooks:
                        hook()
            """,
            line=6,
        ),
    ),
)


POP_MESSAGE = (
    "the deferred work is taken off the store only on one side of a switch that says where "
    "the weight gradient goes: on the other side it never runs, and the weights it was to "
    "write (main_grad included) get nothing; pop on every path, let the switch choose what "
    "happens to the result"
)
MESSAGE = (
    "`backward_dw` returns here, before any of its work, on a test that says nothing about "
    "the deferred weight gradient: whenever it holds, the layer's deferred wgrad is never "
    "computed and never reaches main_grad; let the switch choose how, not whether"
)


def check(context: ModuleContext, out: Collector) -> None:
    if "backward_dw" not in context.source:
        return
    for exit_ in context.shared(skipped_pieces.skipped_pieces):
        out.report(CODE, exit_, MESSAGE)
    for pop in context.shared(one_sided_pops.one_sided_pops):
        out.report(CODE, pop, POP_MESSAGE)
