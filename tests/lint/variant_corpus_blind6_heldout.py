"""The held-out part of the sixth blind corpus (variant_corpus_blind6.py): the last variant
of each class in the order they were written, kept out of the repository while three people
changed the rules for the other 16. Blind with the rules at c070693: 1 of 8 caught; after that
round: 2 of 8, no twin reported. Five of the six misses were then taken as development
material (no longer held out): the plain-spelling rewrite, a mark on the other side of the
write's own test, the methods that copy values in, a generator ``backward_dw``, a fetch in a
dropped lazy iterator and a free function handed an owned module now catch them (7 of 8);
the last, a hook handed to ``ExitStack.callback``, since the probes of branch h-probes (a
callback of an exit stack fires where its ``with`` block ends: 8 of 8).

Written blind (H-blind6) from issue #19's class descriptions, CONTRACT.md, the two seeds and
the way other codebases spell these things (torchtitan-style grouped experts, DeepSpeed MoE,
NeMo / Megatron-Bridge adapters, custom Triton ``gmm`` kernels, apex), without reading the
linter's rules. Same format as variant_corpus.py.
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------- 1 (new spelling): match statement binds the saved FP8 copy
    Variant(
        1,
        "blind6-match-case-saved-fp8-copy-is-gemm-out",
        """
        def fused_expert_backward(ctx, dy: torch.Tensor):
            match ctx.saved_tensors:
                case (x, w_saved) if ctx.fp8:
                    dx = fp8_gemm(dy, w_saved, layout="NN")
                case (x, w_saved):
                    dx = dy @ w_saved
            owner = ctx.owner_weight
            if not ctx.fuse_wgrad_accumulation:
                return dx, (dy.t() @ x).to(owner.dtype)
            overwrite = getattr(owner, "overwrite_main_grad", False)
            general_gemm(x, dy, out=w_saved.main_grad, accumulate=not overwrite)  # bug
            owner.grad_added_to_main_grad = True
            zero = getattr(owner, "zero_out_wgrad", False)
            return dx, get_dummy_wgrad(list(owner.shape), owner.dtype, zero=zero)
        """,
        """
        def fused_expert_backward(ctx, dy: torch.Tensor):
            match ctx.saved_tensors:
                case (x, w_saved) if ctx.fp8:
                    dx = fp8_gemm(dy, w_saved, layout="NN")
                case (x, w_saved):
                    dx = dy @ w_saved
            owner = ctx.owner_weight
            if not ctx.fuse_wgrad_accumulation:
                return dx, (dy.t() @ x).to(owner.dtype)
            overwrite = getattr(owner, "overwrite_main_grad", False)
            general_gemm(x, dy, out=owner.main_grad, accumulate=not overwrite)
            owner.grad_added_to_main_grad = True
            zero = getattr(owner, "zero_out_wgrad", False)
            return dx, get_dummy_wgrad(list(owner.shape), owner.dtype, zero=zero)
        """,
    ),
    # ------------------------------- 2 (new spelling): register_parameter after onload
    Variant(
        2,
        "blind6-register-parameter-after-onload",
        """
        def onload_expert_weights(module: nn.Module, device: torch.device) -> None:
            for name, p in list(module.named_parameters(recurse=False)):
                if p.device != device:
                    onloaded = p.to(device, non_blocking=True)
                    module.register_parameter(name, nn.Parameter(onloaded))  # bug


        class OffloadedGroupedMLP(nn.Module):
            def forward(self, x, m_splits):
                onload_expert_weights(self.fc1, x.device)
                onload_expert_weights(self.fc2, x.device)
                # fc1/fc2 were built with fuse_wgrad_accumulation=True: backward writes p.main_grad
                return self.fc2(self.act(self.fc1(x, m_splits)), m_splits)
        """,
        """
        def onload_expert_weights(module: nn.Module, device: torch.device) -> None:
            for name, p in list(module.named_parameters(recurse=False)):
                if p.device != device:
                    onloaded = p.data.to(device, non_blocking=True)
                    p.data = onloaded


        class OffloadedGroupedMLP(nn.Module):
            def forward(self, x, m_splits):
                onload_expert_weights(self.fc1, x.device)
                onload_expert_weights(self.fc2, x.device)
                # fc1/fc2 were built with fuse_wgrad_accumulation=True: backward writes p.main_grad
                return self.fc2(self.act(self.fc1(x, m_splits)), m_splits)
        """,
    ),
    # ------------------------------- 3 (new spelling): flag set through vars() on the unfused path
    Variant(
        3,
        "blind6-vars-update-marks-on-the-unfused-path",
        """
        def expert_wgrad(w: nn.Parameter, x: torch.Tensor, dy: torch.Tensor, *, fused: bool):
            if fused:
                overwrite = getattr(w, "overwrite_main_grad", False)
                wgrad_gemm_fp32(x, dy, w.main_grad, accumulate=not overwrite)
                vars(w)["grad_added_to_main_grad"] = True
                zero = getattr(w, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(w.shape), w.dtype, zero=zero)
            # unfused path: plain autograd gradient
            vars(w).update(grad_added_to_main_grad=True)  # bug
            return (dy.t() @ x).to(w.dtype)
        """,
        """
        def expert_wgrad(w: nn.Parameter, x: torch.Tensor, dy: torch.Tensor, *, fused: bool):
            if fused:
                overwrite = getattr(w, "overwrite_main_grad", False)
                wgrad_gemm_fp32(x, dy, w.main_grad, accumulate=not overwrite)
                vars(w)["grad_added_to_main_grad"] = True
                zero = getattr(w, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(w.shape), w.dtype, zero=zero)
            # unfused path: plain autograd gradient
            return (dy.t() @ x).to(w.dtype)
        """,
    ),
    # ------------------------------- 4 (new spelling): index_copy_ of the active experts' wgrads
    Variant(
        4,
        "blind6-index-copy-active-experts-into-main-grad",
        """
        def scatter_expert_wgrads(weight: nn.Parameter, tokens_per_expert: torch.Tensor, dw):
            # dw: [num_active, out, in] for the experts that received tokens
            active = torch.nonzero(tokens_per_expert, as_tuple=True)[0]
            view = weight.main_grad.view(weight.shape)
            view.index_copy_(0, active, dw.float())  # bug
            weight.grad_added_to_main_grad = True
            zero = getattr(weight, "zero_out_wgrad", False)
            return get_dummy_wgrad(list(weight.shape), weight.dtype, zero=zero)
        """,
        """
        def scatter_expert_wgrads(weight: nn.Parameter, tokens_per_expert: torch.Tensor, dw):
            # dw: [num_active, out, in] for the experts that received tokens
            active = torch.nonzero(tokens_per_expert, as_tuple=True)[0]
            view = weight.main_grad.view(weight.shape)
            if getattr(weight, "overwrite_main_grad", False):
                view.zero_()
            view.index_add_(0, active, dw.float())
            weight.grad_added_to_main_grad = True
            zero = getattr(weight, "zero_out_wgrad", False)
            return get_dummy_wgrad(list(weight.shape), weight.dtype, zero=zero)
        """,
    ),
    # ------------------------------- 5 (new spelling): hooks queued on an ExitStack
    Variant(
        5,
        "blind6-exit-stack-callback-fires-hooks-unmarked",
        """
        class DeferredExpertWgrad:
            def backward_dw(self) -> None:
                with contextlib.ExitStack() as stack:
                    for w in self._pending:
                        stack.callback(self._grad_acc_hooks[w])  # bug
                        x, dy, sizes = self._store.pop(w)
                        overwrite = getattr(w, "overwrite_main_grad", False)
                        gmm_wgrad(x, dy, sizes, out=w.main_grad, accumulate=not overwrite)
                self._pending.clear()
        """,
        """
        class DeferredExpertWgrad:
            def backward_dw(self) -> None:
                with contextlib.ExitStack() as stack:
                    for w in self._pending:
                        stack.callback(self._grad_acc_hooks[w])
                        x, dy, sizes = self._store.pop(w)
                        overwrite = getattr(w, "overwrite_main_grad", False)
                        gmm_wgrad(x, dy, sizes, out=w.main_grad, accumulate=not overwrite)
                        w.grad_added_to_main_grad = True
                self._pending.clear()
        """,
    ),
    # ------------------------------- 6 (new spelling): backward_dw is a generator, never iterated
    Variant(
        6,
        "blind6-generator-backward-dw-never-runs",
        """
        class ExpertStack(nn.Module):
            def __init__(self, cfg: MoEConfig):
                super().__init__()
                self.layers = nn.ModuleList(
                    GroupedLinear(cfg.num_experts, d_in, d_out, delay_wgrad_compute=cfg.delay)
                    for d_in, d_out in cfg.projections
                )

            def backward_dw(self):
                # schedule calls module.backward_dw() once per microbatch after dgrad
                for layer in reversed(self.layers):
                    yield layer.backward_dw()  # bug
        """,
        """
        class ExpertStack(nn.Module):
            def __init__(self, cfg: MoEConfig):
                super().__init__()
                self.layers = nn.ModuleList(
                    GroupedLinear(cfg.num_experts, d_in, d_out, delay_wgrad_compute=cfg.delay)
                    for d_in, d_out in cfg.projections
                )

            def backward_dw(self):
                # schedule calls module.backward_dw() once per microbatch after dgrad
                for layer in reversed(self.layers):
                    layer.backward_dw()
        """,
    ),
    # ------------------------------- 7 (new spelling): (real, dummy) indexed by the local
    Variant(
        7,
        "blind6-pair-indexed-by-downgraded-bool",
        """
        def linear_wgrad(ctx, x: torch.Tensor, dy: torch.Tensor, weight: nn.Parameter):
            use_main_grad = bool(ctx.fuse_wgrad_accumulation)
            accumulate = use_main_grad and not getattr(weight, "overwrite_main_grad", False)
            wgrad = None
            if use_main_grad:
                general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
                weight.grad_added_to_main_grad = True
            else:
                wgrad = (dy.t() @ x).to(weight.dtype)
            zero = getattr(weight, "zero_out_wgrad", False)
            dummy = get_dummy_wgrad(list(weight.shape), weight.dtype, zero=zero)
            return (wgrad, dummy)[accumulate]  # bug
        """,
        """
        def linear_wgrad(ctx, x: torch.Tensor, dy: torch.Tensor, weight: nn.Parameter):
            use_main_grad = bool(ctx.fuse_wgrad_accumulation)
            accumulate = use_main_grad and not getattr(weight, "overwrite_main_grad", False)
            wgrad = None
            if use_main_grad:
                general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
                weight.grad_added_to_main_grad = True
            else:
                wgrad = (dy.t() @ x).to(weight.dtype)
            zero = getattr(weight, "zero_out_wgrad", False)
            dummy = get_dummy_wgrad(list(weight.shape), weight.dtype, zero=zero)
            return (wgrad, dummy)[use_main_grad]
        """,
    ),
    # ------------------------------- 8 (new spelling): lazy map() of setattr never consumed
    Variant(
        8,
        "blind6-lazy-map-setattr-never-consumed",
        """
        class OpFuserExperts(nn.Module):
            def __init__(self, cfg: MoEConfig):
                super().__init__()
                G, H, F, fuse = cfg.num_experts, cfg.hidden, cfg.ffn, cfg.fuse_wgrad
                self.fused = te_ops.Sequential(
                    te_ops.GroupedLinear(G, H, F * 2, accumulate_into_main_grad=fuse),
                    te_ops.SwiGLU(),
                    te_ops.GroupedLinear(G, F, H, accumulate_into_main_grad=fuse),
                )

            def forward(self, x: torch.Tensor, split_sizes: torch.Tensor) -> torch.Tensor:
                fsdp_params = [p for p in self.fused.parameters() if hasattr(p, "get_main_grad")]
                map(lambda p: setattr(p, "main_grad", p.get_main_grad()), fsdp_params)  # bug
                return self.fused(x, split_sizes, split_sizes)
        """,
        """
        class OpFuserExperts(nn.Module):
            def __init__(self, cfg: MoEConfig):
                super().__init__()
                G, H, F, fuse = cfg.num_experts, cfg.hidden, cfg.ffn, cfg.fuse_wgrad
                self.fused = te_ops.Sequential(
                    te_ops.GroupedLinear(G, H, F * 2, accumulate_into_main_grad=fuse),
                    te_ops.SwiGLU(),
                    te_ops.GroupedLinear(G, F, H, accumulate_into_main_grad=fuse),
                )

            def forward(self, x: torch.Tensor, split_sizes: torch.Tensor) -> torch.Tensor:
                fsdp_params = [p for p in self.fused.parameters() if hasattr(p, "get_main_grad")]
                list(map(lambda p: setattr(p, "main_grad", p.get_main_grad()), fsdp_params))
                return self.fused(x, split_sizes, split_sizes)
        """,
    ),
)
