"""The twenty-first blind corpus (H-blind21), held-out half: one main_grad bookkeeping variant
per class of issue #19, from other functions and files of the repositories the development half
(``variant_corpus_blind21``) used: ChenQiaoling00 Seq1F1B (the optimizer's embedding-grad
all-reduce), OpenSQZ MegatronApp (CUDA-graph capture, DDP's grad-buffer reset, the TE grouped
experts), axonn-ai axonn (the deferred gradient accumulation queue) and NVIDIA-NeMo RL (the
ModelOpt-quantization policy worker).

Sources (repo, commit, path, function):
- ChenQiaoling00/Seq1F1B f54b286c75d5510994cb3802d1a8a5c71124d59b
  megatron/optimizer/optimizer.py MegatronOptimizer.allreduce_word_embedding_grads
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/transformer/cuda_graphs.py _CudaGraphRunner.create_fwd_graph
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/transformer/cuda_graphs.py _CudaGraphRunner.create_bwd_graph
- axonn-ai/axonn 660a22464e64a19ccaf2cc0f00b46cfd2d8603bc
  axonn/intra_layer/overlap_communication.py accumulate_later / accumulate
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/distributed/distributed_data_parallel.py DistributedDataParallel.zero_grad_buffer
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/transformer/moe/experts.py TEGroupedMLP.__init__
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/transformer/cuda_graphs.py _CudaGraphRunner.get_input_grads
- NVIDIA-NeMo/RL 7ea279abfbeb698b092856d0dab61e7cf39bc909
  nemo_rl/modelopt/models/policy/workers/megatron_quant_policy_worker.py
  MegatronQuantPolicyWorker.__init__

Conventions: twins are the real code shortened (real names and idioms; docstrings, FP8 scale
bookkeeping, RNG-state registration and unrelated branches dropped). Adapted where the real code
lacks the main_grad feature a class is about, and said so here:
- axonn's ``accumulate()`` adds each pending gradient into ``param.grad``; the twin first adds it
  into ``param.main_grad`` when the parameter has one (as a Megatron-style DDP wrapper around
  axonn would need), the ``.grad`` path kept for parameters without one.
- MegatronApp's TEGroupedMLP has no ``backward_dw`` (the fork predates ``delay_wgrad_compute``);
  the twin gives it later Megatron-core's (flush ``linear_fc2`` then ``linear_fc1``).
- NeMo-RL's quantization worker is cut to the configuration check of its ``__init__``: ModelOpt
  wraps the TE linears so that the weight handed to the fused GEMM is a fake-quantized stand-in,
  hence gradient-accumulation fusion must be off there; Megatron-Bridge's default for it is True.
Bugs are written as ``_swap(twin, old, new)``: one passage of the twin replaced, the changed
line(s) carrying ``# bug`` (a dropped line marks the line that now stands in its place).
"""

# ruff: noqa: E501
from __future__ import annotations

from .variant_corpus import Variant


def _swap(twin: str, old: str, new: str) -> str:
    """The bug is the twin with one passage replaced; the passage must occur once."""
    assert twin.count(old) == 1, old
    return twin.replace(old, new)


# --- ChenQiaoling00/Seq1F1B f54b286c megatron/optimizer/optimizer.py
# MegatronOptimizer.allreduce_word_embedding_grads
_S1_EMBEDDING_ALLREDUCE = """
class MegatronOptimizer(ABC):
    def allreduce_word_embedding_grads(self, args):
        if mpu.is_rank_in_embedding_group(ignore_virtual=True) and \\
                mpu.get_pipeline_model_parallel_world_size() > 1:
            if mpu.is_pipeline_first_stage(ignore_virtual=True):
                unwrapped_model = self.models[0]
            elif mpu.is_pipeline_last_stage(ignore_virtual=True):
                unwrapped_model = self.models[-1]
            else:  # We do not support the interleaved schedule for T5 yet.
                unwrapped_model = self.models[0]
            unwrapped_model = unwrap_model(
                unwrapped_model, (torchDDP, LocalDDP, Float16Module))

            if unwrapped_model.share_embeddings_and_output_weights:
                weight = unwrapped_model.shared_embedding_or_output_weight()
                if args.DDP_impl == 'local':
                    grad = weight.main_grad
                else:
                    grad = weight.grad
                torch.distributed.all_reduce(grad, group=mpu.get_embedding_group())
"""

