"""Blind class variants (H-blind6): written from issue #19's class descriptions, CONTRACT.md,
the two seeds and the way other codebases spell these things (torchtitan-style grouped
experts, DeepSpeed MoE, NeMo / Megatron-Bridge adapters, custom Triton ``gmm`` kernels, apex),
without reading the linter's rules, to measure whether gmlp-lint finds the class rather than
the instances its rules were written from. The sixth blind corpus. Emphasis on realism: type
hints, dataclass configs, helpers split across methods, early returns, loops over experts.
Per class two variants in the style of other codebases and one in a spelling no earlier corpus
uses (``match`` statements, ``register_parameter``, ``vars()``, ``index_copy_``,
``ExitStack.callback``, a generator ``backward_dw``, a tuple indexed by a bool, a lazy ``map``).
Same format as variant_corpus.py. Split after the blind measurement: the last variant of each
class is held out from the people who change the rules (variant_corpus_blind6_heldout.py), so
that recall can be measured again on variants nobody tuned against.
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------- 1: dataclass helper hands back the gathered copy's buffer
    Variant(
        1,
        "blind6-dataclass-slot-wgrad-buffer-from-gathered-weight",
        """
        @dataclass
        class _ExpertSlot:
            param: torch.nn.Parameter
            full: torch.Tensor  # all-gathered [G, out, in] weight used by the forward

            def wgrad_buffer(self) -> torch.Tensor:
                return self.full.main_grad  # bug


        class _GroupedExpertMM(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, offsets, param, slot: _ExpertSlot):
                ctx.save_for_backward(x, offsets)
                ctx.slot = slot
                return torch._grouped_mm(x, slot.full.transpose(-2, -1), offs=offsets)

            @staticmethod
            def backward(ctx, grad_out):
                x, offsets = ctx.saved_tensors
                slot = ctx.slot
                dx = torch._grouped_mm(grad_out, slot.full, offs=offsets)
                overwrite = getattr(slot.param, "overwrite_main_grad", False)
                out = slot.wgrad_buffer()
                grouped_wgrad(x, grad_out, offsets, out=out, accumulate=not overwrite)
                slot.param.grad_added_to_main_grad = True
                zero = getattr(slot.param, "zero_out_wgrad", False)
                dummy = get_dummy_wgrad(list(slot.param.shape), slot.param.dtype, zero=zero)
                return dx, None, dummy, None
        """,
        """
        @dataclass
        class _ExpertSlot:
            param: torch.nn.Parameter
            full: torch.Tensor  # all-gathered [G, out, in] weight used by the forward

            def wgrad_buffer(self) -> torch.Tensor:
                return self.param.main_grad


        class _GroupedExpertMM(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, offsets, param, slot: _ExpertSlot):
                ctx.save_for_backward(x, offsets)
                ctx.slot = slot
                return torch._grouped_mm(x, slot.full.transpose(-2, -1), offs=offsets)

            @staticmethod
            def backward(ctx, grad_out):
                x, offsets = ctx.saved_tensors
                slot = ctx.slot
                dx = torch._grouped_mm(grad_out, slot.full, offs=offsets)
                overwrite = getattr(slot.param, "overwrite_main_grad", False)
                out = slot.wgrad_buffer()
                grouped_wgrad(x, grad_out, offsets, out=out, accumulate=not overwrite)
                slot.param.grad_added_to_main_grad = True
                zero = getattr(slot.param, "zero_out_wgrad", False)
                dummy = get_dummy_wgrad(list(slot.param.shape), slot.param.dtype, zero=zero)
                return dx, None, dummy, None
        """,
    ),
    # ------------------------------- 1: dummy sized from the all-gathered weight, not the shard
    Variant(
        1,
        "blind6-dummy-shaped-like-unsharded-weight",
        """
        class _ShardedExpertLinear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, inp, m_splits, weight_shard, gather_fn, fuse_wgrad: bool):
                full_weight = gather_fn(weight_shard)
                ctx.save_for_backward(inp, full_weight)
                ctx.shard, ctx.m_splits, ctx.fuse_wgrad = weight_shard, m_splits, fuse_wgrad
                return grouped_mm(inp, full_weight, m_splits)

            @staticmethod
            def backward(ctx, grad_out):
                inp, full_weight = ctx.saved_tensors
                shard = ctx.shard
                dgrad = grouped_mm(grad_out, full_weight, ctx.m_splits, trans_b=True)
                if ctx.fuse_wgrad:
                    overwrite = getattr(shard, "overwrite_main_grad", False)
                    reduce_scatter_wgrad_into(
                        inp, grad_out, ctx.m_splits, shard.main_grad, accumulate=not overwrite
                    )
                    shard.grad_added_to_main_grad = True
                    dev = grad_out.device
                    wgrad = full_weight.new_zeros(full_weight.shape, device=dev)  # bug
                else:
                    full_wgrad = grouped_wgrad(inp, grad_out, ctx.m_splits)
                    wgrad = reduce_scatter(full_wgrad).to(shard.dtype)
                return dgrad, None, wgrad, None, None
        """,
        """
        class _ShardedExpertLinear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, inp, m_splits, weight_shard, gather_fn, fuse_wgrad: bool):
                full_weight = gather_fn(weight_shard)
                ctx.save_for_backward(inp, full_weight)
                ctx.shard, ctx.m_splits, ctx.fuse_wgrad = weight_shard, m_splits, fuse_wgrad
                return grouped_mm(inp, full_weight, m_splits)

            @staticmethod
            def backward(ctx, grad_out):
                inp, full_weight = ctx.saved_tensors
                shard = ctx.shard
                dgrad = grouped_mm(grad_out, full_weight, ctx.m_splits, trans_b=True)
                if ctx.fuse_wgrad:
                    overwrite = getattr(shard, "overwrite_main_grad", False)
                    reduce_scatter_wgrad_into(
                        inp, grad_out, ctx.m_splits, shard.main_grad, accumulate=not overwrite
                    )
                    shard.grad_added_to_main_grad = True
                    dev = grad_out.device
                    wgrad = shard.new_zeros(shard.shape, device=dev)
                else:
                    full_wgrad = grouped_wgrad(inp, grad_out, ctx.m_splits)
                    wgrad = reduce_scatter(full_wgrad).to(shard.dtype)
                return dgrad, None, wgrad, None, None
        """,
    ),
    # ------------------------------- 2: DeepSpeed-style expert loop re-wraps a weight
    Variant(
        2,
        "blind6-expert-loop-rewraps-weight-on-dtype-change",
        """
        class MOELayerExperts(nn.Module):
            def __init__(self, experts: nn.ModuleList, cfg: MoEConfig):
                super().__init__()
                self.deepspeed_experts = experts
                self.cfg = cfg

            def forward(self, tokens: torch.Tensor, tokens_per_expert: list[int]):
                for expert in self.deepspeed_experts:
                    if expert.weight.dtype != self.cfg.params_dtype:
                        dtype = self.cfg.params_dtype
                        expert.weight = nn.Parameter(expert.weight.to(dtype))  # bug
                weights = [e.weight for e in self.deepspeed_experts]
                # backward writes every weight's main_grad (gradient_accumulation_fusion)
                return FusedExpertGEMM.apply(
                    tokens, tokens_per_expert, self.cfg.gradient_accumulation_fusion, *weights
                )
        """,
        """
        class MOELayerExperts(nn.Module):
            def __init__(self, experts: nn.ModuleList, cfg: MoEConfig):
                super().__init__()
                self.deepspeed_experts = experts
                self.cfg = cfg

            def forward(self, tokens: torch.Tensor, tokens_per_expert: list[int]):
                for expert in self.deepspeed_experts:
                    if expert.weight.dtype != self.cfg.params_dtype:
                        dtype = self.cfg.params_dtype
                        expert.weight.data = expert.weight.data.to(dtype)
                weights = [e.weight for e in self.deepspeed_experts]
                # backward writes every weight's main_grad (gradient_accumulation_fusion)
                return FusedExpertGEMM.apply(
                    tokens, tokens_per_expert, self.cfg.gradient_accumulation_fusion, *weights
                )
        """,
    ),
    # ------------------------------- 2: views of the flat fp32 grad buffer handed back as grads
    Variant(
        2,
        "blind6-flat-buffer-split-views-returned-as-expert-grads",
        """
        class _TritonGroupedWgrad(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy: torch.Tensor):
                x, m_sizes = ctx.saved_tensors
                weights: tuple[torch.Tensor, ...] = ctx.weights
                dx = triton_gmm(dy, ctx.stacked_weight, m_sizes, trans_b=False)
                # fp32, exactly the experts' main_grads back to back (each one a view of it)
                flat = ctx.grad_buffer.flat_main_grad
                overwrite = getattr(weights[0], "overwrite_main_grad", False)
                triton_gmm_dw(x, dy, m_sizes, out=flat, accumulate=not overwrite)
                for w in weights:
                    w.grad_added_to_main_grad = True
                numels = [w.numel() for w in weights]
                grads = [c.view_as(w) for c, w in zip(flat.split(numels), weights)]  # bug
                return (dx, None, *grads)
        """,
        """
        class _TritonGroupedWgrad(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy: torch.Tensor):
                x, m_sizes = ctx.saved_tensors
                weights: tuple[torch.Tensor, ...] = ctx.weights
                dx = triton_gmm(dy, ctx.stacked_weight, m_sizes, trans_b=False)
                # fp32, exactly the experts' main_grads back to back (each one a view of it)
                flat = ctx.grad_buffer.flat_main_grad
                overwrite = getattr(weights[0], "overwrite_main_grad", False)
                triton_gmm_dw(x, dy, m_sizes, out=flat, accumulate=not overwrite)
                for w in weights:
                    w.grad_added_to_main_grad = True
                grads = [
                    get_dummy_wgrad(
                        list(w.shape), w.dtype, zero=getattr(w, "zero_out_wgrad", False)
                    )
                    for w in weights
                ]
                return (dx, None, *grads)
        """,
    ),
    # ------------------------------- 3: write without flag, real grad handed on (DeepSpeed-style)
    Variant(
        3,
        "blind6-expert-main-grad-written-real-grad-returned",
        """
        class _ExpertLinearFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output: torch.Tensor):
                (inp,) = ctx.saved_tensors
                expert_w = ctx.expert_w
                dgrad = grad_output @ expert_w
                dy2d = grad_output.reshape(-1, grad_output.shape[-1])
                wgrad = dy2d.t() @ inp.reshape(-1, inp.shape[-1])
                if ctx.gradient_accumulation_fusion:
                    if getattr(expert_w, "overwrite_main_grad", False):
                        expert_w.main_grad.copy_(wgrad)
                    else:
                        expert_w.main_grad.add_(wgrad.float())
                    return dgrad, wgrad.to(expert_w.dtype), None  # bug
                return dgrad, wgrad.to(expert_w.dtype), None
        """,
        """
        class _ExpertLinearFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output: torch.Tensor):
                (inp,) = ctx.saved_tensors
                expert_w = ctx.expert_w
                dgrad = grad_output @ expert_w
                dy2d = grad_output.reshape(-1, grad_output.shape[-1])
                wgrad = dy2d.t() @ inp.reshape(-1, inp.shape[-1])
                if ctx.gradient_accumulation_fusion:
                    if getattr(expert_w, "overwrite_main_grad", False):
                        expert_w.main_grad.copy_(wgrad)
                    else:
                        expert_w.main_grad.add_(wgrad.float())
                    expert_w.grad_added_to_main_grad = True
                    zero = getattr(expert_w, "zero_out_wgrad", False)
                    dummy = get_dummy_wgrad(list(expert_w.shape), expert_w.dtype, zero=zero)
                    return dgrad, dummy, None
                return dgrad, wgrad.to(expert_w.dtype), None
        """,
    ),
    # ------------------------------- 3: both fc weights marked, only fc2's main_grad written
    Variant(
        3,
        "blind6-fc1-and-fc2-marked-only-fc2-written",
        """
        def grouped_mlp_backward(ctx, dy: torch.Tensor):
            x, h, act = ctx.saved_tensors
            w1, w2 = ctx.fc1_weight, ctx.fc2_weight
            dact = gmm(dy, w2, ctx.batch_sizes)
            dh = swiglu_backward(dact, h)
            dx = gmm(dh, w1, ctx.batch_sizes)
            # fc2 (bf16): fused fp32 wgrad straight into main_grad
            overwrite = getattr(w2, "overwrite_main_grad", False)
            sizes = ctx.batch_sizes
            gmm_wgrad_into(act, dy, sizes, out=w2.main_grad, accumulate=not overwrite)
            # fc1 (fp8): plain grouped GEMM, handed to autograd
            dw1 = gmm(x, dh, ctx.batch_sizes, trans_a=True).to(w1.dtype)
            for w in (w1, w2):
                w.grad_added_to_main_grad = True  # bug
            zero = getattr(w2, "zero_out_wgrad", False)
            return dx, None, dw1, get_dummy_wgrad(list(w2.shape), w2.dtype, zero=zero)
        """,
        """
        def grouped_mlp_backward(ctx, dy: torch.Tensor):
            x, h, act = ctx.saved_tensors
            w1, w2 = ctx.fc1_weight, ctx.fc2_weight
            dact = gmm(dy, w2, ctx.batch_sizes)
            dh = swiglu_backward(dact, h)
            dx = gmm(dh, w1, ctx.batch_sizes)
            # fc2 (bf16): fused fp32 wgrad straight into main_grad
            overwrite = getattr(w2, "overwrite_main_grad", False)
            sizes = ctx.batch_sizes
            gmm_wgrad_into(act, dy, sizes, out=w2.main_grad, accumulate=not overwrite)
            # fc1 (fp8): plain grouped GEMM, handed to autograd
            dw1 = gmm(x, dh, ctx.batch_sizes, trans_a=True).to(w1.dtype)
            for w in (w2,):
                w.grad_added_to_main_grad = True
            zero = getattr(w2, "zero_out_wgrad", False)
            return dx, None, dw1, get_dummy_wgrad(list(w2.shape), w2.dtype, zero=zero)
        """,
    ),
    # ------------------------------- 4: torchtitan-style unbind loop copies into main_grad
    Variant(
        4,
        "blind6-grouped-mm-dw-unbound-and-copied-per-expert",
        """
        class GroupedExperts(nn.Module):
            def _write_expert_grads(self, dw: torch.Tensor) -> None:
                # dw: [num_experts, out, in] fp32 from torch._grouped_mm
                for w, g in zip(self.expert_weights, dw.unbind(0)):
                    w.main_grad.copy_(g)  # bug
                    w.grad_added_to_main_grad = True

            def _finish_backward(self, x: torch.Tensor, dy: torch.Tensor, offs: torch.Tensor):
                dw = torch._grouped_mm(dy.t(), x, offs=offs, out_dtype=torch.float32)
                self._write_expert_grads(dw)
                return [
                    get_dummy_wgrad(
                        list(w.shape), w.dtype, zero=getattr(w, "zero_out_wgrad", False)
                    )
                    for w in self.expert_weights
                ]
        """,
        """
        class GroupedExperts(nn.Module):
            def _write_expert_grads(self, dw: torch.Tensor) -> None:
                # dw: [num_experts, out, in] fp32 from torch._grouped_mm
                for w, g in zip(self.expert_weights, dw.unbind(0)):
                    if getattr(w, "overwrite_main_grad", False):
                        w.main_grad.copy_(g)
                    else:
                        w.main_grad.add_(g)
                    w.grad_added_to_main_grad = True

            def _finish_backward(self, x: torch.Tensor, dy: torch.Tensor, offs: torch.Tensor):
                dw = torch._grouped_mm(dy.t(), x, offs=offs, out_dtype=torch.float32)
                self._write_expert_grads(dw)
                return [
                    get_dummy_wgrad(
                        list(w.shape), w.dtype, zero=getattr(w, "zero_out_wgrad", False)
                    )
                    for w in self.expert_weights
                ]
        """,
    ),
    # ------------------------------- 4: Triton launcher pins ACCUMULATE=False into main_grad
    Variant(
        4,
        "blind6-triton-launch-constexpr-accumulate-false",
        """
        def launch_gmm_dw(x: torch.Tensor, dy: torch.Tensor, m_sizes: torch.Tensor, weight):
            G, N, K = weight.shape
            out = weight.main_grad.view(G, N, K)
            def grid(meta):
                return (G, triton.cdiv(N, meta["BLOCK_N"]) * triton.cdiv(K, meta["BLOCK_K"]))

            _gmm_dw_kernel[grid](
                x, dy, out, m_sizes,
                N, K,
                x.stride(0), dy.stride(0),
                ACCUMULATE=False,  # bug
            )
            weight.grad_added_to_main_grad = True
        """,
        """
        def launch_gmm_dw(x: torch.Tensor, dy: torch.Tensor, m_sizes: torch.Tensor, weight):
            G, N, K = weight.shape
            out = weight.main_grad.view(G, N, K)
            def grid(meta):
                return (G, triton.cdiv(N, meta["BLOCK_N"]) * triton.cdiv(K, meta["BLOCK_K"]))

            _gmm_dw_kernel[grid](
                x, dy, out, m_sizes,
                N, K,
                x.stride(0), dy.stride(0),
                ACCUMULATE=not getattr(weight, "overwrite_main_grad", False),
            )
            weight.grad_added_to_main_grad = True
        """,
    ),
    # ------------------------------- 5: CUDA-graph replay fires DDP hooks by parameter name
    Variant(
        5,
        "blind6-graphed-experts-replay-fires-ddp-hooks-by-name",
        """
        class GraphedExpertsRunner:
            def __init__(self, experts: nn.Module, ddp_hooks: dict[str, Callable[..., None]]):
                self.params = dict(experts.named_parameters())
                self.ddp_hooks = ddp_hooks
                self.bwd_graph = torch.cuda.CUDAGraph()

            def backward(self, grad_out: torch.Tensor) -> torch.Tensor:
                self.static_grad_out.copy_(grad_out)
                # the captured backward wrote every expert weight's wgrad into its main_grad
                self.bwd_graph.replay()
                for name, param in self.params.items():
                    self.ddp_hooks[name](param)  # bug
                return self.static_grad_in
        """,
        """
        class GraphedExpertsRunner:
            def __init__(self, experts: nn.Module, ddp_hooks: dict[str, Callable[..., None]]):
                self.params = dict(experts.named_parameters())
                self.ddp_hooks = ddp_hooks
                self.bwd_graph = torch.cuda.CUDAGraph()

            def backward(self, grad_out: torch.Tensor) -> torch.Tensor:
                self.static_grad_out.copy_(grad_out)
                # the captured backward wrote every expert weight's wgrad into its main_grad
                self.bwd_graph.replay()
                for name, param in self.params.items():
                    param.grad_added_to_main_grad = True
                    self.ddp_hooks[name](param)
                return self.static_grad_in
        """,
    ),
    # ------------------------------- 5: expert-parallel params reduced without the marking
    Variant(
        5,
        "blind6-expert-parallel-params-reduced-unmarked",
        """
        class MoEGradFinalizer:
            def after_fused_wgrad(self, params: Iterable[nn.Parameter]) -> None:
                \"\"\"Runs after the fused kernels wrote every param's main_grad.\"\"\"
                for p in params:
                    if getattr(p, "allreduce", True) is False:
                        # expert param: reduced over the expert-data-parallel group
                        self._expert_reduce_hook(p)  # bug
                        continue
                    p.grad_added_to_main_grad = True
                    self._dense_reduce_hook(p)
        """,
        """
        class MoEGradFinalizer:
            def after_fused_wgrad(self, params: Iterable[nn.Parameter]) -> None:
                \"\"\"Runs after the fused kernels wrote every param's main_grad.\"\"\"
                for p in params:
                    p.grad_added_to_main_grad = True
                    if getattr(p, "allreduce", True) is False:
                        # expert param: reduced over the expert-data-parallel group
                        self._expert_reduce_hook(p)
                        continue
                    self._dense_reduce_hook(p)
        """,
    ),
    # ------------------------------- 6: NeMo-style adapter subclass drops the base weights' dw
    Variant(
        6,
        "blind6-adapter-subclass-backward-dw-only-adapter",
        """
        class LoRAGroupedLinear(GroupedLinear):
            def __init__(self, num_experts: int, d_in: int, d_out: int, *, cfg: PEFTConfig):
                super().__init__(
                    num_experts,
                    d_in,
                    d_out,
                    fuse_wgrad_accumulation=cfg.gradient_accumulation_fusion,
                    delay_wgrad_compute=cfg.delay_wgrad_compute,
                )
                self.lora_a = nn.Linear(d_in, cfg.rank, bias=False)
                self.lora_b = nn.Linear(cfg.rank, d_out, bias=False)

            def backward_dw(self) -> None:  # bug
                with torch.cuda.nvtx.range("lora_grouped_backward_dw"):
                    for adapter in (self.lora_a, self.lora_b):
                        if hasattr(adapter, "backward_dw"):
                            adapter.backward_dw()
        """,
        """
        class LoRAGroupedLinear(GroupedLinear):
            def __init__(self, num_experts: int, d_in: int, d_out: int, *, cfg: PEFTConfig):
                super().__init__(
                    num_experts,
                    d_in,
                    d_out,
                    fuse_wgrad_accumulation=cfg.gradient_accumulation_fusion,
                    delay_wgrad_compute=cfg.delay_wgrad_compute,
                )
                self.lora_a = nn.Linear(d_in, cfg.rank, bias=False)
                self.lora_b = nn.Linear(cfg.rank, d_out, bias=False)

            def backward_dw(self) -> None:
                with torch.cuda.nvtx.range("lora_grouped_backward_dw"):
                    super().backward_dw()
                    for adapter in (self.lora_a, self.lora_b):
                        if hasattr(adapter, "backward_dw"):
                            adapter.backward_dw()
        """,
    ),
    # ------------------------------- 6: early return under recompute skips fc1's backward_dw
    Variant(
        6,
        "blind6-early-return-under-recompute-skips-fc1",
        """
        class TEGroupedExpertMLP(nn.Module):
            def __init__(self, cfg: MoEConfig):
                super().__init__()
                self.cfg = cfg
                kw = {"delay_wgrad_compute": cfg.delay_wgrad_compute}
                self.linear_fc1 = GroupedLinear(cfg.num_experts, cfg.hidden, 2 * cfg.ffn, **kw)
                self.linear_fc2 = GroupedLinear(cfg.num_experts, cfg.ffn, cfg.hidden, **kw)

            def backward_dw(self) -> None:
                if not self.cfg.delay_wgrad_compute:
                    return
                self.linear_fc2.backward_dw()
                if self.cfg.recompute_activation:
                    return  # bug
                self.linear_fc1.backward_dw()
        """,
        """
        class TEGroupedExpertMLP(nn.Module):
            def __init__(self, cfg: MoEConfig):
                super().__init__()
                self.cfg = cfg
                kw = {"delay_wgrad_compute": cfg.delay_wgrad_compute}
                self.linear_fc1 = GroupedLinear(cfg.num_experts, cfg.hidden, 2 * cfg.ffn, **kw)
                self.linear_fc2 = GroupedLinear(cfg.num_experts, cfg.ffn, cfg.hidden, **kw)

            def backward_dw(self) -> None:
                if not self.cfg.delay_wgrad_compute:
                    return
                self.linear_fc2.backward_dw()
                self.linear_fc1.backward_dw()
        """,
    ),
    # ------------------------------- 7: dummy-or-real in a return's conditional expression
    Variant(
        7,
        "blind6-return-ifexp-on-gemm-accumulate-local",
        """
        class _GmmWithMainGrad(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy: torch.Tensor):
                x, w_compute, batch_sizes = ctx.saved_tensors
                w = ctx.param
                cfg: FusedWgradConfig = ctx.cfg
                dx = gmm(dy, w_compute, batch_sizes)
                overwrite = getattr(w, "overwrite_main_grad", False)
                accumulate = cfg.accumulate_into_main_grad and not overwrite
                wgrad = None
                if cfg.accumulate_into_main_grad:
                    out = w.main_grad.view_as(w)
                    gmm_wgrad(x, dy, batch_sizes, out=out, accumulate=accumulate)
                    w.grad_added_to_main_grad = True
                else:
                    wgrad = gmm(x, dy, batch_sizes, trans_a=True).to(w.dtype)
                zero = getattr(w, "zero_out_wgrad", False)
                dummy = get_dummy_wgrad(list(w.shape), w.dtype, zero=zero)
                return dx, None, (dummy if accumulate else wgrad), None  # bug
        """,
        """
        class _GmmWithMainGrad(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy: torch.Tensor):
                x, w_compute, batch_sizes = ctx.saved_tensors
                w = ctx.param
                cfg: FusedWgradConfig = ctx.cfg
                dx = gmm(dy, w_compute, batch_sizes)
                overwrite = getattr(w, "overwrite_main_grad", False)
                accumulate = cfg.accumulate_into_main_grad and not overwrite
                wgrad = None
                if cfg.accumulate_into_main_grad:
                    out = w.main_grad.view_as(w)
                    gmm_wgrad(x, dy, batch_sizes, out=out, accumulate=accumulate)
                    w.grad_added_to_main_grad = True
                else:
                    wgrad = gmm(x, dy, batch_sizes, trans_a=True).to(w.dtype)
                zero = getattr(w, "zero_out_wgrad", False)
                dummy = get_dummy_wgrad(list(w.shape), w.dtype, zero=zero)
                into_main_grad = cfg.accumulate_into_main_grad
                return dx, None, (dummy if into_main_grad else wgrad), None
        """,
    ),
    # ------------------------------- 7: nested finisher returns the real grad on the local flag
    Variant(
        7,
        "blind6-nested-finisher-early-return-on-local-accumulate",
        """
        def make_expert_wgrad_fn(w: nn.Parameter, fuse_wgrad_accumulation: bool):
            overwrite = getattr(w, "overwrite_main_grad", False)
            accumulate = fuse_wgrad_accumulation and not overwrite

            def finish(x_e: torch.Tensor, dy_e: torch.Tensor) -> torch.Tensor:
                if fuse_wgrad_accumulation:
                    wgrad_gemm_into(x_e, dy_e, out=w.main_grad, accumulate=accumulate)
                if not accumulate:  # bug
                    return (dy_e.t() @ x_e).to(w.dtype)
                w.grad_added_to_main_grad = True
                zero = getattr(w, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(w.shape), w.dtype, zero=zero)

            return finish
        """,
        """
        def make_expert_wgrad_fn(w: nn.Parameter, fuse_wgrad_accumulation: bool):
            overwrite = getattr(w, "overwrite_main_grad", False)
            accumulate = fuse_wgrad_accumulation and not overwrite

            def finish(x_e: torch.Tensor, dy_e: torch.Tensor) -> torch.Tensor:
                if fuse_wgrad_accumulation:
                    wgrad_gemm_into(x_e, dy_e, out=w.main_grad, accumulate=accumulate)
                if not fuse_wgrad_accumulation:
                    return (dy_e.t() @ x_e).to(w.dtype)
                w.grad_added_to_main_grad = True
                zero = getattr(w, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(w.shape), w.dtype, zero=zero)

            return finish
        """,
    ),
    # ------------------------------- 8: pre-hook caches the fetched buffers in a dict
    Variant(
        8,
        "blind6-pre-hook-caches-fetched-buffers-in-a-dict",
        """
        class FusedGroupedMLP(nn.Module):
            def __init__(self, cfg: ExpertConfig):
                super().__init__()
                G, H, F, fuse = cfg.num_experts, cfg.hidden, cfg.ffn, cfg.fuse_wgrad
                self.ops = te_ops.Sequential(
                    te_ops.GroupedLinear(G, H, 2 * F, accumulate_into_main_grad=fuse),
                    te_ops.SwiGLU(),
                    te_ops.GroupedLinear(G, F, H, accumulate_into_main_grad=fuse),
                )
                self._main_grads: dict[str, torch.Tensor] = {}
                self.register_forward_pre_hook(self._expose_main_grads)

            def _expose_main_grads(self, module, args):
                # Megatron-FSDP: main_grad is None until fetched
                named = self.ops.named_parameters()
                fsdp = [(n, p) for n, p in named if hasattr(p, "get_main_grad")]
                self._main_grads = {n: p.get_main_grad() for n, p in fsdp}  # bug
        """,
        """
        class FusedGroupedMLP(nn.Module):
            def __init__(self, cfg: ExpertConfig):
                super().__init__()
                G, H, F, fuse = cfg.num_experts, cfg.hidden, cfg.ffn, cfg.fuse_wgrad
                self.ops = te_ops.Sequential(
                    te_ops.GroupedLinear(G, H, 2 * F, accumulate_into_main_grad=fuse),
                    te_ops.SwiGLU(),
                    te_ops.GroupedLinear(G, F, H, accumulate_into_main_grad=fuse),
                )
                self._main_grads: dict[str, torch.Tensor] = {}
                self.register_forward_pre_hook(self._expose_main_grads)

            def _expose_main_grads(self, module, args):
                # Megatron-FSDP: main_grad is None until fetched
                named = self.ops.named_parameters()
                fsdp = [(n, p) for n, p in named if hasattr(p, "get_main_grad")]
                for n, p in fsdp:
                    if getattr(p, "main_grad", None) is None:
                        p.main_grad = p.get_main_grad()
                    self._main_grads[n] = p.main_grad
        """,
    ),
    # ------------------------------- 8: hasattr guard never fires for FSDP's None main_grad
    Variant(
        8,
        "blind6-hasattr-guard-skips-fsdp-none-main-grad",
        """
        def build_fused_experts(cfg: MoEConfig) -> nn.Module:
            G, H, F = cfg.num_experts, cfg.hidden, cfg.ffn
            mlp = te_ops.Sequential(
                te_ops.GroupedLinear(G, H, F * 2, accumulate_into_main_grad=True),
                te_ops.SwiGLU(),
                te_ops.GroupedLinear(G, F, H, accumulate_into_main_grad=True),
            )

            def _pre_forward(module: nn.Module, _inputs) -> None:
                # params are wrapped by Megatron-FSDP, which sets main_grad = None until fetched
                for p in module.parameters():
                    if not hasattr(p, "main_grad"):  # bug
                        p.main_grad = p.get_main_grad()

            mlp.register_forward_pre_hook(_pre_forward)
            return mlp
        """,
        """
        def build_fused_experts(cfg: MoEConfig) -> nn.Module:
            G, H, F = cfg.num_experts, cfg.hidden, cfg.ffn
            mlp = te_ops.Sequential(
                te_ops.GroupedLinear(G, H, F * 2, accumulate_into_main_grad=True),
                te_ops.SwiGLU(),
                te_ops.GroupedLinear(G, F, H, accumulate_into_main_grad=True),
            )

            def _pre_forward(module: nn.Module, _inputs) -> None:
                # params are wrapped by Megatron-FSDP, which sets main_grad = None until fetched
                for p in module.parameters():
                    if getattr(p, "main_grad", None) is None and hasattr(p, "get_main_grad"):
                        p.main_grad = p.get_main_grad()

            mlp.register_forward_pre_hook(_pre_forward)
            return mlp
        """,
    ),
)
