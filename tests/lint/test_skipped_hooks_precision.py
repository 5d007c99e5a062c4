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


# Correct code from the same review that was still reported after the first mend: the
# hook fired after the ``if`` under the arm's own test, through a local lambda, or by a
# local bound to it in the ``else`` of a flag test. Each is reported without the change
# that reads it (analysis/decided_tests.py, delayed_work.hook_locals, the flag test's else).
CORRECT_LATER = {
    "firing-after-the-if-under-the-same-test": """
        class ShardedParam(torch.nn.Parameter):
            def finish(self, wgrads, fused):
                if fused:
                    for w, g in zip(self.weights, wgrads):
                        w.main_grad.add_(g)
                        w.grad_added_to_main_grad = True
                        w._grad_accum_hook()
                else:
                    for w, g in zip(self.weights, wgrads):
                        w.grad = g
                self._record_step()
                if not fused:
                    for w in self.weights:
                        w._grad_accum_hook()
    """,
    "firing-through-a-local-lambda": """
        def finish(weights, wgrads, fused):
            fire = lambda w: w._grad_accum_hook(w)
            if fused:
                for w, g in zip(weights, wgrads):
                    w.main_grad.add_(g)
                    w.grad_added_to_main_grad = True
                    w._grad_accum_hook(w)
            else:
                for w, g in zip(weights, wgrads):
                    w.grad = g
                    fire(w)
    """,
    "flag-test-whose-else-fires-through-a-local": """
        def fire_after_replay(params, grads):
            for p, g in zip(params, grads):
                hook = getattr(p, "_grad_accum_hook", None)
                if hook is None:
                    continue
                if p.grad_added_to_main_grad:
                    p.grad = None
                    hook()
                else:
                    p.grad = g
                    hook()
    """,
}

# The same shapes where the hook is still skipped: the later test goes the other way, the
# arm changes what the test reads, the test is a call (it may answer differently), the
# lambda fires nothing, the else fires another object's hook.
STILL_SKIPPED = {
    "later-test-the-same-way": ("if fused:", "fused", ""),
    "arm-rebinds-the-test": ("if not fused:", "fused", "fused = self.recheck()"),
    "arm-assigns-the-tested-attribute": ("if not self.fused:", "self.fused", "self.fused = True"),
    "test-is-a-call": ("if not self.is_fused():", "self.is_fused()", ""),
}


@pytest.mark.parametrize("name", sorted(CORRECT_LATER))
def test_hooks_fired_later_or_through_locals_are_not_reported(name):
    source = "import torch\n\n" + textwrap.dedent(CORRECT_LATER[name]).lstrip("\n")
    assert engine.lint_source(source, "x.py", frozenset({"GMLP042"})) == []


@pytest.mark.parametrize("name", sorted(STILL_SKIPPED))
def test_a_later_firing_the_arm_does_not_decide_leaves_it_reported(name):
    later, test, rebind = STILL_SKIPPED[name]
    source = textwrap.dedent(f"""
        class ShardedParam(torch.nn.Parameter):
            def finish(self, wgrads, fused):
                if {test}:
                    for w, g in zip(self.weights, wgrads):
                        w.main_grad.add_(g)
                        w.grad_added_to_main_grad = True
                        w._grad_accum_hook()
                else:
                    for w, g in zip(self.weights, wgrads):
                        w.grad = g
                    {rebind}
                {later}
                    for w in self.weights:
                        w._grad_accum_hook()
    """)
    found = engine.lint_source(source, "x.py", frozenset({"GMLP042"}))
    assert [(f.code, f.line) for f in found] == [("GMLP042", 10)]


@pytest.mark.parametrize(
    "body",
    [
        "fire = lambda w: w.grad.zero_()\n    if fused:",  # the lambda fires nothing
        "fire = lambda w: w.register_hook(print)\n    if fused:",
    ],
)
def test_a_lambda_that_fires_no_hook_leaves_the_arm_silent(body):
    source = textwrap.dedent("""
        def finish(weights, wgrads, fused):
            BODY
                for w, g in zip(weights, wgrads):
                    w.main_grad.add_(g)
                    w.grad_added_to_main_grad = True
                    w._grad_accum_hook(w)
            else:
                for w, g in zip(weights, wgrads):
                    w.grad = g
                    fire(w)
    """).replace("BODY", body)
    found = engine.lint_source(source, "x.py", frozenset({"GMLP042"}))
    assert [f.code for f in found] == ["GMLP042"]


def test_a_flag_test_whose_else_fires_another_objects_hook_is_reported():
    source = textwrap.dedent("""
        def fire_after_replay(params, grads, owner):
            for p, g in zip(params, grads):
                hook = getattr(p, "_grad_accum_hook", None)
                other = getattr(owner, "_grad_accum_hook", None)
                if p.grad_added_to_main_grad:
                    p.grad = None
                    hook()
                else:
                    p.grad = g
                    other()
    """)
    found = engine.lint_source(source, "x.py", frozenset({"GMLP042"}))
    assert [(f.code, f.line) for f in found] == [("GMLP042", 6)]