# --- OpenSQZ/MegatronApp 99c64dad cuda_graphs.py _CudaGraphRunner.create_fwd_graph
# (shortened: FP8 tensor save/restore and the RNG-state registration dropped).
_MA_CREATE_FWD_GRAPH = """
class _CudaGraphRunner(torch.nn.Module):
    def create_fwd_graph(self, args, kwargs, clone_inputs=True):
        # save grads and other variables that may be affected by graph warmup
        if self.training and torch.is_grad_enabled():
            save_main_grads = [
                param.main_grad.clone()
                for param in self.base_module.parameters()
                if hasattr(param, 'main_grad')
            ]

        if clone_inputs:
            args, kwargs = self.zero_out_tensors(args, kwargs)

        self.fwd_graph_input_args = args
        self.fwd_graph_input_kwargs = kwargs

        input_tensors = self.get_tensors(args, kwargs)
        self.fwd_graph_input_surface = input_tensors + tuple(self.base_module.parameters())

        self.fwd_graph = torch.cuda.CUDAGraph()

        # warmup again as case graph capture mode may execute a different codepath
        for _ in range(self.num_warmup_steps):
            with self.get_fp8_context():
                outputs = self.base_module.forward(
                    *self.fwd_graph_input_args, **self.fwd_graph_input_kwargs
                )
            if self.training and torch.is_grad_enabled():
                outputs = self.get_tensors(outputs)
                grad_inputs = torch.autograd.grad(
                    outputs=tuple(o for o in outputs if o.requires_grad),
                    inputs=tuple(i for i in self.fwd_graph_input_surface if i.requires_grad),
                    grad_outputs=tuple(
                        torch.zeros_like(o) if o.requires_grad else None for o in outputs
                    ),
                    only_inputs=True,
                    allow_unused=True,
                )

        with self.get_fp8_context():
            torch.cuda.synchronize()
            with torch.cuda.graph(self.fwd_graph, pool=self.fwd_mempool):
                outputs = self.base_module.forward(
                    *self.fwd_graph_input_args, **self.fwd_graph_input_kwargs
                )

        # save cudagraph output buffer
        self.fwd_graph_outputs = outputs
        self.fwd_graph_output_surface = self.get_tensors(outputs)

        if self.training and torch.is_grad_enabled():
            # restore cached grads
            for param in self.base_module.parameters():
                if hasattr(param, 'main_grad'):
                    saved_grad = save_main_grads.pop(0)
                    assert (
                        param.main_grad.shape == saved_grad.shape
                    ), "Error restoring grads while cudagraphing!"
                    param.main_grad.copy_(saved_grad)
"""

