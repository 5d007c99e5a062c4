"""Class variants for issue #19's classes 5 (hooks without bookkeeping) and 6 (delayed wgrad
across classes), written from the classes' descriptions in the issue and from how
Transformer Engine's and Megatron-LM's current heads structure these pieces (TE's
``TransformerEngineBaseModule.backward_dw`` and ``_trigger_wgrad_accumulation_and_reduce_hooks``,
its graphed ``backward_dw`` that replays a wgrad graph, Megatron's ``TELinear.backward_dw``
that forwards to ``super().backward_dw()`` under ``delay_wgrad_compute``, its callable slots
that fire ``post_wgrad_grad_acc_hook``), not from any fix. Same format as variant_corpus.py.

Class 5: a parameter's stored grad-accumulation hook fired by hand (after a graph replay, in
an expert- or tensor-parallel finalizer, after delayed or fused wgrad work) on a path that
neither marks ``grad_added_to_main_grad`` nor gives ``.grad`` a value; the hook reached by
position, by a pair, through a closure, a comprehension or a ``while`` loop.
Class 6: a class whose delayed wgrad is never computed: a subclass of a base that takes
``delay_wgrad_compute`` overriding ``backward_dw`` (or the piece it calls) without computing
the base's weights; a class that hands ``delay_wgrad_compute`` to a member and never calls the
member's ``backward_dw`` (no ``backward_dw`` at all, or one that forgets it); a mixin's
``backward_dw`` over a list the class fills.
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------------------------ 5: a hook fired by its position
    Variant(
        5,
        "expert-hooks-fired-by-index",
        """
        def finish_expert_wgrads(expert_params, grad_acc_hooks):
            for i, p in enumerate(expert_params):
                if not p.requires_grad:
                    continue
                p.main_grad.add_(p.expert_wgrad)
                grad_acc_hooks[i]()  # bug
        """,
        """
        def finish_expert_wgrads(expert_params, grad_acc_hooks):
            for i, p in enumerate(expert_params):
                if not p.requires_grad:
                    continue
                p.main_grad.add_(p.expert_wgrad)
                p.grad_added_to_main_grad = True
                grad_acc_hooks[i]()
        """,
    ),
    # ------------------------------------------------ 5: getattr(...)() called inline
    Variant(
        5,
        "graph-replay-then-getattr-hook-called-inline",
        """
        def replay_wgrad(graph, params):
            graph.replay()
            for p in params:
                getattr(p, "_grad_accum_hook")()  # bug
        """,
        """
        def replay_wgrad(graph, params):
            graph.replay()
            for p in params:
                if hasattr(p, "grad_added_to_main_grad"):
                    p.grad_added_to_main_grad = True
                getattr(p, "_grad_accum_hook")()
        """,
        unseen=(
            "the file names no word of the contract (main_grad, grad_added_to_main_grad, "
            "backward_dw, ...): it is only compiled, not analysed; GMLP017 reports it once "
            "such a word is in the file (a trigger for hand-fired grad hooks is left to the "
            "trigger vocabulary)"
        ),
    ),
    # ------------------------------------------------ 5: a hook looked up in a mapping
    Variant(
        5,
        "tensor-parallel-hook-from-mapping-get",
        """
        class TPFinalizer:
            def finalize(self):
                for p in self.tp_params:
                    p.main_grad.add_(self.reduced_wgrad[p])
                    hook = self.grad_accum_hooks.get(p)
                    if hook is not None:
                        hook()  # bug
        """,
        """
        class TPFinalizer:
            def finalize(self):
                for p in self.tp_params:
                    p.main_grad.add_(self.reduced_wgrad[p])
                    p.grad = None
                    p.grad_added_to_main_grad = True
                    hook = self.grad_accum_hooks.get(p)
                    if hook is not None:
                        hook()
        """,
    ),
    # ------------------------------------------------ 5: a closure made for one parameter
    Variant(
        5,
        "closure-fires-hook-of-captured-param",
        """
        def make_wgrad_finisher(param, graph):
            def finish():
                graph.replay()
                param._grad_accum_hook()  # bug

            return finish
        """,
        """
        def make_wgrad_finisher(param, graph):
            def finish():
                graph.replay()
                param.grad_added_to_main_grad = True
                param._grad_accum_hook()

            return finish
        """,
        unseen=(
            "the file names no word of the contract (main_grad, grad_added_to_main_grad, "
            "backward_dw, ...): it is only compiled, not analysed; GMLP017 reports it once "
            "such a word is in the file (a trigger for hand-fired grad hooks is left to the "
            "trigger vocabulary)"
        ),
    ),
    # ------------------------------------------------ 5: a while loop draining a queue
    Variant(
        5,
        "while-loop-drains-delayed-params",
        """
        def drain_delayed(pending):
            while pending:
                p = pending.pop()
                p.main_grad.add_(p.delayed_wgrad)
                p.post_wgrad_grad_acc_hook()  # bug
        """,
        """
        def drain_delayed(pending):
            while pending:
                p = pending.pop()
                p.main_grad.add_(p.delayed_wgrad)
                p.grad_added_to_main_grad = True
                p.post_wgrad_grad_acc_hook()
        """,
    ),
    # ------------------------------------------------ 5: pairs kept as a list of tuples
    Variant(
        5,
        "hooks-paired-in-a-list-of-tuples",
        """
        class FusedWgradOp:
            def finish(self):
                self.fused_wgrad_kernel(self.weights, [w.main_grad for w in self.weights])
                for weight, grad_hook in self.weight_hook_pairs:
                    grad_hook()  # bug
        """,
        """
        class FusedWgradOp:
            def finish(self):
                self.fused_wgrad_kernel(self.weights, [w.main_grad for w in self.weights])
                for weight, grad_hook in self.weight_hook_pairs:
                    weight.grad_added_to_main_grad = True
                    grad_hook()
        """,
    ),
    # ------------------------------------------------ 5: the mark after the firing
    Variant(
        5,
        "delayed-wgrad-marks-after-firing",
        """
        class DelayedExperts:
            def backward_dw(self):
                self.wgrad_store.pop()
                for p in self.parameters():
                    p._grad_accum_hook()  # bug
                    p.grad_added_to_main_grad = True
        """,
        """
        class DelayedExperts:
            def backward_dw(self):
                self.wgrad_store.pop()
                for p in self.parameters():
                    p.grad_added_to_main_grad = True
                    p._grad_accum_hook()
        """,
    ),
    # ------------------------------------------------ 5: one branch marks, the other does not
    Variant(
        5,
        "fused-branch-marks-unfused-branch-forgets",
        """
        def after_wgrad(weight, wgrad, fuse_wgrad_accumulation):
            if fuse_wgrad_accumulation:
                weight.main_grad.add_(wgrad)
                weight.grad_added_to_main_grad = True
            else:
                weight.main_grad.add_(wgrad)
            weight.post_wgrad_grad_acc_hook()  # bug
        """,
        """
        def after_wgrad(weight, wgrad, fuse_wgrad_accumulation):
            if fuse_wgrad_accumulation:
                weight.main_grad.add_(wgrad)
                weight.grad_added_to_main_grad = True
            else:
                weight.grad = wgrad if weight.grad is None else weight.grad + wgrad
            weight.post_wgrad_grad_acc_hook()
        """,
    ),
    # ------------------------------------------------ 5: fired in a comprehension
    Variant(
        5,
        "graph-replay-hooks-in-a-comprehension",
        """
        def replay_and_reduce(graph, params):
            graph.replay()
            return [p._grad_accum_hook() for p in params]  # bug
        """,
        """
        def replay_and_reduce(graph, params):
            graph.replay()
            for p in params:
                p.grad_added_to_main_grad = True
            return [p._grad_accum_hook() for p in params]
        """,
        unseen=(
            "the file names no word of the contract (main_grad, grad_added_to_main_grad, "
            "backward_dw, ...): it is only compiled, not analysed; GMLP017 reports it once "
            "such a word is in the file (a trigger for hand-fired grad hooks is left to the "
            "trigger vocabulary)"
        ),
    ),
    # ------------------------------------------------ 6: a TE subclass's override drops super()
    Variant(
        6,
        "te-subclass-backward-dw-never-calls-super",
        """
        class TEColumnParallelLinear(te.pytorch.Linear):
            def __init__(self, input_size, output_size, config):
                self.config = config
                super().__init__(
                    input_size, output_size, delay_wgrad_compute=config.delay_wgrad_compute
                )

            def backward_dw(self):  # bug
                if self.config.delay_wgrad_compute:
                    self.wgrad_done = True
        """,
        """
        class TEColumnParallelLinear(te.pytorch.Linear):
            def __init__(self, input_size, output_size, config):
                self.config = config
                super().__init__(
                    input_size, output_size, delay_wgrad_compute=config.delay_wgrad_compute
                )

            def backward_dw(self):
                if self.config.delay_wgrad_compute:
                    super().backward_dw()
                    self.wgrad_done = True
        """,
    ),
    # ------------------------------------------------ 6: the override pops and discards
    Variant(
        6,
        "te-subclass-backward-dw-pops-and-discards",
        """
        class TELayerNormMLP(te.pytorch.LayerNormMLP):
            def __init__(self, hidden, ffn, *, delay_wgrad_compute=False):
                super().__init__(hidden, ffn, delay_wgrad_compute=delay_wgrad_compute)

            def backward_dw(self):  # bug
                if not self.need_backward_dw():
                    return
                self.wgrad_store.pop()
                self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
        """
        class TELayerNormMLP(te.pytorch.LayerNormMLP):
            def __init__(self, hidden, ffn, *, delay_wgrad_compute=False):
                super().__init__(hidden, ffn, delay_wgrad_compute=delay_wgrad_compute)

            def backward_dw(self):
                if not self.need_backward_dw():
                    return
                super().backward_dw()
        """,
    ),
    # ------------------------------------------------ 6: a subclass empties the piece
    Variant(
        6,
        "subclass-empties-the-piece-backward-dw-calls",
        """
        class DelayedLinear(BaseModule):
            def __init__(self, in_features, out_features, delay_wgrad_compute=False):
                super().__init__()
                self.weight = Parameter(torch.empty(out_features, in_features))
                self.wgrad_store = WeightGradStore(delay_wgrad_compute)

            def backward_dw(self):
                if not self.wgrad_store.delay_wgrad_compute():
                    return
                self._run_delayed_gemms()
                self._trigger_wgrad_accumulation_and_reduce_hooks()

            def _run_delayed_gemms(self):
                (wgrad, _), _ = self.wgrad_store.pop()
                self.weight.grad = wgrad


        class FrozenInputLinear(DelayedLinear):
            def _run_delayed_gemms(self):  # bug
                pass
        """,
        """
        class DelayedLinear(BaseModule):
            def __init__(self, in_features, out_features, delay_wgrad_compute=False):
                super().__init__()
                self.weight = Parameter(torch.empty(out_features, in_features))
                self.wgrad_store = WeightGradStore(delay_wgrad_compute)

            def backward_dw(self):
                if not self.wgrad_store.delay_wgrad_compute():
                    return
                self._run_delayed_gemms()
                self._trigger_wgrad_accumulation_and_reduce_hooks()

            def _run_delayed_gemms(self):
                (wgrad, _), _ = self.wgrad_store.pop()
                self.weight.grad = wgrad


        class FrozenInputLinear(DelayedLinear):
            def _run_delayed_gemms(self):
                super()._run_delayed_gemms()
                self.frozen_steps += 1
        """,
    ),
    # ------------------------------------------------ 6: a wrapper with no backward_dw
    Variant(
        6,
        "wrapper-forwards-delay-to-member-without-backward-dw",
        """
        class ExpertProjection(torch.nn.Module):  # bug
            def __init__(self, config):
                super().__init__()
                self.proj = te.pytorch.GroupedLinear(
                    config.num_experts,
                    config.hidden_size,
                    config.ffn_hidden_size,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )

            def forward(self, x, splits):
                return self.proj(x, splits)
        """,
        """
        class ExpertProjection(torch.nn.Module):
            def __init__(self, config):
                super().__init__()
                self.proj = te.pytorch.GroupedLinear(
                    config.num_experts,
                    config.hidden_size,
                    config.ffn_hidden_size,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )

            def forward(self, x, splits):
                return self.proj(x, splits)

            def backward_dw(self):
                self.proj.backward_dw()
        """,
    ),
    # ------------------------------------------------ 6: a factory-built member forgotten
    Variant(
        6,
        "member-built-by-factory-with-delay-forgotten",
        """
        class Router(MegatronModule):
            def __init__(self, config):
                super().__init__(config)
                self.gate = make_projection(  # bug
                    config.hidden_size,
                    config.num_experts,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )
                self.experts = build_module(config.experts_spec, config)

            def backward_dw(self):
                self.experts.backward_dw()
        """,
        """
        class Router(MegatronModule):
            def __init__(self, config):
                super().__init__(config)
                self.gate = make_projection(
                    config.hidden_size,
                    config.num_experts,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )
                self.experts = build_module(config.experts_spec, config)

            def backward_dw(self):
                self.experts.backward_dw()
                self.gate.backward_dw()
        """,
    ),
    # ------------------------------------------------ 6: members built in a helper of __init__
    Variant(
        6,
        "members-built-in-init-helper-no-backward-dw",
        """
        class SharedExpertMLP(MegatronModule):  # bug
            def __init__(self, config):
                super().__init__(config)
                self._build_projections(config)

            def _build_projections(self, config):
                delay = config.delay_wgrad_compute
                self.fc1 = TEColumnParallelLinear(
                    config.hidden, config.ffn, delay_wgrad_compute=delay
                )
                self.fc2 = TERowParallelLinear(config.ffn, config.hidden, delay_wgrad_compute=delay)

            def forward(self, x):
                return self.fc2(self.fc1(x))
        """,
        """
        class SharedExpertMLP(MegatronModule):
            def __init__(self, config):
                super().__init__(config)
                self._build_projections(config)

            def _build_projections(self, config):
                delay = config.delay_wgrad_compute
                self.fc1 = TEColumnParallelLinear(
                    config.hidden, config.ffn, delay_wgrad_compute=delay
                )
                self.fc2 = TERowParallelLinear(config.ffn, config.hidden, delay_wgrad_compute=delay)

            def forward(self, x):
                return self.fc2(self.fc1(x))

            def backward_dw(self):
                self.fc2.backward_dw()
                self.fc1.backward_dw()
        """,
    ),
    # ------------------------------------------------ 6: a mixin's backward_dw over a list
    Variant(
        6,
        "mixin-backward-dw-over-a-list-missing-a-layer",
        """
        class DelayedWgradMixin:
            def backward_dw(self):
                for module in self.delayed_wgrad_modules():
                    module.backward_dw()


        class Attention(DelayedWgradMixin, MegatronModule):
            def __init__(self, config):
                super().__init__(config)
                self.linear_qkv = TELinear(config.hidden, 3 * config.hidden)
                self.linear_proj = TELinear(config.hidden, config.hidden)  # bug

            def delayed_wgrad_modules(self):
                return [self.linear_qkv]
        """,
        """
        class DelayedWgradMixin:
            def backward_dw(self):
                for module in self.delayed_wgrad_modules():
                    module.backward_dw()


        class Attention(DelayedWgradMixin, MegatronModule):
            def __init__(self, config):
                super().__init__(config)
                self.linear_qkv = TELinear(config.hidden, 3 * config.hidden)
                self.linear_proj = TELinear(config.hidden, config.hidden)

            def delayed_wgrad_modules(self):
                return [self.linear_qkv, self.linear_proj]
        """,
    ),
    # ------------------------------------------------ 6: an empty override of a wrapper
    Variant(
        6,
        "wrapper-subclass-backward-dw-only-returns",
        """
        class TEGroupedLinear(te.pytorch.GroupedLinear):
            def __init__(self, num_gemms, in_features, out_features, config):
                super().__init__(
                    num_gemms,
                    in_features,
                    out_features,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )

            def backward_dw(self):  # bug
                return None
        """,
        """
        class TEGroupedLinear(te.pytorch.GroupedLinear):
            def __init__(self, num_gemms, in_features, out_features, config):
                super().__init__(
                    num_gemms,
                    in_features,
                    out_features,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )

            def backward_dw(self):
                return super().backward_dw()
        """,
    ),
)
