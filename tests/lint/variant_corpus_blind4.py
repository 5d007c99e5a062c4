"""Class variants written from the fourth blind set's fixes (docs/lint-history-split-fresh4.toml,
H-classes5): each class in spellings that none of those fixes uses, each with a correct twin.
Same format as variant_corpus.py.

Class 4 (overwrite without asking): a per-backward consumer that copies each microbatch's
`.grad` into main_grad and never adds (Autumn1998/Megatron-LM 4a4c5706); a replacing write on
a path that the function's own overwrite-or-add switch does not decide (Autumn1998/Megatron-LM
dca96853). Class 3 (flags without writes, consumer side): a main-grad buffer erased or kept
on where main_grad points instead of on the flag (Autumn1998/Megatron-LM 7a9e39ee); and, as
declared misses, a flag consumed and never cleared (039b900a) and a CUDA-graph replay of a
fused backward with no flag set after it (Transformer Engine #1204).
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------ 4: a per-backward consumer that never adds into main_grad
    Variant(
        4,
        "consumer-copies-grad-each-microbatch-by-getattr",
        """
        class Reducer:
            def finish_grads(self, params):
                for p in params:
                    buf = getattr(p, "main_grad")
                    if p.grad is not None:
                        buf.copy_(p.grad)  # bug
                        p.grad = None
                if self.is_last_microbatch:
                    self.start_reduce()
        """,
        """
        class Reducer:
            def finish_grads(self, params):
                for p in params:
                    buf = getattr(p, "main_grad")
                    if p.grad is not None:
                        buf.add_(p.grad)
                        p.grad = None
                if self.is_last_microbatch:
                    self.start_reduce()
        """,
    ),
    Variant(
        4,
        "consumer-copies-into-fetched-buffer-after-flag-test",
        """
        def reduce_module_grads(group):
            for p in group.params:
                already = getattr(p, "grad_added_to_main_grad", False)
                if already or p.grad is None:
                    continue
                group.fetch_main_grad(p).copy_(p.grad)  # bug
        """,
        """
        def reduce_module_grads(group):
            for p in group.params:
                already = getattr(p, "grad_added_to_main_grad", False)
                if already or p.grad is None:
                    continue
                group.fetch_main_grad(p).add_(p.grad)
        """,
    ),
    # ------------------------------ 4: a switch handed in, heeded on one path only
    Variant(
        4,
        "empty-input-fast-path-zeroes-despite-accumulate",
        """
        def wgrad_into(buffer, x, dy, accumulate):
            if x.numel() == 0:
                buffer.zero_()  # bug
                return
            if accumulate:
                buffer.addmm_(dy.t(), x)
            else:
                torch.mm(dy.t(), x, out=buffer)


        def backward_wgrad(weight, x, dy):
            wgrad_into(weight.main_grad, x, dy, not weight.overwrite_main_grad)
        """,
        """
        def wgrad_into(buffer, x, dy, accumulate):
            if x.numel() == 0:
                if not accumulate:
                    buffer.zero_()
                return
            if accumulate:
                buffer.addmm_(dy.t(), x)
            else:
                torch.mm(dy.t(), x, out=buffer)


        def backward_wgrad(weight, x, dy):
            wgrad_into(weight.main_grad, x, dy, not weight.overwrite_main_grad)
        """,
    ),
    Variant(
        4,
        "whole-shard-slice-assigned-beside-a-local-switch",
        """
        def install(self, grads):
            shard = self.main_grad_buffer.local_shard
            mode = self.first_microbatch
            for i, g in enumerate(grads):
                if i == 0 and g.numel() == shard.numel():
                    shard[:] = g  # bug
                    continue
                if mode:
                    shard[g.start : g.stop] = g
                else:
                    shard[g.start : g.stop] += g
        """,
        """
        def install(self, grads):
            shard = self.main_grad_buffer.local_shard
            mode = self.first_microbatch
            for i, g in enumerate(grads):
                if i == 0 and g.numel() == shard.numel():
                    if mode:
                        shard[:] = g
                    else:
                        shard[:] += g
                    continue
                if mode:
                    shard[g.start : g.stop] = g
                else:
                    shard[g.start : g.stop] += g
        """,
    ),
    Variant(
        4,
        "keyword-only-switch-never-read",
        """
        class Bucket:
            def finish(self, params, *, accumulate_grads=True):
                flat = torch.cat([p.main_grad.view(-1) for p in params])
                self.grad_shard[: flat.numel()] = flat  # bug
        """,
        """
        class Bucket:
            def finish(self, params, *, accumulate_grads=True):
                flat = torch.cat([p.main_grad.view(-1) for p in params])
                if accumulate_grads:
                    self.grad_shard[: flat.numel()] += flat
                else:
                    self.grad_shard[: flat.numel()] = flat
        """,
    ),
    # ------------------------------ 3: a write inferred from where main_grad points
    Variant(
        3,
        "unwritten-view-kept-when-main-grad-is-the-view",
        """
        def drain(self, params):
            for p in params:
                if p.grad is not None:
                    continue
                view = self.buffer.main_grad_view(p)
                if p.main_grad is not view:  # bug
                    view.zero_()
        """,
        """
        def drain(self, params):
            for p in params:
                if p.grad is not None:
                    continue
                view = self.buffer.main_grad_view(p)
                if not getattr(p, "grad_added_to_main_grad", False):
                    view.zero_()
        """,
    ),
    Variant(
        3,
        "early-return-on-same-storage",
        """
        def zero_unwritten(param, bucket):
            mg = bucket.get_main_grad(param)
            if mg.untyped_storage().data_ptr() == param.main_grad.data_ptr():  # bug
                return
            mg.zero_()
        """,
        """
        def zero_unwritten(param, bucket):
            mg = bucket.get_main_grad(param)
            if param.grad_added_to_main_grad:
                return
            mg.zero_()
        """,
    ),
    # ------------------------------ declared misses
    Variant(
        3,
        "flag-consumed-and-left-set",
        """
        def reduce_grads(params):
            for p in params:
                if getattr(p, "grad_added_to_main_grad", False):  # bug
                    p.grad = None
                    continue
                p.get_main_grad().add_(p.grad)
        """,
        """
        def reduce_grads(params):
            for p in params:
                if getattr(p, "grad_added_to_main_grad", False):
                    p.grad = None
                    p.grad_added_to_main_grad = False
                    continue
                p.get_main_grad().add_(p.grad)
                p.grad_added_to_main_grad = False
        """,
        unseen=(
            "a flag read and never cleared by its consumer: Megatron's DDP hook reads it and "
            "clears it once per step in another method, which is right; telling the two "
            "apart needs when the buffer is recycled (Autumn1998/Megatron-LM 039b900a)"
        ),
    ),
    Variant(
        5,
        "graph-replay-of-fused-backward-without-flag",
        """
        class Graphed(torch.autograd.Function):
            @staticmethod
            def backward(ctx, *grads):
                for static, grad in zip(static_grad_outputs, grads):
                    static.copy_(grad)
                bwd_graph.replay()  # bug
                return tuple(g.detach() for g in static_grad_inputs)


        def wgrad(weight, x, dy):
            weight.main_grad.add_(dy.t() @ x)
        """,
        """
        class Graphed(torch.autograd.Function):
            @staticmethod
            def backward(ctx, *grads):
                for static, grad in zip(static_grad_outputs, grads):
                    static.copy_(grad)
                bwd_graph.replay()
                for param in module_params:
                    if hasattr(param, "grad_added_to_main_grad"):
                        param.grad_added_to_main_grad = True
                return tuple(g.detach() for g in static_grad_inputs)


        def wgrad(weight, x, dy):
            weight.main_grad.add_(dy.t() @ x)
        """,
        unseen=(
            "a CUDA-graph replay repeats whatever the captured backward wrote; whether that "
            "was a fused main_grad write is not in the file (TE #1204), and Transformer "
            "Engine's head replays without setting the flag on purpose (Megatron's DDP keeps "
            "the flag set under CUDA graphs), so a rule would report its head"
        ),
    ),
)