# --- OpenSQZ/MegatronApp 99c64dad cuda_graphs.py _CudaGraphRunner.create_bwd_graph
# (shortened: the RNG-state registration dropped).
_MA_CREATE_BWD_GRAPH = """
class _CudaGraphRunner(torch.nn.Module):
    def create_bwd_graph(self, static_grad_outputs=None):
        self.bwd_graph = torch.cuda.CUDAGraph()

        if static_grad_outputs is None:
            static_grad_outputs = tuple(
                torch.zeros_like(o) if o.requires_grad else None
                for o in self.fwd_graph_output_surface
            )
        else:
            if torch.is_tensor(static_grad_outputs):
                static_grad_outputs = (static_grad_outputs,)

        torch.cuda.synchronize()
        with torch.cuda.graph(self.bwd_graph, pool=self.bwd_mempool):
            grad_inputs = torch.autograd.grad(
                outputs=tuple(o for o in self.fwd_graph_output_surface if o.requires_grad),
                inputs=tuple(i for i in self.fwd_graph_input_surface if i.requires_grad),
                grad_outputs=tuple(o for o in static_grad_outputs if o is not None),
                retain_graph=self.backward_retain_grad,
                only_inputs=True,
                allow_unused=True,
            )

        static_grad_inputs = []
        grad_idx = 0
        for arg in self.fwd_graph_input_surface:
            has_wgrad_fusion = self.fuse_wgrad_accumulation and getattr(
                arg, "grad_added_to_main_grad", False
            )
            if arg.requires_grad:
                if has_wgrad_fusion:
                    static_grad_inputs.append(None)
                else:
                    static_grad_inputs.append(grad_inputs[grad_idx])
                grad_idx += 1
            else:
                static_grad_inputs.append(None)

        self.groundtruth_grad_added_to_main_grad = {}
        if self.fuse_wgrad_accumulation:
            for param in self.base_module.parameters():
                if hasattr(param, "grad_added_to_main_grad"):
                    self.groundtruth_grad_added_to_main_grad[param] = param.grad_added_to_main_grad

        self.static_grad_outputs = static_grad_outputs
        self.static_grad_inputs = static_grad_inputs
"""

# --- axonn-ai/axonn 660a2246 axonn/intra_layer/overlap_communication.py accumulate_later /
# accumulate (adapted: main_grad first, see the module docstring).
_AXONN_ACCUMULATE = """
handles = []
pending_grad_accumulations = []
weights_cache = {}


def accumulate_later(param, grad):
    global pending_grad_accumulations
    pending_grad_accumulations.append([param, grad])


@torch.no_grad()
def accumulate():
    global pending_grad_accumulations
    for param, grad in pending_grad_accumulations:
        main_grad = getattr(param, "main_grad", None)
        if main_grad is not None:
            main_grad.add_(grad.view(main_grad.shape).to(main_grad.dtype))
        elif param.grad is None:
            param.grad = grad.to(param.dtype)
        else:
            param.grad.add_(grad.to(param.dtype))

    pending_grad_accumulations = []
"""

# --- OpenSQZ/MegatronApp 99c64dad distributed_data_parallel.py zero_grad_buffer
_MA_ZERO_GRAD_BUFFER = """
class DistributedDataParallel(_BaseDataParallel):
    def zero_grad_buffer(self):
        \"\"\"
        Zeros out all grad buffers. Needs to be called at the beginning of each
        training iteration.
        \"\"\"
        if not getattr(self.config, 'external_cuda_graph', False):
            # Don't reset grad_added_to_main_grad when CUDA Graph is used.
            # Because in CUDA Graph it no longer has the opportunity to set it back
            # to True, and there will be a double-GA.
            for param in self.params_with_grad:
                param.grad_added_to_main_grad = False
        for buffer in self.buffers + self.expert_parallel_buffers:
            buffer.reset()
        for bucket_group in self.bucket_groups + self.expert_parallel_bucket_groups:
            bucket_group.reset()
"""

