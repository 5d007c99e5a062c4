"""megatron-te-grouped-mlp: Megatron-core's own TEGroupedMLP (megatron/core/transformer/moe/
experts.py) with its TE op-fuser path, built the way Megatron builds it: a TransformerConfig,
the GroupedMLPSubmodules spec of transformer_engine_spec_provider.py (TEColumnParallel- and
TERowParallelGroupedLinear), and a ProcessGroupCollection from parallel_state. The integration
code is what gets checked: the pre-forward hook that exposes Megatron-FSDP main_grads
(``TEGroupedMLP._ensure_main_grad``), the op-fuser pipeline built on the first forward
(``TEGroupedMLP._make_fused_ops``) and ``TEGroupedMLP.backward_dw`` with its explicit hook
trigger.

What Megatron-core 0.19.2 does that the checker will see:

* ``_ensure_main_grad`` fetches ``main_grad`` from ``get_main_grad()`` when it is None and sets
  ``overwrite_main_grad = True`` on every parameter that has the attribute, whatever
  its value was (Megatron-LM's "Fix TE grouped MLP fused main-grad setup" keeps
  overwrite_main_grad enabled for the fused path).
  Megatron-FSDP gives a parameter the attribute, True, at every unshard except under
  ``no_shard`` (megatron-fsdp 0.6.1 ``MegatronFSDP.all_gather_and_wait_parameters_ready``), so
  the override only matters for a parameter that
  carries overwrite_main_grad=False.
* the op-fuser path is taken only for SwiGLU and quick-GeGLU GLUs (and then only with
  NVTE_CUTEDSL_FUSED_GROUPED_MLP > 0 in the environment, ``TEGroupedMLP._is_fused_impl_supported``;
  the adapter sets it while it
  constructs) and for weighted squared ReLU (``use_fused_weighted_squared_relu``). The probs
  always go through the scaled TE op; unscaled activations get probs of ones.
* with a bias, fc2 is built with ``scale_bias=True``: the expert output is p * (fc2(x) + b)
  (``TEGroupedMLP._make_fused_ops``), where refimpl computes fc2(x * p) + b; only scaled_swiglu
  tells them apart.
* delayed weight gradients come from ``overlap_dispatch_backward_with_experts_wgrad`` (the
  TEGroupedLinear wrapper ORs it with ``delay_wgrad_compute`` in ``TEGroupedLinear.__init__``,
  extensions/transformer_engine.py); ``delay_wgrad_compute`` itself would require
  overlap_moe_expert_parallel_comm.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..refimpl.activations import QGEGLU_ALPHA, QGEGLU_LIMIT
from ..refimpl.config import MLPConfig
from .te_common import (
    MissingDependency,
    TEAdapter,
    Unsupported,
    check_target,
    environ,
    import_te,
    lookup,
    refuse_fp32_grouped_tensor,
    require_grouped_tensor_path,
    single_param_env,
    split_tensor,
)

ADAPTER = "megatron-te-grouped-mlp"
MCORE_VERSION = "0.19.2"
INSTALL_MCORE = f"pip install megatron-core=={MCORE_VERSION}"

# Megatron's quick_gelu hard-codes sigmoid(1.702 x) (megatron-core 0.19.2 ``quick_gelu`` in
# fusions/fused_bias_geglu.py) and ScaledClampedQGeGLU keeps TE's default alpha and +1 linear
# offset (TE 2.20.2 ``ScaledClampedQGeGLU.__init__``).
MEGATRON_QUICK_GELU_ALPHA = 1.702


@dataclass(frozen=True)
class MegatronActivation:
    """TransformerConfig fields selecting an activation, and the TE op Megatron then builds."""

    op: str  # the TE op Megatron builds (``TEGroupedMLP._make_fused_ops``)
    activation_func: str  # "silu" | "quick_gelu" | "squared_relu", resolved after import
    scaled: bool  # the case's probs go to the op; otherwise probs of ones
    config: dict[str, object] = field(default_factory=dict)

    @property
    def glu(self) -> bool:
        return bool(self.config.get("gated_linear_unit", False))


_NOT_FUSED = (
    "Megatron-core 0.19.2's TEGroupedMLP op-fuser path fuses only SwiGLU, clamped quick-GeGLU "
    "and weighted squared ReLU (experts.py:_is_fused_impl_supported)"
)

MEGATRON_ACTIVATIONS: dict[str, MegatronActivation | Unsupported] = {
    "swiglu": MegatronActivation(
        "ScaledSwiGLU", "silu", scaled=False, config={"gated_linear_unit": True}
    ),
    "scaled_swiglu": MegatronActivation(
        "ScaledSwiGLU", "silu", scaled=True, config={"gated_linear_unit": True}
    ),
    "clamped_qgeglu": (
        MegatronActivation(
            "ScaledClampedQGeGLU",
            "quick_gelu",
            scaled=False,
            config={
                "gated_linear_unit": True,
                "activation_func_clamp_value": QGEGLU_LIMIT,
                "glu_linear_offset": 1.0,  # the unfused path's offset; the TE op's default is 1
            },
        )
        if QGEGLU_ALPHA == MEGATRON_QUICK_GELU_ALPHA
        else Unsupported(f"Megatron's quick_gelu has alpha {MEGATRON_QUICK_GELU_ALPHA}")
    ),
    "srelu": MegatronActivation(
        "ScaledSReLU",
        "squared_relu",
        scaled=False,
        config={"gated_linear_unit": False, "use_fused_weighted_squared_relu": True},
    ),
    "geglu": Unsupported(_NOT_FUSED),
    "gelu": Unsupported(_NOT_FUSED),
    "relu": Unsupported(_NOT_FUSED),
}


def _import_megatron() -> dict[str, object]:
    names = {
        "parallel_state": ("megatron.core", "parallel_state"),
        "TransformerConfig": ("megatron.core.transformer.transformer_config", "TransformerConfig"),
        "ProcessGroupCollection": ("megatron.core.process_groups_config", "ProcessGroupCollection"),
        "TEGroupedMLP": ("megatron.core.transformer.moe.experts", "TEGroupedMLP"),
        "GroupedMLPSubmodules": ("megatron.core.transformer.moe.experts", "GroupedMLPSubmodules"),
        "fc1": ("megatron.core.extensions.transformer_engine", "TEColumnParallelGroupedLinear"),
        "fc2": ("megatron.core.extensions.transformer_engine", "TERowParallelGroupedLinear"),
        "silu": ("torch.nn.functional", "silu"),
        "quick_gelu": ("megatron.core.fusions.fused_bias_geglu", "quick_gelu"),
        "squared_relu": ("megatron.core.activations", "squared_relu"),
    }
    found = {}
    try:
        for key, (module, attr) in names.items():
            found[key] = getattr(importlib.import_module(module), attr)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "megatron":
            raise MissingDependency(
                f"{ADAPTER} needs Megatron-core {MCORE_VERSION}: {INSTALL_MCORE}"
            ) from None
        raise MissingDependency(f"{ADAPTER}: megatron.core does not import ({exc})") from exc
    if found["fc1"] is None:  # Megatron's placeholder when it could not use TE
        raise MissingDependency(
            f"{ADAPTER}: megatron.core found no usable Transformer Engine (HAVE_TE is False)"
        )
    return found


def ensure_process_group(device: torch.device) -> None:
    """torch.distributed and Megatron's parallel_state with no model parallelism: a
    one-process group where none exists, or the data-parallel group already set up (the real
    engines' ranks, gmlp_check.engines).

    Idempotent. The only process-group setup the adapter does; it selects ``device`` as the
    current CUDA device because Megatron allocates TE weights there."""
    import torch.distributed as dist
    from megatron.core import parallel_state

    if device.index is not None:
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(create_gloo_process_groups=False)
    sizes = (
        parallel_state.get_tensor_model_parallel_world_size(),
        parallel_state.get_expert_model_parallel_world_size(),
        parallel_state.get_expert_tensor_parallel_world_size(),
    )
    if sizes != (1, 1, 1):
        raise NotImplementedError(
            f"{ADAPTER}: parallel_state is initialised with (TP, EP, expert TP) = {sizes}; "
            f"the adapter needs all three to be 1"
        )


def config_kwargs(row: MegatronActivation, config: MLPConfig) -> dict[str, object]:
    """The TransformerConfig fields for one grouped MLP (``activation_func`` by name).

    One layer and one attention head only because TransformerConfig divides by them; MoE with
    grouped GEMM on TE's op fuser; TE's fused wgrad accumulation is Megatron's
    ``gradient_accumulation_fusion``."""
    return {
        "num_layers": 1,
        "hidden_size": config.hidden,
        "num_attention_heads": 1,
        "num_moe_experts": config.num_experts,
        "moe_ffn_hidden_size": config.ffn,
        "moe_router_topk": 1,  # the router is never built; topk 1 asks for pre-softmax
        "moe_router_pre_softmax": True,
        "moe_grouped_gemm": True,
        "use_transformer_engine_op_fuser": True,
        "activation_func": row.activation_func,
        "add_bias_linear": config.bias,
        "params_dtype": config.dtype,
        "bf16": config.dtype == torch.bfloat16,
        "fp16": config.dtype == torch.float16,
        "gradient_accumulation_fusion": config.accumulate_into_main_grad,
        "overlap_dispatch_backward_with_experts_wgrad": config.delay_wgrad_compute,
        "moe_single_grouped_weight": config.single_grouped_weight,
        "moe_single_grouped_bias": config.single_grouped_weight and config.bias,
        **row.config,
    }


class MegatronTEGroupedMLP(TEAdapter):
    def __init__(self, config: MLPConfig) -> None:
        super().__init__(ADAPTER, config)
        row = lookup(ADAPTER, MEGATRON_ACTIVATIONS, config.activation)
        if row.scaled and config.bias:
            raise NotImplementedError(
                f"{ADAPTER}: Megatron scales fc2's bias by the probs, p * (fc2(x) + b) "
                f"(TEGroupedMLP._make_fused_ops), where refimpl adds it unscaled: fc2(x * p) + b"
            )
        if config.single_grouped_weight:
            refuse_fp32_grouped_tensor(
                ADAPTER,
                "moe_single_grouped_weight",
                config.dtype,
                "is_op_fuser_grouped_tensor_path_supported in ops/basic/grouped_linear.py",
            )
        device = check_target(ADAPTER, config.device, config.dtype)
        te = import_te(ADAPTER)
        mc = _import_megatron()
        if config.single_grouped_weight:
            require_grouped_tensor_path(
                ADAPTER,
                "moe_single_grouped_weight",
                bool(te.ops.is_op_fuser_grouped_tensor_path_supported(None, config.dtype)),
            )
        ensure_process_group(device)
        kwargs = config_kwargs(row, config)
        kwargs["activation_func"] = mc[str(kwargs["activation_func"])]
        transformer_config = mc["TransformerConfig"](**kwargs)
        submodules = mc["GroupedMLPSubmodules"](linear_fc1=mc["fc1"], linear_fc2=mc["fc2"])
        pg_collection = mc["ProcessGroupCollection"].use_mpu_process_groups()
        self._single = config.single_grouped_weight
        glu_gate = environ("NVTE_CUTEDSL_FUSED_GROUPED_MLP", "1" if row.glu else None)
        with glu_gate, single_param_env(config.single_grouped_weight):
            experts = mc["TEGroupedMLP"](
                config.num_experts, transformer_config, submodules, pg_collection=pg_collection
            )
        self._te = (experts,)  # a tuple: out of the module tree and the state dict
        self._scaled = row.scaled
        self.bind_grouped(
            "fc1", experts.linear_fc1, single=config.single_grouped_weight, bias=config.bias
        )
        self.bind_grouped(
            "fc2", experts.linear_fc2, single=config.single_grouped_weight, bias=config.bias
        )
        # Megatron DDP registers its hooks on linear_fc1/linear_fc2 and TEGroupedMLP.backward_dw
        # triggers fc2's, then fc1's: fc1's run once both are done.
        self.set_hook_owner(experts.linear_fc1)

    def forward(
        self,
        x: torch.Tensor,
        split_sizes: Sequence[int] | torch.Tensor,
        probs: torch.Tensor | None = None,
    ) -> torch.Tensor:
        sizes = self.check_call(x, split_sizes, probs)
        (experts,) = self._te
        tokens_per_expert = split_tensor(sizes, x.device)
        if not self._scaled:
            # Router probs are fp32 in Megatron; the scaled TE op casts them to x's dtype.
            probs = torch.ones(x.shape[0], dtype=torch.float32, device=x.device)
        # The TE ops are built on the first forward (_make_fused_ops), reading the variable.
        with single_param_env(self._single):
            output, _ = experts(x, tokens_per_expert, probs)
        return output

    def backward_dw(self) -> None:
        (experts,) = self._te
        experts.backward_dw()


def make(**mlp_kwargs) -> MegatronTEGroupedMLP:
    """``module:factory`` entry point: Megatron-core's TEGroupedMLP on TE's op fuser."""
    return MegatronTEGroupedMLP(MLPConfig(**mlp_kwargs))
