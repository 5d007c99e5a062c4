"""Further spellings of the facts added for the blind6 class 1 and 2 variants (which object;
rebinding), written for this file (not copied from the corpus; the variants themselves are
checked by test_variant_corpus.py):

* a holder class keeps the Parameter in one field and a tensor standing in for it in another
  (analysis/holders.py): main_grad read through the tensor field is GMLP030's, and a product
  of that field is the input gradient (no GMLP032);
* a weight-shaped allocation (the dummy) shaped like a stand-in (stand_ins.shape_source):
  GMLP030;
* a Parameter attribute of a submodule the module owns (``self.experts[i]``, a loop
  variable walking ``self.experts``) rebound on the forward path (forward_rebinds): GMLP015;
* the flat buffer the main_grads are views of (``grad_data``, ``flat_main_grad``) and its
  pieces (``split`` walked by a comprehension or loop) handed back as gradients: GMLP031.
"""

from __future__ import annotations

import textwrap

import pytest

from .support import lint_snippet


def _bug_lines(source: str) -> set[int]:
    lines = source.splitlines()
    return {i for i, line in enumerate(lines, start=1) if "# bug" in line}


# a: holders, b: dummy shaped like a stand-in, c: owned submodule rebound, d: flat storage
BUGGY = {
    "a1": """
        class ExpertState(NamedTuple):
            weight: torch.nn.Parameter
            rows: Tensor

            def grad_target(self):
                return self.rows.main_grad  # bug
    """,
    "a2": """
        class ShardHolder:
            def __init__(self, shard: nn.Parameter, unsharded: torch.Tensor):
                self.shard = shard
                self.unsharded = unsharded


        def accumulate_wgrad(holder: ShardHolder, wgrad):
            holder.unsharded.main_grad.add_(wgrad)  # bug
            holder.shard.grad_added_to_main_grad = True
    """,
    "a3": """
        @dataclasses.dataclass
        class Operand:
            master: "torch.nn.Parameter"
            lowp: "torch.Tensor"


        class _Mm(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, op: Operand):
                ctx.op = op
                ctx.save_for_backward(x)
                return x @ op.lowp.t()

            @staticmethod
            def backward(ctx, dy):
                (x,) = ctx.saved_tensors
                op = ctx.op
                dx = dy @ op.lowp
                overwrite = getattr(op.master, "overwrite_main_grad", False)
                fused_wgrad(x, dy, out=op.lowp.main_grad, accumulate=not overwrite)  # bug
                mark_main_grad_written(op.master)
                return dx, None
    """,
    "a4": """
        @dataclass
        class _Slot:
            param: Parameter
            full: Tensor

            def out_buffer(self):
                buf = self.full
                return buf.main_grad  # bug
    """,
    "b1": """
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            weight_fp8 = quantize(weight)
            dx = dy @ weight_fp8
            general_gemm(x, dy, out=weight.main_grad, accumulate=True)
            weight.grad_added_to_main_grad = True
            dummy = torch.zeros_like(weight_fp8)  # bug
            return dx, dummy
    """,
    "b2": """
        def grouped_backward(ctx, dy):
            x = ctx.x
            grads = []
            for shard in ctx.shards:
                gathered = all_gather_along_first_dim(shard)
                fused_wgrad_into(x, dy, shard.main_grad, accumulate=True)
                shard.grad_added_to_main_grad = True
                zero = getattr(shard, "zero_out_wgrad", False)
                grads.append(get_dummy_wgrad(list(gathered.size()), shard.dtype, zero=zero))  # bug
            return None, *grads
    """,
    "b3": """
        class _Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.w = w
                ctx.w_full = all_gather_along_first_dim(w)
                return x @ ctx.w_full

            @staticmethod
            def backward(ctx, dy):
                w = ctx.w
                wgrad_gemm(dy, out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
                return None, torch.zeros(ctx.w_full.shape, dtype=w.dtype, device=dy.device)  # bug
    """,
    "c1": """
        class GroupedMLP(nn.Module):
            def forward(self, x, counts):
                for i in range(self.num_local_experts):
                    w = self.local_experts[i].linear_fc1.weight
                    self.local_experts[i].linear_fc1.weight = torch.nn.Parameter(w.half())  # bug
                # the fused kernel writes each weight's main_grad
                return fused_grouped_mlp(x, counts, self.local_experts)
    """,
    "c2": """
        class ExpertBank(nn.Module):
            def forward(self, x):
                self._onload()
                return run_experts(x, self.experts)  # writes main_grad when fused

            def _onload(self):
                for idx, expert in enumerate(self.experts.children()):
                    host = self.host_copies[idx]
                    setattr(expert, "weight", nn.Parameter(host.to("cuda")))  # bug
    """,
    "c3": """
        class TiedHead(nn.Module):
            def __init__(self, proj):
                super().__init__()
                self.proj = proj
                self.register_forward_pre_hook(self._retie)

            def _retie(self, module, args):
                proj = self.proj
                fresh = Parameter(proj.weight.detach().clone())
                proj.register_parameter("weight", fresh)  # bug

            def forward(self, x):
                # main_grad of proj.weight is written by the fused linear
                return fused_linear(x, self.proj.weight)
    """,
    "d1": """
        def backward(ctx, dy):
            x = ctx.x
            dx = dy @ ctx.stacked_weight
            flat = ctx.bucket.grad_data
            grouped_wgrad(x, dy, out=flat, accumulate=True)
            grads = []
            for piece, w in zip(flat.split(ctx.numels), ctx.weights):
                w.grad_added_to_main_grad = True
                grads.append(piece.view(w.shape))
            return (dx, *grads)  # bug
    """,
    "d2": """
        class _Gmm(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                x, sizes = ctx.saved_tensors
                buf = ctx.main_grad_buffer
                gmm_wgrad(x, dy, sizes, out=buf, accumulate=True)
                for w in ctx.weights:
                    w.grad_added_to_main_grad = True
                return None, None, *[c for c in buf.chunk(len(ctx.weights))]  # bug
    """,
    "d3": """
        def backward(ctx, grad_output):
            inp = ctx.inp
            fc1, fc2 = ctx.fc1_weight, ctx.fc2_weight
            dgrad = grad_output @ ctx.weight_cat
            storage = ctx.flat_main_grad.view(2, -1)
            wgrad_into(inp, grad_output, out=storage, accumulate=True)
            fc1.grad_added_to_main_grad = True
            fc2.grad_added_to_main_grad = True
            halves = storage.unbind(0)
            return dgrad, halves[0].view_as(fc1), halves[1].view_as(fc2)  # bug
    """,
    "b5": """
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            w_gathered = all_gather_along_first_dim(w)
            dx = dy @ w_gathered
            fused_wgrad_into(x, dy, w.main_grad, accumulate=True)
            w.grad_added_to_main_grad = True
            return dx, torch.zeros(w_gathered.shape[0], w_gathered.size(1), dtype=w.dtype)  # bug
    """,
    "c4": """
        class Experts(nn.Module):
            def forward(self, x):
                # fused path: each weight's main_grad is written in backward
                for expert in self.experts:
                    expert._parameters["weight"] = nn.Parameter(expert.weight.half())  # bug
                return grouped(x, [e.weight for e in self.experts])
    """,
    "d4": """
        def backward(ctx, dy):
            x = ctx.x
            dx = dy @ ctx.weight_all
            flat = ctx.buffers.flat_main_grad
            kernel_dw(x, dy, out=flat, accumulate=True)
            for w in ctx.weights:
                w.grad_added_to_main_grad = True
            pieces = torch.split(flat, [w.numel() for w in ctx.weights])
            return (dx, *pieces)  # bug
    """,
    "c5": """
        class DenseExperts(nn.Module):
            def forward(self, x):
                fc = self.linear_fc2
                if self.cast_on_forward:
                    vars(fc)["weight"] = torch.nn.Parameter(fc.weight.to(self.dtype))  # bug
                return fused_mm(x, fc.weight)  # its backward adds into weight.main_grad
    """,
    "d5": """
        class _Fused(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                flat = ctx.store.main_grad_buffer
                dgrad = dy @ ctx.weight_stack
                wgrad_kernel(ctx.x, dy, out=flat, accumulate=True)
                for p in ctx.params:
                    p.grad_added_to_main_grad = True
                sizes = [p.numel() for p in ctx.params]
                views = map(lambda c, p: c.view(p.shape), flat.split(sizes), ctx.params)
                return dgrad, *views  # bug
    """,
}