# --- OpenSQZ/MegatronApp 99c64dad moe/experts.py TEGroupedMLP.__init__ (adapted: backward_dw
# added, see the module docstring; forward and the sharded state dict dropped).
_MA_TE_GROUPED_MLP = """
class TEGroupedMLP(MegatronModule):
    def __init__(self, num_local_experts, config: TransformerConfig, submodules: MLPSubmodules):
        super().__init__(config=config)
        self.num_local_experts = num_local_experts
        self.input_size = self.config.hidden_size
        assert (
            config.add_bias_linear == False
        ), "bias not supported in TEGroupedMLP yet, please set '--disable-bias-linear' instead."

        ffn_hidden_size = self.config.moe_ffn_hidden_size
        if self.config.gated_linear_unit:
            ffn_hidden_size *= 2

        self.linear_fc1 = build_module(
            submodules.linear_fc1,
            self.num_local_experts,
            self.input_size,
            ffn_hidden_size,
            config=self.config,
            init_method=self.config.init_method,
            bias=self.config.add_bias_linear,
            skip_bias_add=True,
            is_expert=True,
            tp_comm_buffer_name='fc1',
        )

        self.activation_func = self.config.activation_func
        self.activation_recompute = (
            self.config.recompute_granularity == 'selective'
            and "moe_act" in self.config.recompute_modules
        )

        self.linear_fc2 = build_module(
            submodules.linear_fc2,
            self.num_local_experts,
            self.config.moe_ffn_hidden_size,
            self.config.hidden_size,
            config=self.config,
            init_method=self.config.output_layer_init_method,
            bias=self.config.add_bias_linear,
            skip_bias_add=True,
            is_expert=True,
            tp_comm_buffer_name='fc2',
        )

    def backward_dw(self):
        self.linear_fc2.backward_dw()
        self.linear_fc1.backward_dw()
"""

# --- OpenSQZ/MegatronApp 99c64dad cuda_graphs.py _CudaGraphRunner.get_input_grads
_MA_GET_INPUT_GRADS = """
class _CudaGraphRunner(torch.nn.Module):
    def get_input_grads(self):
        \"\"\"Get the inputs grads that are returned by the bwd cudagraph call. If using grad accum
        fusion, wgrads have already been accumulated, so return dummy wgrads.\"\"\"

        if not self.fuse_wgrad_accumulation:
            return self.static_grad_inputs
        else:
            num_dgrads = len(self.static_grad_inputs) - len(list(self.base_module.parameters()))
            dgrads = self.static_grad_inputs[:num_dgrads]
            wgrads = self.static_grad_inputs[num_dgrads:]

            wgrads_with_placeholders = []
            for idx, param in enumerate(self.base_module.parameters()):
                if getattr(param, "grad_added_to_main_grad", False):
                    if getattr(param, "zero_out_wgrad", False):
                        wgrad = torch.zeros(
                            param.main_grad.shape,
                            dtype=param.dtype,
                            device=torch.cuda.current_device(),
                            requires_grad=False,
                        )
                    else:
                        wgrad = torch.empty(
                            param.main_grad.shape,
                            dtype=param.dtype,
                            device=torch.cuda.current_device(),
                            requires_grad=False,
                        )
                else:
                    wgrad = wgrads[idx]
                wgrads_with_placeholders.append(wgrad)
            return tuple(dgrads + wgrads_with_placeholders)
"""

# --- NVIDIA-NeMo/RL 7ea279ab modelopt/models/policy/workers/megatron_quant_policy_worker.py
# MegatronQuantPolicyWorker.__init__ (shortened to the configuration check).
_NRL_QUANT_WORKER = """
class MegatronQuantPolicyWorker(MegatronPolicyWorkerImpl):
    def __init__(self, config, *args, **kwargs):
        \"\"\"Initialize the MegatronQuantPolicyWorker.\"\"\"
        megatron_cfg = config.get("megatron_cfg", {}) or {}
        # Default to True to match the underlying Megatron-Bridge
        assert not megatron_cfg.get("gradient_accumulation_fusion", True), (
            "gradient_accumulation_fusion=True is not supported with "
            "MegatronQuantPolicyWorker (ModelOpt quantization). "
            "Set policy.megatron_cfg.gradient_accumulation_fusion=False."
        )
        os.environ["ENABLE_BRIDGE_QUANT_MAPPING"] = "1"
        self._patch_validate_model_paths()
        self._patch_setup_model_and_optimizer()
        super().__init__(config, *args, **kwargs)
"""


