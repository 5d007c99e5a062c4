"""Class variants written from the third blind set's fixes (docs/lint-history-split-fresh3.toml,
H-learn3): each class in several spellings that none of those fixes uses, each with a correct
twin. Same format as variant_corpus.py.

Class 1: a gathered / quantized copy handed to a helper of the file that takes main_grad,
weakrefs or flags from it (TE #3517). Class 2: the flag set on a fresh copy of the weight
(TE #2265). Class 3: the weight gradient handed to a store and returned as well
(Megatron-DeepSpeed #415). Class 5: work that writes `.grad` outside autograd handed to a
store on every path (Megatron-DeepSpeed #428); a gradient-ready hook registered on every
parameter with no regard for the delayed-wgrad mark, in a file using the contract
(Megatron-LM #6697, GMLP028, H-runfacts). Class 6: a layer's `backward_dw()` before its
`backward(...)` (HYGON-AI/Megatron-LM-das e4d821e4).
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------- 1: a copy handed to a helper that treats it as the Parameter
    Variant(
        1,
        "gathered-weight-positional-to-top-level-helper",
        """
        def _bookkeeping(ctx, weight):
            ctx.weight_ref = weakref.ref(weight)


        def forward(ctx, x, weight):
            orig_weight = weight
            ctx.main_grad = orig_weight.main_grad
            if ctx.tp_gather:
                weight = all_gather_weight(weight)
            _bookkeeping(ctx, weight)  # bug
            return x @ weight.t()
        """,
        """
        def _bookkeeping(ctx, weight):
            ctx.weight_ref = weakref.ref(weight)


        def forward(ctx, x, weight):
            orig_weight = weight
            ctx.main_grad = orig_weight.main_grad
            if ctx.tp_gather:
                weight = all_gather_weight(weight)
            _bookkeeping(ctx, orig_weight)
            return x @ weight.t()
        """,
    ),
    Variant(
        1,
        "quantized-weight-to-method-reading-flag",
        """
        class Layer(torch.nn.Module):
            def _accumulate_flag(self, w):
                return not getattr(w, "overwrite_main_grad", False)

            def forward(self, x):
                origin_w = self.weight
                w = quantize(origin_w, self.quantizer) if self.fp8 else origin_w
                acc = self._accumulate_flag(w)  # bug
                return fused_linear(x, w, origin_w.main_grad, acc)
        """,
        """
        class Layer(torch.nn.Module):
            def _accumulate_flag(self, w):
                return not getattr(w, "overwrite_main_grad", False)

            def forward(self, x):
                origin_w = self.weight
                w = quantize(origin_w, self.quantizer) if self.fp8 else origin_w
                acc = self._accumulate_flag(origin_w)
                return fused_linear(x, w, origin_w.main_grad, acc)
        """,
    ),
    Variant(
        1,
        "unsharded-list-to-loop-over-main-grads",
        """
        def _collect(params):
            out = []
            for p in params:
                out.append(p.main_grad)
            return out


        def backward_step(ctx, origin_params):
            params = origin_params
            if ctx.fsdp:
                params = unshard_params(origin_params)
            buffers = _collect(params=params)  # bug
            return buffers
        """,
        """
        def _collect(params):
            out = []
            for p in params:
                out.append(p.main_grad)
            return out


        def backward_step(ctx, origin_params):
            params = origin_params
            if ctx.fsdp:
                params = unshard_params(origin_params)
            buffers = _collect(params=origin_params)
            return buffers
        """,
    ),
    # ------------------------------------------------ 2: the flag set on a fresh copy
    Variant(
        2,
        "flag-on-parameter-wrapper",
        """
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            weight = torch.nn.Parameter(weight, weight.requires_grad)
            weight.main_grad = ctx.main_grad
            general_gemm(x, dy, out=weight.main_grad, accumulate=True)
            weight.grad_added_to_main_grad = True  # bug
            return None, None
        """,
        """
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            origin = ctx.origin_weight_ref()
            general_gemm(x, dy, out=origin.main_grad, accumulate=True)
            origin.grad_added_to_main_grad = True
            return None, None
        """,
    ),
    Variant(
        2,
        "flag-on-clone-stored-in-list",
        """
        def restore(ctx, weights, main_grads):
            for i in range(len(weights)):
                copy = weights[i].detach()
                weights[i] = copy
                weights[i].main_grad = main_grads[i]
                weights[i].grad_added_to_main_grad = ctx.flags[i]  # bug
        """,
        """
        def restore(ctx, weights, origin_weights, main_grads):
            for i in range(len(weights)):
                origin_weights[i].main_grad = main_grads[i]
                origin_weights[i].grad_added_to_main_grad = ctx.flags[i]
        """,
    ),
    Variant(
        2,
        "flag-on-wrapper-in-a-branch",
        """
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            w = ctx.weight
            if ctx.offloaded:
                w = Parameter(w, requires_grad=False)
            wgrad_into(main_grads[ctx.index], x, dy)
            w.grad_added_to_main_grad = True  # bug
            return None, None
        """,
        """
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            w = ctx.weight
            wgrad_into(w.main_grad, x, dy)
            w.grad_added_to_main_grad = True
            return None, None
        """,
    ),
    # ------------------------------------ 3: handed to a store and returned as well
    Variant(
        3,
        "store-put-then-unrelated-if-else",
        """
        def accumulate_main_grad(x, dy, weight):
            weight.main_grad.add_(dy.t() @ x)


        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            if ctx.overlap:
                WeightGradStore.put(x, dy, weight, accumulate_main_grad)  # bug
                grad_w = None
            if ctx.zero_bubble:
                WeightGradStore.put(x, dy, weight, accumulate_main_grad)
                grad_w = None
            else:
                grad_w = dy.t().matmul(x)
            return dy @ weight, grad_w
        """,
        """
        def accumulate_main_grad(x, dy, weight):
            weight.main_grad.add_(dy.t() @ x)


        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            if ctx.overlap:
                WeightGradStore.put(x, dy, weight, accumulate_main_grad)
                grad_w = None
            elif ctx.zero_bubble:
                WeightGradStore.put(x, dy, weight, accumulate_main_grad)
                grad_w = None
            else:
                grad_w = dy.t().matmul(x)
            return dy @ weight, grad_w
        """,
    ),
    Variant(
        3,
        "queue-lambda-then-product-under-other-flag",
        """
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            ctx.queue.append(lambda: w.main_grad.add_(dy.t() @ x))  # bug
            dw = None
            if not ctx.fused:
                dw = dy.t() @ x
            return dy @ w, dw
        """,
        """
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            if ctx.fused:
                ctx.queue.append(lambda: w.main_grad.add_(dy.t() @ x))
                dw = None
            else:
                dw = dy.t() @ x
            return dy @ w, dw
        """,
    ),
    Variant(
        3,
        "partial-in-with-then-matmul",
        """
        def backward(ctx, grad_output):
            inp, weight = ctx.saved_tensors
            work = functools.partial(add_into_main_grad, weight)
            with torch.cuda.stream(ctx.stream):
                ctx.store.put((inp, grad_output), work)  # bug
            wgrad = None
            if ctx.return_wgrad:
                wgrad = torch.matmul(grad_output.t(), inp)
            return None, wgrad
        """,
        """
        def backward(ctx, grad_output):
            inp, weight = ctx.saved_tensors
            work = functools.partial(add_into_main_grad, weight)
            wgrad = None
            if ctx.return_wgrad:
                wgrad = torch.matmul(grad_output.t(), inp)
            else:
                with torch.cuda.stream(ctx.stream):
                    ctx.store.put((inp, grad_output), work)
            return None, wgrad
        """,
    ),
    # ---------------------------- 5: `.grad` written outside autograd on every path
    Variant(
        5,
        "grad-written-by-queued-function",
        """
        def write_grad(x, dy, weight):  # main_grad-free path
            if weight.grad is None:
                weight.grad = dy.t() @ x
            else:
                weight.grad += dy.t() @ x


        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            WeightGradStore.put(x, dy, weight, write_grad)  # bug
            return dy @ weight, None
        """,
        """
        def write_grad(x, dy, weight):  # main_grad-free path
            if weight.grad is None:
                weight.grad = dy.t() @ x
            else:
                weight.grad += dy.t() @ x


        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            if get_args().enable_zbh1_pipeline:
                WeightGradStore.put(x, dy, weight, write_grad)
                grad_weight = None
            else:
                grad_weight = dy.t() @ x
            return dy @ weight, grad_weight
        """,
    ),
    Variant(
        5,
        "grad-written-by-lambda",
        """
        def backward(ctx, dy):  # not main_grad
            x, w = ctx.saved_tensors
            ctx.sink.push(partial(_store_grad, w, dy, x))  # bug
            return dy @ w, None


        def _store_grad(w, dy, x):
            w.grad = dy.t() @ x
        """,
        """
        def backward(ctx, dy):  # not main_grad
            x, w = ctx.saved_tensors
            if ctx.split:
                ctx.sink.push(partial(_store_grad, w, dy, x))
            else:
                _store_grad(w, dy, x)
            return dy @ w, None


        def _store_grad(w, dy, x):
            w.grad = dy.t() @ x
        """,
    ),
    # ------------- 5: a gradient-ready hook that ignores the delayed-wgrad mark (GMLP028)
    # Single files: the file itself uses the contract elsewhere (a run fact from its own
    # text; tests/lint/test_delayed_wgrad_facts.py gives it from another file).
    Variant(
        5,
        "grad-accumulator-hook-in-wrapper-beside-delayed-aware-finish",
        """
        class GradReducer:
            def __init__(self, module):
                self.grad_accs = []
                for name, param in module.named_parameters():
                    tmp = param.expand_as(param)
                    acc = tmp.grad_fn.next_functions[0][0]
                    acc.register_hook(self._mark_ready(param))  # bug
                    self.grad_accs.append(acc)

            def finish(self, module):
                for param in module.parameters():
                    if getattr(param, "skip_backward_post_hook", False):
                        self._mark_ready(param)()
        """,
        """
        class GradReducer:
            def __init__(self, module):
                self.grad_accs = []
                for name, param in module.named_parameters():
                    if self._delayed(param):
                        module.register_wgrad_accumulation_and_reduce_hooks(self._mark_ready(param))
                        continue
                    tmp = param.expand_as(param)
                    acc = tmp.grad_fn.next_functions[0][0]
                    acc.register_hook(self._mark_ready(param))
                    self.grad_accs.append(acc)

            def _delayed(self, param):
                return getattr(param, "skip_backward_post_hook", False)
        """,
    ),
    Variant(
        5,
        "post-accumulate-hooks-in-a-comprehension",
        """
        class Sharder:
            def install(self):
                self.handles = [
                    p.register_post_accumulate_grad_hook(self._on_ready)  # bug
                    for p in self.params
                    if p.requires_grad
                ]

            def delayed(self):
                return [p for p in self.params if hasattr(p, "skip_backward_post_hook")]
        """,
        """
        class Sharder:
            def install(self):
                self.handles = [
                    p.register_post_accumulate_grad_hook(self._on_ready)
                    for p in self.params
                    if p.requires_grad and not getattr(p, "skip_backward_post_hook", False)
                ]

            def delayed(self):
                return [p for p in self.params if hasattr(p, "skip_backward_post_hook")]
        """,
    ),
    # ------------------------------------ 6: backward_dw before the layer's backward
    Variant(
        6,
        "flush-before-backward-in-loop",
        """
        def backward_chunk(layers, grad):
            for layer in reversed(layers):
                layer.backward_dw()  # bug
                grad = layer.backward(grad)
            return grad
        """,
        """
        def backward_chunk(layers, grad):
            for layer in reversed(layers):
                grad = layer.backward(grad)
                layer.backward_dw()
            return grad
        """,
    ),
    Variant(
        6,
        "flush-before-backward-of-subscripted-node",
        """
        def run(plan, i, grad, delay):
            if delay:
                plan.nodes[i].attn.backward_dw()  # bug
            grad = plan.nodes[i].attn.backward(grad)
            return plan.nodes[i].dispatch.backward(grad)
        """,
        """
        def run(plan, i, grad, delay):
            grad = plan.nodes[i].attn.backward(grad)
            if delay:
                plan.nodes[i].attn.backward_dw()
            return plan.nodes[i].dispatch.backward(grad)
        """,
    ),
    Variant(
        6,
        "flush-in-try-before-backward",
        """
        class Schedule:
            def step(self, b_layer, b_grad):
                try:
                    b_layer.mlp.backward_dw()  # bug
                except AssertionError:
                    pass
                b_grad = b_layer.mlp.backward(b_grad)
                return b_grad
        """,
        """
        class Schedule:
            def step(self, b_layer, b_grad):
                b_grad = b_layer.mlp.backward(b_grad)
                try:
                    b_layer.mlp.backward_dw()
                except AssertionError:
                    pass
                return b_grad
        """,
    ),
)
