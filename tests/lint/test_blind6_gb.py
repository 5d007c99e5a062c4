"""The facts behind helper "gb"'s targets in the sixth blind corpus (variant_corpus_blind6.py,
classes 3-5; the variants themselves are checked by test_variant_corpus.py), in other
spellings:

* a: a hand-off of a gradient that every path to it wrote into main_grad (``if overwrite:
  copy_(g) else: add_(g)``) is itself wrong and is reported there, not at one of the
  writes; a gradient converted on the way in (``add_(g.float())``) is the same gradient
  (GMLP033);
* b: a grad hook handed one parameter is fired for that parameter, wherever the hook is kept
  (a method of the object, an element of a dict of DDP hooks, a local or a parameter named
  for it) (GMLP017);
* d: a mark names its weights one by one (a loop over a display of names marks each): a
  weight whose main_grad the function never names, only read here (GEMM operand, dtype),
  bound from a field of an object no call is handed, is marked without a write, in a
  function that writes other weights' main_grad (GMLP032);
* c: a kernel with an accumulate switch and no ``out=`` writes into the one main_grad
  buffer handed to it positionally, and a constexpr ``ACCUMULATE=`` is that switch (GMLP016,
  reported at the switch when the call spells it).
"""

from __future__ import annotations

import pytest

from .support import lint_snippet

BUGGY = {
    "a_bug1": (
        "GMLP033",
        9,
        """
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            w = ctx.weight
            g = dy.t() @ x
            if getattr(w, "overwrite_main_grad", False):
                w.main_grad.copy_(g)
            else:
                w.main_grad.add_(g)
            return None, g
        """,
    ),
    "a_bug2": (
        "GMLP033",
        12,
        """
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            weight = ctx.weight
            grad_w = torch.matmul(dy.t(), x)
            if not ctx.fuse_wgrad_accumulation:
                return None, grad_w
            mg = weight.main_grad
            if ctx.overwrite:
                mg.copy_(grad_w.float())
            else:
                mg.add_(grad_w.float())
            return None, grad_w.to(weight.dtype)
        """,
    ),
    "a_bug3": (
        "GMLP033",
        7,
        """
        def finish_expert_grads(params, grads, overwrite):
            for p, g in zip(params, grads):
                if overwrite:
                    p.main_grad.copy_(g)
                else:
                    p.main_grad.add_(g)
                p.grad = g
        """,
    ),
    "b_bug1": (
        "GMLP017",
        5,
        """
        class ExpertReplay:
            def finish(self):
                self.graph.replay()  # the captured backward wrote each main_grad
                for p in self.expert_params:
                    self._grad_reduce_hook(p)
        """,
    ),
    "b_bug2": (
        "GMLP017",
        5,
        """
        def after_replay(graph, params, ddp_hooks):
            graph.replay()  # the captured backward wrote each main_grad
            for i, w in enumerate(params):
                fire = ddp_hooks[i]
                fire(w)
        """,
    ),
    "b_bug3": (
        "GMLP017",
        4,
        """
        def finalize_experts(weights, wgrads, reduce_hook):
            for w, g in zip(weights, wgrads):
                w.main_grad.add_(g)
                reduce_hook(w)
        """,
    ),
    "b_bug4": (
        "GMLP017",
        5,
        """
        class Finalizer:
            def finish(self, dense, expert, g):
                dense.main_grad.add_(g)
                self._dp_reduce_hook(dense)
                self._ep_reduce_hook(expert)
        """,
    ),
    "d_bug1": (
        "GMLP032",
        8,
        """
        def backward(ctx, dy):
            x, h = ctx.saved_tensors
            w1, w2 = ctx.fc1_weight, ctx.fc2_weight
            dh = dy @ w2
            general_gemm(h, dy, out=w2.main_grad, accumulate=True)
            dw1 = (dh.t() @ x).to(w1.dtype)
            w2.grad_added_to_main_grad = True
            w1.grad_added_to_main_grad = True
            return None, dw1, None
        """,
    ),
    "d_bug2": (
        "GMLP032",
        9,
        """
        def mlp_backward(self, dy, x, a, b):
            gate_w, up_w, down_w = self.gate.weight, self.up.weight, self.down.weight
            dgate = dy @ gate_w
            gate_w.main_grad.add_(dgate.t() @ x)
            up_w.main_grad.add_(a.t() @ b)
            d_down = torch.matmul(a.t(), dy).to(down_w.dtype)
            zero = getattr(down_w, "zero_out_wgrad", False)
            for weight in [gate_w, up_w, down_w]:
                weight.grad_added_to_main_grad = True
            return d_down, zero
        """,
    ),
    "d_bug3": (
        "GMLP032",
        6,
        """
        def finish_wgrads(ctx, g_proj, g_out):
            proj, out_w = ctx.proj_weight, ctx.out_weight
            proj.main_grad.add_(g_proj)
            wg = g_out.to(out_w.dtype)
            for p in (proj, out_w):
                setattr(p, "grad_added_to_main_grad", True)
            return wg
        """,
    ),
    "c_bug1": (
        "GMLP016",
        3,
        """
        def backward(ctx, dy):
            x, w = ctx.x, ctx.weight
            wgrad_kernel(x, dy, w.main_grad, accumulate=False)
            w.grad_added_to_main_grad = True
        """,
    ),
    "c_bug2": (
        "GMLP016",
        6,
        """
        def run_wgrad(x, dy, weight, M):
            mg = weight.main_grad
            _dw_kernel[(M,)](
                x, dy, mg,
                M,
                ACCUMULATE=0,
            )
        """,
    ),
    "c_bug3": (
        "GMLP016",
        3,
        """
        def compute_expert_wgrads(ws, xs, dys):
            for w, x, dy in zip(ws, xs, dys):
                grouped_wgrad(x, dy, w.main_grad, Accumulate=False)
                w.grad_added_to_main_grad = True
        """,
    ),
}