VARIANTS = (
    Variant(
        1,
        "seq1f1b_embedding_allreduce_on_fp32_copy",
        _swap(
            _S1_EMBEDDING_ALLREDUCE,
            "                    grad = weight.main_grad\n",
            "                    grad = weight.main_grad.float()  # bug\n",
        ),
        _S1_EMBEDDING_ALLREDUCE,
    ),
    Variant(
        2,
        "megatronapp_cudagraph_capture_rebinds_main_grad",
        _swap(
            _MA_CREATE_FWD_GRAPH,
            "                    param.main_grad.copy_(saved_grad)\n",
            "                    param.main_grad = saved_grad  # bug\n",
        ),
        _MA_CREATE_FWD_GRAPH,
    ),
    Variant(
        3,
        "megatronapp_cudagraph_groundtruth_flag_forced_true",
        _swap(
            _MA_CREATE_BWD_GRAPH,
            "                    self.groundtruth_grad_added_to_main_grad[param] = param.grad_added_to_main_grad\n",
            "                    self.groundtruth_grad_added_to_main_grad[param] = True  # bug\n",
        ),
        _MA_CREATE_BWD_GRAPH,
    ),
    Variant(
        4,
        "axonn_deferred_accumulate_overwrites_main_grad",
        _swap(
            _AXONN_ACCUMULATE,
            "            main_grad.add_(grad.view(main_grad.shape).to(main_grad.dtype))\n",
            "            main_grad.copy_(grad.view(main_grad.shape))  # bug\n",
        ),
        _AXONN_ACCUMULATE,
    ),
    Variant(
        5,
        "megatronapp_zero_grad_buffer_resets_flag_under_cuda_graph",
        _swap(
            _MA_ZERO_GRAD_BUFFER,
            "        if not getattr(self.config, 'external_cuda_graph', False):\n"
            "            # Don't reset grad_added_to_main_grad when CUDA Graph is used.\n"
            "            # Because in CUDA Graph it no longer has the opportunity to set it back\n"
            "            # to True, and there will be a double-GA.\n"
            "            for param in self.params_with_grad:\n"
            "                param.grad_added_to_main_grad = False\n",
            "        for param in self.params_with_grad:  # bug\n"
            "            param.grad_added_to_main_grad = False\n",
        ),
        _MA_ZERO_GRAD_BUFFER,
    ),
    Variant(
        6,
        "megatronapp_te_grouped_mlp_backward_dw_skips_fc1",
        _swap(
            _MA_TE_GROUPED_MLP,
            "    def backward_dw(self):\n"
            "        self.linear_fc2.backward_dw()\n"
            "        self.linear_fc1.backward_dw()\n",
            "    def backward_dw(self):\n        self.linear_fc2.backward_dw()  # bug\n",
        ),
        _MA_TE_GROUPED_MLP,
    ),
    Variant(
        7,
        "megatronapp_cudagraph_placeholder_on_local_fusion_flag",
        _swap(
            _MA_GET_INPUT_GRADS,
            "            for idx, param in enumerate(self.base_module.parameters()):\n"
            '                if getattr(param, "grad_added_to_main_grad", False):\n',
            "            for idx, param in enumerate(self.base_module.parameters()):\n"
            '                has_wgrad_fusion = self.fuse_wgrad_accumulation and hasattr(param, "main_grad")  # bug\n'
            "                if has_wgrad_fusion:  # bug\n",
        ),
        _MA_GET_INPUT_GRADS,
    ),
    Variant(
        8,
        "nemo_rl_quant_worker_fusion_check_defaults_off",
        _swap(
            _NRL_QUANT_WORKER,
            "        # Default to True to match the underlying Megatron-Bridge\n"
            '        assert not megatron_cfg.get("gradient_accumulation_fusion", True), (\n',
            '        assert not megatron_cfg.get("gradient_accumulation_fusion", False), (  # bug\n',
        ),
        _NRL_QUANT_WORKER,
    ),
)