CORRECT = {
    "a1": """
        class ExpertState(NamedTuple):
            weight: torch.nn.Parameter
            rows: Tensor

            def grad_target(self):
                return self.weight.main_grad
    """,
    "a2": """
        class ShardHolder:
            def __init__(self, shard: nn.Parameter, unsharded: torch.Tensor):
                self.shard = shard
                self.unsharded = unsharded


        def accumulate_wgrad(holder: ShardHolder, wgrad):
            holder.shard.main_grad.add_(wgrad)
            holder.shard.grad_added_to_main_grad = True
    """,
    "a3": """
        @dataclasses.dataclass
        class Operand:
            master: "torch.nn.Parameter"
            lowp: "torch.Tensor"


        class _Mm(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, op: Operand):
                ctx.op = op
                ctx.save_for_backward(x)
                return x @ op.lowp.t()

            @staticmethod
            def backward(ctx, dy):
                (x,) = ctx.saved_tensors
                op = ctx.op
                dx = dy @ op.lowp
                overwrite = getattr(op.master, "overwrite_main_grad", False)
                fused_wgrad(x, dy, out=op.master.main_grad, accumulate=not overwrite)
                mark_main_grad_written(op.master)
                return dx, None
    """,
    "a4": """
        @dataclass
        class _Slot:
            param: Parameter
            full: Tensor

            def out_buffer(self):
                buf = self.param
                return buf.main_grad
    """,
    "b1": """
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            weight_fp8 = quantize(weight)
            dx = dy @ weight_fp8
            general_gemm(x, dy, out=weight.main_grad, accumulate=True)
            weight.grad_added_to_main_grad = True
            dummy = torch.zeros_like(weight)
            return dx, dummy
    """,
    "b2": """
        def grouped_backward(ctx, dy):
            x = ctx.x
            grads = []
            for shard in ctx.shards:
                gathered = all_gather_along_first_dim(shard)
                fused_wgrad_into(x, dy, shard.main_grad, accumulate=True)
                shard.grad_added_to_main_grad = True
                zero = getattr(shard, "zero_out_wgrad", False)
                grads.append(get_dummy_wgrad(list(shard.size()), shard.dtype, zero=zero))
            return None, *grads
    """,
    "b3": """
        class _Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.w = w
                ctx.w_full = all_gather_along_first_dim(w)
                return x @ ctx.w_full

            @staticmethod
            def backward(ctx, dy):
                w = ctx.w
                wgrad_gemm(dy, out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
                return None, torch.zeros(w.shape, dtype=w.dtype, device=dy.device)
    """,
    "b4": """
        class GMMFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, original_weight, x, weight, group_list):
                ctx.save_for_backward(x, weight, original_weight)
                return gmm(x, weight, group_list)

            @staticmethod
            def backward(ctx, grad_outputs):
                x, weight, original_weight = ctx.saved_tensors
                dx = gmm_backward(grad_outputs, weight)
                groupmatmul_add_fp32(x, grad_outputs, original_weight.main_grad)
                if hasattr(original_weight, "grad_added_to_main_grad"):
                    grad_weight = torch.zeros(weight.shape, dtype=x.dtype, device=x.device)
                    original_weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
                return None, dx, grad_weight, None
    """,
    "c1": """
        class GroupedMLP(nn.Module):
            def forward(self, x, counts):
                for i in range(self.num_local_experts):
                    w = self.local_experts[i].linear_fc1.weight
                    self.local_experts[i].linear_fc1.weight.data = w.data.half()
                # the fused kernel writes each weight's main_grad
                return fused_grouped_mlp(x, counts, self.local_experts)
    """,
    "c2": """
        class ExpertBank(nn.Module):
            def forward(self, x):
                self._onload()
                return run_experts(x, self.experts)  # writes main_grad when fused

            def _onload(self):
                for idx, expert in enumerate(self.experts.children()):
                    host = self.host_copies[idx]
                    expert.weight.data.copy_(host, non_blocking=True)
    """,
    "c3": """
        class TiedHead(nn.Module):
            def __init__(self, proj):
                super().__init__()
                self.proj = proj
                self.register_forward_pre_hook(self._retie)

            def _retie(self, module, args):
                proj = self.proj
                if proj.weight is None:
                    proj.register_parameter("weight", Parameter(torch.empty(self.shape)))

            def forward(self, x):
                # main_grad of proj.weight is written by the fused linear
                return fused_linear(x, self.proj.weight)
    """,
    "d1": """
        def backward(ctx, dy):
            x = ctx.x
            dx = dy @ ctx.stacked_weight
            flat = ctx.bucket.grad_data
            grouped_wgrad(x, dy, out=flat, accumulate=True)
            grads = []
            for piece, w in zip(flat.split(ctx.numels), ctx.weights):
                w.grad_added_to_main_grad = True
                grads.append(torch.zeros_like(w))
            return (dx, *grads)
    """,
    "d2": """
        class _Gmm(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                x, sizes = ctx.saved_tensors
                buf = ctx.main_grad_buffer
                gmm_wgrad(x, dy, sizes, out=buf, accumulate=True)
                for w in ctx.weights:
                    w.grad_added_to_main_grad = True
                ws = ctx.weights
                dummies = [get_dummy_wgrad(list(w.shape), w.dtype, w.zero_out_wgrad) for w in ws]
                return None, None, *dummies
    """,
    "d3": """
        def backward(ctx, grad_output):
            inp = ctx.inp
            fc1, fc2 = ctx.fc1_weight, ctx.fc2_weight
            dgrad = grad_output @ ctx.weight_cat
            storage = ctx.flat_main_grad.view(2, -1)
            wgrad_into(inp, grad_output, out=storage, accumulate=True)
            fc1.grad_added_to_main_grad = True
            fc2.grad_added_to_main_grad = True
            halves = storage.unbind(0)
            return dgrad, fc1.new_zeros(fc1.shape), fc2.new_zeros(fc2.shape)
    """,
    "b5": """
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            w_gathered = all_gather_along_first_dim(w)
            dx = dy @ w_gathered
            fused_wgrad_into(x, dy, w.main_grad, accumulate=True)
            w.grad_added_to_main_grad = True
            return dx, torch.zeros(*w.shape, dtype=w.dtype)
    """,
    "c4": """
        class Experts(nn.Module):
            def forward(self, x):
                # fused path: each weight's main_grad is written in backward
                for expert in self.experts:
                    expert.weight.data = expert.weight.data.to(torch.bfloat16)
                return grouped(x, [e.weight for e in self.experts])
    """,
    "d4": """
        def backward(ctx, dy):
            x = ctx.x
            dx = dy @ ctx.weight_all
            flat = ctx.buffers.flat_main_grad
            kernel_dw(x, dy, out=flat, accumulate=True)
            for w in ctx.weights:
                w.grad_added_to_main_grad = True
            pieces = torch.split(flat, [w.numel() for w in ctx.weights])
            return (dx, *[torch.zeros_like(w) for w in ctx.weights])
    """,
    "c5": """
        class DenseExperts(nn.Module):
            def forward(self, x):
                fc = self.linear_fc2
                if self.cast_on_forward:
                    fc.weight.data = fc.weight.data.to(self.dtype)
                return fused_mm(x, fc.weight)  # its backward adds into weight.main_grad
    """,
    "d5": """
        class _Fused(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                flat = ctx.store.main_grad_buffer
                dgrad = dy @ ctx.weight_stack
                wgrad_kernel(ctx.x, dy, out=flat, accumulate=True)
                for p in ctx.params:
                    p.grad_added_to_main_grad = True
                sizes = [p.numel() for p in ctx.params]
                views = map(lambda p: torch.zeros_like(p), ctx.params)
                return dgrad, *views
    """,
}


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_own_spelling_caught_on_its_line(name):
    findings = lint_snippet(BUGGY[name])
    source = textwrap.dedent(BUGGY[name]).lstrip("\n")
    assert {f.line for f in findings} & _bug_lines(source), findings


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_own_correct_spelling_clean(name):
    assert lint_snippet(CORRECT[name]) == []
