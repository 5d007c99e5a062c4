"""What the Transformer Engine adapters share: the lazy import, the activation table, the
parameter binding and the input checks.

Every adapter is a thin shell around TE's own objects. TE's modules are kept out of the
adapter's module tree (in a tuple), so their ``_extra_state`` never enters our state dict;
their Parameter objects are registered a second time under refimpl's names (``fc1.weight0``..)
so that the ``main_grad`` attributes the checker sets reach TE's kernels. Nothing here imports
Transformer Engine at module level: the adapters import everywhere, and a factory whose
library is missing raises :class:`MissingDependency` with one line saying what to install.

Source references (``file:line``) are into the Transformer Engine 2.20.2 Python wheel
(``transformer_engine/pytorch/...``) unless they name ``common/``, which is the C++ source of
the TE repository at the 2.20 development head (the wheel ships it compiled).
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TypeVar

import torch
from torch import nn

from ..errors import short
from ..refimpl.activations import QGEGLU_ALPHA, QGEGLU_LIMIT, get_activation
from ..refimpl.config import MLPConfig
from ..refimpl.validation import check_input, check_probs, normalize_split_sizes

TE_VERSION = "2.20.2"
INSTALL_TE = "pip install --no-build-isolation 'transformer_engine[pytorch]==2.20.2'"

# TE asks cuBLASLt for CUBLAS_COMPUTE_32F_FAST_TF32 whenever A, B and D are all fp32
# (``cublas_gemm`` in common/gemm/cublaslt_gemm.cu, "Use TF32 only for pure FP32 GEMM"); no TE
# option and not torch.backends.cuda.matmul.allow_tf32 changes that. bf16/fp16 GEMMs accumulate in
# fp32 (CUBLAS_COMPUTE_32F), so the value only matters for fp32 modules.
FP32_MATMUL = "tf32"

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# TE 2.20.2 gates single grouped parameters on this variable and silently falls back to
# per-expert parameters (with a warning) when it is unset
# (``resolve_grouped_linear_single_param_flags`` in pytorch/utils.py).
SINGLE_PARAM_ENV = "NVTE_GROUPED_LINEAR_SINGLE_PARAM"


class MissingDependency(ImportError):
    """A library an adapter needs is not installed (or does not import)."""


def import_te(adapter: str) -> ModuleType:
    """``transformer_engine.pytorch``, or MissingDependency with one line saying what to do."""
    try:
        import transformer_engine.pytorch as te
    except Exception as exc:
        missing = (getattr(exc, "name", None) or "").split(".")[0]
        if isinstance(exc, ModuleNotFoundError) and missing in (
            "transformer_engine",
            "transformer_engine_torch",
        ):
            raise MissingDependency(
                f"{adapter} needs Transformer Engine {TE_VERSION} for PyTorch: {INSTALL_TE}"
            ) from None
        # Anything else (a dependency of TE missing, no driver, an ABI mismatch) is a broken
        # install.
        raise MissingDependency(
            f"{adapter}: transformer_engine.pytorch does not import ({short(exc)}); "
            f"reinstall with: {INSTALL_TE}"
        ) from exc
    return te


GROUPED_TENSOR_PATH = "TE's grouped-tensor GEMM path"


def refuse_fp32_grouped_tensor(adapter: str, what: str, dtype: torch.dtype, gate: str) -> None:
    """``what`` (a single grouped weight, or TE's grouped-tensor module path) runs only on the
    grouped-tensor GEMMs, which TE gates off for fp32 (``gate``: where)."""
    if dtype == torch.float32:
        raise NotImplementedError(
            f"{adapter}: {what} needs {GROUPED_TENSOR_PATH}, which has no fp32 ({gate})"
        )


def require_grouped_tensor_path(adapter: str, what: str, supported: bool) -> None:
    """``what`` needs the grouped-tensor GEMMs, which TE says this machine cannot run."""
    if not supported:
        raise NotImplementedError(
            f"{adapter}: {what} needs {GROUPED_TENSOR_PATH} (bf16/fp16, sm90+, cuBLASLt >= "
            "13.4 on Hopper), unavailable on this machine"
        )


def te_version() -> str:
    import transformer_engine

    return str(getattr(transformer_engine, "__version__", "unknown"))


def require_kwargs(adapter: str, cls: type, names: Sequence[str]) -> None:
    """Fail loudly when TE's constructor lacks an argument this adapter passes (another TE
    version renamed it), instead of letting a **kwargs swallow or a default replace it."""
    params = inspect.signature(cls).parameters
    missing = [n for n in names if n not in params]
    if missing:
        raise RuntimeError(
            f"{adapter}: {cls.__module__}.{cls.__qualname__} takes no {', '.join(missing)} "
            f"argument; this adapter is written against Transformer Engine {TE_VERSION}, "
            f"found {te_version()}"
        )


def check_target(adapter: str, device: torch.device | str, dtype: torch.dtype) -> torch.device:
    """TE runs on CUDA in fp32, fp16 and bf16; anything else is a configuration TE cannot run
    (NotImplementedError: the checker reports it as a skip)."""
    device = torch.device(device)
    if device.type != "cuda":
        raise NotImplementedError(
            f"{adapter}: Transformer Engine runs on CUDA devices only, got device {str(device)!r}"
        )
    if dtype not in SUPPORTED_DTYPES:
        raise NotImplementedError(
            f"{adapter}: Transformer Engine supports float32, float16 and bfloat16, got {dtype}"
        )
    return device


@contextlib.contextmanager
def environ(name: str, value: str | None) -> Iterator[None]:
    """Set (or, with None, leave alone) one environment variable for the duration."""
    if value is None:
        yield
        return
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def single_param_env(single_grouped_weight: bool) -> contextlib.AbstractContextManager:
    return environ(SINGLE_PARAM_ENV, "1" if single_grouped_weight else None)


# -- activations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TEActivation:
    """The TE op (class in ``transformer_engine.pytorch.ops``) that computes one activation."""

    op: str
    glu: bool  # consumes [T, 2*ffn]; TE gates the FIRST half, as refimpl does
    scaled: bool  # takes the per-token probs as an extra input and multiplies the output rows
    source: str  # where TE 2.20.2 defines the op and the kernel formula
    kwargs: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Unsupported:
    reason: str


# One row per refimpl activation, each naming TE 2.20.2's op class (ops/basic) and the device
# function in common/util/math.h. Formulas checked against common/util/math.h (and the gated
# launchers in common/activation/*.cu); tests/adapters re-derive each formula from that source
# and compare it with refimpl on CPU.
TE_ACTIVATIONS: dict[str, TEActivation | Unsupported] = {
    "swiglu": TEActivation(
        "SwiGLU",
        glu=True,
        scaled=False,
        source="SwiGLU -> tex.swiglu; math.h silu(x) = x*sigmoid(x)",
    ),
    "scaled_swiglu": TEActivation(
        "ScaledSwiGLU",
        glu=True,
        scaled=True,
        source="ScaledSwiGLU -> tex.scaled_swiglu = SwiGLU(x) * scales[:, None]",
    ),
    "clamped_qgeglu": TEActivation(
        "ClampedSwiGLU",
        glu=True,
        scaled=False,
        source=(
            "ClampedSwiGLU -> tex.clamped_swiglu; math.h clamped_silu min(gate, limit) * "
            "sigmoid(alpha*min(gate, limit)), times clamp(linear, -limit, limit) + offset"
        ),
        kwargs={"limit": QGEGLU_LIMIT, "alpha": QGEGLU_ALPHA, "glu_linear_offset": 1.0},
    ),
    "geglu": TEActivation(
        "GEGLU",
        glu=True,
        scaled=False,
        source="GEGLU -> tex.geglu; math.h gelu, tanh-approximated",
    ),
    "gelu": TEActivation(
        "GELU",
        glu=False,
        scaled=False,
        source="GELU -> tex.gelu; math.h gelu, tanh-approximated",
    ),
    "relu": TEActivation("ReLU", glu=False, scaled=False, source="ReLU -> tex.relu; math.h relu"),
    "srelu": TEActivation(
        "SReLU",
        glu=False,
        scaled=False,
        source="SReLU -> tex.srelu; math.h srelu x > 0 ? x*x : 0 (the docstring's "
        "max(x^2, 0) is a typo)",
    ),
}


Row = TypeVar("Row")


def lookup(adapter: str, table: Mapping[str, Row | Unsupported], activation: str) -> Row:
    """The table row for ``activation`` (validated by refimpl); NotImplementedError if the
    backend has no way to compute it."""
    get_activation(activation)  # ValueError naming the choices for an unknown name
    row = table[activation]
    if isinstance(row, Unsupported):
        raise NotImplementedError(f"{adapter}: {row.reason}")
    return row


def make_activation_op(adapter: str, te: ModuleType, row: TEActivation) -> nn.Module:
    cls = getattr(te.ops, row.op, None)
    if cls is None:
        raise RuntimeError(
            f"{adapter}: transformer_engine.pytorch.ops has no {row.op}; this adapter is "
            f"written against Transformer Engine {TE_VERSION}, found {te_version()}"
        )
    if row.kwargs:
        require_kwargs(adapter, cls, list(row.kwargs))
    return cls(**row.kwargs)


# -- the adapter shell -----------------------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    layer: str  # "fc1" or "fc2"
    name: str  # refimpl's name inside the layer, e.g. "weight0"
    owner: nn.Module  # the TE object that holds the Parameter
    attr: str  # its attribute name there


class TEAdapter(nn.Module):
    """fc1/fc2 containers holding TE's own Parameters under refimpl's names, plus the input
    checks and the wgrad-hook plumbing every adapter shares."""

    fp32_matmul = FP32_MATMUL
    # TE's ops and modules quantize under TE's autocast: the FP8 axis applies (gmlp_check.fp8).
    fp8_autocast = "transformer_engine"

    def __init__(self, adapter: str, config: MLPConfig) -> None:
        super().__init__()
        self.adapter = adapter
        self.config = config
        self.activation = get_activation(config.activation)
        self.fc1 = nn.Module()
        self.fc2 = nn.Module()
        self._bindings: list[Binding] = []
        # The TE object whose backward_dw runs last, held in a tuple: assigned as a module
        # attribute it would join the module tree, and with it the state dict.
        self._hook_owners: tuple[nn.Module, ...] = ()
        self._wgrad_hooks: list[Callable[[], None]] = []

    @property
    def hook_owner(self) -> nn.Module | None:
        return self._hook_owners[0] if self._hook_owners else None

    def set_hook_owner(self, owner: nn.Module) -> None:
        """(A property setter would not do: nn.Module.__setattr__ registers any module
        assigned to an attribute as a submodule before a setter sees it.)"""
        self._hook_owners = (owner,)

    def bind(self, layer: str, name: str, owner: nn.Module, attr: str | None = None) -> None:
        """Register ``owner.attr`` (TE's Parameter, the same object) as ``layer.name``."""
        attr = attr or name
        param = getattr(owner, attr, None)
        if not isinstance(param, nn.Parameter):
            raise RuntimeError(
                f"{self.adapter}: {type(owner).__name__}.{attr} is a {type(param).__name__}, "
                f"expected a Parameter (Transformer Engine {te_version()} lays its parameters "
                f"out differently from {TE_VERSION})"
            )
        getattr(self, layer).register_parameter(name, param)
        self._bindings.append(Binding(layer, name, owner, attr))

    def bind_grouped(self, layer: str, owner: nn.Module, *, single: bool, bias: bool) -> None:
        """TE's GroupedLinear (op and module) uses refimpl's names: weight0.. or weight."""
        groups = ["" if single else str(g) for g in range(1 if single else self.config.num_experts)]
        for suffix in groups:
            self.bind(layer, f"weight{suffix}", owner)
        for suffix in groups if bias else []:
            self.bind(layer, f"bias{suffix}", owner)

    def check_bindings(self) -> None:
        """TE replaces a Parameter when it re-initialises one (meta device, quantized
        weights); main_grad set on ours would then never reach its kernels. Fail loudly."""
        for b in self._bindings:
            ours = getattr(getattr(self, b.layer), b.name)
            if getattr(b.owner, b.attr, None) is not ours:
                raise RuntimeError(
                    f"{self.adapter}: {type(b.owner).__name__}.{b.attr} is no longer the "
                    f"Parameter registered as {b.layer}.{b.name}; Transformer Engine replaced it"
                )

    def check_call(
        self,
        x: torch.Tensor,
        split_sizes: Sequence[int] | torch.Tensor,
        probs: torch.Tensor | None,
    ) -> list[int]:
        """refimpl's argument checks (never its main_grad checks: TE's own behaviour is what
        is under test); returns the split sizes as G ints."""
        weight = next(iter(self.fc1.parameters()))
        check_input(x, self.config.hidden, weight.dtype, weight.device)
        sizes = normalize_split_sizes(split_sizes, self.config.num_experts, x.shape[0])
        check_probs(probs, x.shape[0], self.activation.uses_probs, self.activation.name)
        self.check_bindings()
        return sizes

    def weight_params(self) -> list[nn.Parameter]:
        return [
            p
            for layer in (self.fc1, self.fc2)
            for n, p in layer.named_parameters()
            if n.startswith("weight")
        ]

    def register_wgrad_accumulation_and_reduce_hooks(self, hook: Callable[[], None]) -> None:
        """Hand the hook to TE (it runs it at the end of the last backward_dw that computed
        something); a plain list where TE has no delayed weight gradients."""
        if self.hook_owner is None:
            self._wgrad_hooks.append(hook)
        else:
            self.hook_owner.register_wgrad_accumulation_and_reduce_hooks(hook)


def split_tensor(sizes: list[int], device: torch.device) -> torch.Tensor:
    """Split sizes as TE wants them: an int64 tensor (TE's grouped-tensor paths need it on the
    GPU; the split-quantize paths call .tolist() on it)."""
    return torch.tensor(sizes, dtype=torch.int64, device=device)