CLEAN = {
    "a_ok1": """
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            w = ctx.weight
            g = dy.t() @ x
            if getattr(w, "overwrite_main_grad", False):
                w.main_grad.copy_(g)
            else:
                w.main_grad.add_(g)
            w.grad_added_to_main_grad = True
            zero = getattr(w, "zero_out_wgrad", False)
            return None, get_dummy_wgrad(list(w.shape), w.dtype, zero=zero)
        """,
    "a_ok2": """
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            weight = ctx.weight
            grad_w = torch.matmul(dy.t(), x)
            if not ctx.fuse_wgrad_accumulation:
                return None, grad_w
            mg = weight.main_grad
            if getattr(weight, "overwrite_main_grad", False):
                mg.copy_(grad_w.float())
            else:
                mg.add_(grad_w.float())
            weight.grad_added_to_main_grad = True
            zero = getattr(weight, "zero_out_wgrad", False)
            return None, get_dummy_wgrad(list(weight.shape), weight.dtype, zero=zero)
        """,
    "a_ok3": """
        def finish_expert_grads(params, grads):
            for p, g in zip(params, grads):
                if getattr(p, "overwrite_main_grad", False):
                    p.main_grad.copy_(g)
                else:
                    p.main_grad.add_(g)
                p.grad_added_to_main_grad = True
        """,
    "b_ok1": """
        class ExpertReplay:
            def finish(self):
                self.graph.replay()  # the captured backward wrote each main_grad
                for p in self.expert_params:
                    p.grad_added_to_main_grad = True
                    self._grad_reduce_hook(p)
        """,
    "b_ok2": """
        def after_replay(graph, params, ddp_hooks):
            graph.replay()  # the captured backward wrote each main_grad
            for i, w in enumerate(params):
                if hasattr(w, "grad_added_to_main_grad"):
                    w.grad_added_to_main_grad = True
                fire = ddp_hooks[i]
                fire(w)
        """,
    "b_ok3": """
        def finalize_experts(weights, wgrads, reduce_hook):
            for w, g in zip(weights, wgrads):
                w.main_grad.add_(g)
                w.grad = None
                w.grad_added_to_main_grad = True
                reduce_hook(w)
        """,
    # Hooks that are not a parameter's gradient hooks, and a registrar.
    "b_ok4": """
        class Block:
            def run(self, x, p):
                for hook in self._forward_hooks:
                    hook(x)
                self._forward_pre_hook(x)
                self.register_grad_reduce_hook(p)
                self.call_ddp_preforward_hook(p)
        """,
    "d_ok1": """
        def backward(ctx, dy):
            x, h = ctx.saved_tensors
            w1, w2 = ctx.fc1_weight, ctx.fc2_weight
            dh = dy @ w2
            general_gemm(h, dy, out=w2.main_grad, accumulate=True)
            dw1 = (dh.t() @ x).to(w1.dtype)
            w2.grad_added_to_main_grad = True
            zero = getattr(w2, "zero_out_wgrad", False)
            return None, dw1, get_dummy_wgrad(list(w2.shape), w2.dtype, zero=zero)
        """,
    "d_ok2": """
        def mlp_backward(self, dy, x, a, b):
            gate_w, up_w, down_w = self.gate.weight, self.up.weight, self.down.weight
            dgate = dy @ gate_w
            gate_w.main_grad.add_(dgate.t() @ x)
            up_w.main_grad.add_(a.t() @ b)
            down_w.main_grad.add_(torch.matmul(a.t(), dy))
            for weight in [gate_w, up_w, down_w]:
                weight.grad_added_to_main_grad = True
        """,
    # a helper of the object the weight came from may write its main_grad
    "d_ok3": """
        def finish_wgrads(ctx, g_proj, g_out):
            proj, out_w = ctx.proj_weight, ctx.out_weight
            proj.main_grad.add_(g_proj)
            ctx.flush_out_wgrad(g_out)
            setattr(proj, "grad_added_to_main_grad", True)
            out_w.grad_added_to_main_grad = True
        """,
    # a function of the module named after hooks is a predicate, not a hook handed in
    "b_ok5": """
        def fires_grad_hook(names, main_grad_words):
            for name in names:
                if names_grad_hook(name):
                    return True
            return False
        """,
    "c_ok1": """
        def backward(ctx, dy):
            x, w = ctx.x, ctx.weight
            accumulate = not getattr(w, "overwrite_main_grad", False)
            wgrad_kernel(x, dy, w.main_grad, accumulate=accumulate)
            w.grad_added_to_main_grad = True
        """,
    "c_ok2": """
        def run_wgrad(x, dy, weight, M):
            mg = weight.main_grad
            _dw_kernel[(M,)](
                x, dy, mg,
                M,
                ACCUMULATE=1,
            )
        """,
    # main_grad read by a kernel that writes elsewhere
    "c_ok3": """
        def compute_wgrad_norm(w, buf):
            norm_kernel(w.main_grad, out=buf, accumulate=False)
        """,
}


@pytest.mark.parametrize("key", sorted(BUGGY))
def test_other_spelling_caught(key):
    code, line, source = BUGGY[key]
    found = {(f.code, f.line) for f in lint_snippet(source)}
    assert (code, line) in found, found


@pytest.mark.parametrize("key", sorted(CLEAN))
def test_other_spelling_clean(key):
    assert lint_snippet(CLEAN[key]) == []
