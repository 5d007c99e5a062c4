"""Build both sides of a case with identical data and observe them.

The reference (fp32) and the fused side (the case dtype) get the same weights, matched by
parameter name, the same inputs and output gradients and the same main_grad contents, each in
its own buffers. A fused factory that raises NotImplementedError does not support the case:
that is recorded as such, not as a failure.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from gmlp_check.refimpl import GroupedMLP
from gmlp_check.refimpl.sentinels import uninitialized_memory_as_nan

from . import fp8
from .backends import Backend, BackendError
from .faults import Fault, inject
from .inputs import Sizes, case_seed, make_arena, make_inputs, make_state
from .kinks import KinkSlack, kink_slack
from .matrix import Case
from .own_run import own_gradients
from .side_observations import Observations, SideError, observe
from .tolerance import Precision, fp32_matmul


@dataclass
class CaseRun:
    reference: Observations
    fused: Observations | None
    construct_error: SideError | None = None
    unsupported: str | None = None  # the factory's NotImplementedError: the case is skipped
    slack: KinkSlack | None = None  # extra tolerance where a kink of the activation is near
    precision: Precision | None = None
    # FP8 cases: per microbatch, the backend's own .grad from a twin that does not write
    # main_grad (gmlp_check.own_run); None otherwise.
    own_grads: list[dict[str, torch.Tensor]] | None = None


class ConstructError(Exception):
    """The fused module's parameters do not match the reference's."""


def load_parameters(module: nn.Module, values: dict[str, torch.Tensor]) -> None:
    """Copy ``values`` into the module's parameters of the same names. Entries that are not
    parameters (buffers, Transformer Engine's ``_extra_state``) play no part; a parameter the
    reference has and the module lacks, or one it has in another shape, is an error naming it."""
    params = dict(module.named_parameters())
    extra = sorted(set(params) - set(values))
    if extra:
        raise ConstructError(
            f"the module has parameters the reference lacks: {', '.join(extra)} "
            f"(expected exactly {', '.join(values)})"
        )
    with torch.no_grad():
        for name, value in values.items():
            if name not in params:
                raise ConstructError(
                    f"the module has no parameter {name!r} (expected the reference's names: "
                    f"{', '.join(values)})"
                )
            if params[name].shape != value.shape:
                raise ConstructError(
                    f"parameter {name!r} has shape {list(params[name].shape)}, the reference's "
                    f"is {list(value.shape)}"
                )
            params[name].copy_(value)


def build_fused(
    backend: Backend, case: Case, sizes: Sizes, device: torch.device, fault: Fault | None
) -> nn.Module:
    with fp8.weights_init(case.fp8, case.fp8_weights):
        module = backend.build(case.mlp_config(sizes, device))
    if case.quantized and not fp8.declares_fp8(module):
        attr, value = fp8.DECLARATION
        raise NotImplementedError(
            f"fp8={case.fp8}: the module declares no FP8 compute ({attr} = {value!r}), so TE's "
            "autocast would not quantize it"
        )
    return inject(module, fault, case) if fault is not None else module


def run_pair(
    case: Case, sizes: Sizes, device: torch.device, backend: Backend, fault: Fault | None = None
) -> CaseRun:
    """Both sides of ``case`` (inside the NaN-fill context of gmlp_check.refimpl.sentinels)."""
    with uninitialized_memory_as_nan():
        return _run_pair(case, sizes, device, backend, fault)


def run_fused_side(case: Case, sizes: Sizes, device: torch.device, backend: Backend) -> None:
    """The fused side of ``case`` alone, on the data run_pair gives it, neither compared nor
    reported: the launches of a run without the reference's and the comparison's cost, for
    the warm-up to record (gmlp_check.warmup). Raises whatever the fused side raises."""
    with uninitialized_memory_as_nan():
        _, _, state, inputs, template = _case_data(case, sizes, device)
        if case.quantized and fp8.unavailable_reason(case.fp8):
            return
        fused = build_fused(backend, case, sizes, device, None)
        load_parameters(fused, state)
        observe(fused, case, inputs, template, fp8.Autocast(case.fp8))


def _case_data(case, sizes, device):
    """(the fp32 reference module, parameter shapes, parameter values, inputs, main_grad
    arena), all drawn from the case's own seed."""
    generator = torch.Generator(device="cpu").manual_seed(case_seed(sizes.seed, case))
    reference = GroupedMLP(case.mlp_config(sizes, device).replace(dtype=torch.float32))
    shapes = {n: p.shape for n, p in reference.named_parameters()}
    state = make_state(shapes, case, sizes, device, generator)
    inputs = make_inputs(case, sizes, state, device, generator)
    template = make_arena(case, shapes, device, generator)
    return reference, shapes, state, inputs, template


def _run_pair(case, sizes, device, backend, fault) -> CaseRun:
    reference, shapes, state, inputs, template = _case_data(case, sizes, device)
    if case.quantized and (why := fp8.unavailable_reason(case.fp8)):
        return CaseRun(_reference_only(reference, case, inputs, template), None, None, why)
    try:
        fused = build_fused(backend, case, sizes, device, fault)
        load_parameters(fused, state)
        # The reference takes the fused side's values back, so each side holds exactly the
        # values of the other's dtype.
        fused_params = dict(fused.named_parameters())
        load_parameters(reference, {n: fused_params[n].detach().float() for n in shapes})
    except NotImplementedError as exc:
        return CaseRun(_reference_only(reference, case, inputs, template), None, None, str(exc))
    except BackendError:
        raise  # the backend breaks the protocol: a usage error, not this case's failure
    except Exception as exc:
        error = SideError.of(exc, "construct")
        if isinstance(exc, ConstructError):
            error.message = str(exc)
        return CaseRun(_reference_only(reference, case, inputs, template), None, error)
    precision = Precision(case.torch_dtype, fp32_matmul(fused), case.fp8)
    upcast = inputs.upcast()
    slack = kink_slack(case.activation, precision, reference, upcast.xs, upcast.dys, upcast.splits)
    ref_obs = observe(reference, case, upcast, template.clone())
    # FP8: the twin starts from the fused side's state as built (scales, amax history).
    built_state = copy.deepcopy(fused.state_dict()) if case.quantized else None
    fused_obs = observe(fused, case, inputs, template, fp8.Autocast(case.fp8))
    own = None
    if built_state is not None and fused_obs.error is None:

        def build(c: Case) -> nn.Module:
            return build_fused(backend, c, sizes, device, None)  # the twin runs unfaulted

        try:
            own = own_gradients(build, case, built_state, inputs)
        except Exception as exc:  # the backend's own failure, not the checker's
            fused_obs.error = SideError.of(exc, "its own run without main_grad")
    return CaseRun(ref_obs, fused_obs, None, None, slack, precision, own)


def _reference_only(reference, case, inputs, template) -> Observations:
    """The reference's own run, so that a checker bug still shows when the fused side could
    not be built."""
    return observe(reference, case, inputs.upcast(), template.clone())
