"""GMLP042 on correct code that an adversarial review wrote (2026-12-04): sibling branches
that complete no gradient, that tell the reducer by another way than the stored hook, and
an autograd Function's ``backward`` beside a ``backward_dw`` that fires the hook. Each was
reported before the rule learned what a way through an ``if`` does (analysis/arm_effects.py)
and that autograd calls ``backward`` itself."""

from __future__ import annotations

import textwrap

import pytest

from gmlp_check.lint import engine

CORRECT = {
    "dgrad-only-arm-asserts": """
        class GroupedShard(torch.nn.Parameter):
            def finish(self, wgrads, compute_wgrad):
                if compute_wgrad:
                    for w, g in zip(self.weights, wgrads):
                        w.main_grad.add_(g)
                        w.grad_added_to_main_grad = True
                        w._grad_accum_hook()
                else:
                    for w, g in zip(self.weights, wgrads):
                        assert g is None, f"unexpected wgrad for {w.shape}"
    """,
    "arm-queues-for-backward-dw": """
        class DeferredShard(torch.nn.Parameter):
            def _apply(self, w, g):
                w.main_grad.add_(g)
                w.grad_added_to_main_grad = True
                w._grad_accum_hook()

            def reduce_scatter_wgrads(self, wgrads, delay):
                if delay:
                    for w, g in zip(self.weights, wgrads):
                        self._pending.append((w, g))
                else:
                    for w, g in zip(self.weights, wgrads):
                        self._apply(w, g)

            def backward_dw(self):
                for w, g in self._pending:
                    self._apply(w, g)
    """,
    "arm-tells-the-bucket-group": """
        class Finisher:
            def finish(self, params, grads):
                if self.use_stored_hook:
                    for p, g in zip(params, grads):
                        p.main_grad.add_(g)
                        p.grad_added_to_main_grad = True
                        p._grad_accum_hook()
                else:
                    for p, g in zip(params, grads):
                        p.main_grad.add_(g)
                        p.grad_added_to_main_grad = True
                        self.param_to_bucket_group[p].register_grad_ready(p)
    """,
    "autograd-backward-beside-backward-dw": """
        class LinearWithDelayedWgrad(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output):
                inp, weight = ctx.saved_tensors
                grad_input = grad_output @ weight
                torch.matmul(grad_output.t(), inp, out=weight.main_grad)
                weight.grad_added_to_main_grad = True
                return grad_input, torch.zeros_like(weight)

            @staticmethod
            def backward_dw(store):
                inp, grad_output, weight = store.pop()
                weight.main_grad.add_(grad_output.t() @ inp)
                weight.grad_added_to_main_grad = True
                weight._grad_accum_hook()
    """,
}


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_siblings_are_not_reported(name):
    source = "import torch\n\n" + textwrap.dedent(CORRECT[name]).lstrip("\n")
    assert engine.lint_source(source, "x.py", frozenset({"GMLP042"})) == []


def test_an_arm_that_fills_the_returned_list_completes_its_gradients():
    # The same dgrad-only shape, but the quiet arm hands its wgrads back through the list
    # the function returns: that completes them, without the hook.
    source = textwrap.dedent("""
        def finish(weights, shards, fused):
            out = []
            if fused:
                for p, g in zip(weights, shards):
                    p.main_grad.add_(g)
                    p.grad_added_to_main_grad = True
                    p._grad_accum_hook()
                    out.append(None)
            else:
                for p, g in zip(weights, shards):
                    out.append(g)
            return out
    """)
    assert [f.code for f in engine.lint_source(source, "x.py", frozenset({"GMLP042"}))] == [
        "GMLP042"
    ]


def test_a_local_returned_inside_a_conditional_expression_counts_as_handed_back():
    # TE #2960's shape: the quiet arm binds ``result``, returned as
    # ``result if batched else result[0]``.
    source = textwrap.dedent("""
        class ShardedParam(torch.nn.Parameter):
            @staticmethod
            def _apply_fused(param, wgrad):
                param.main_grad.add_(wgrad)
                param.grad_added_to_main_grad = True
                param._grad_accum_hook(param)

            def wgrad_reduce_scatter(self, wgrads, fuse, batched):
                sharded = self._reduce_scatter(wgrads)
                if fuse:
                    [self._apply_fused(p, g) for p, g in zip(self._weights, sharded)]
                    result = [None] * len(sharded)
                else:
                    result = [p.strip(g) for p, g in zip(self._weights, sharded)]
                return result if batched else result[0]
    """)
    assert [f.code for f in engine.lint_source(source, "x.py", frozenset({"GMLP042"}))] == [
        "GMLP042"
    ]
