"""One case under the real engines, on every rank: the reference's data-parallel result, then
the fused side under each selected engine configuration of the case's flavour for ``STEPS``
training steps, judged on each rank and merged over the ranks (merge.py).

All ranks run every case together (the engines' collectives need it). Before anything that
communicates, the ranks agree (one all_gather_object) on whether the case and each
configuration can run, so an error on one rank never leaves the others in a collective. An
exception *inside* a step on some ranks only can still do that: the process group's timeout
(process_groups.TIMEOUT) then ends the run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from gmlp_check.refimpl import GroupedMLP
from gmlp_check.refimpl.sentinels import uninitialized_memory_as_nan

from ..backends import Backend, BackendError, short
from ..checks import Check
from ..faults import Fault
from ..matrix import Case
from ..pair import build_fused, load_parameters
from ..results import CaseResult
from ..tolerance import Precision, fp32_matmul
from . import process_groups
from .configs import EngineConfig, for_mode
from .merge import ConfigOutcome, RankOutcome, case_result
from .real_checks import ConfigRun, Judge
from .reference import microbatches, promised, rank_data, run_reference
from .step import EngineError, GradObserver, run_step
from .wrapped import mark_params
from .wrapping import wrap

# Overlapped reductions are dispatched from the hooks only from the second step on (the first
# only counts the hooks: megatron-core 0.19.2 ``_ParamAndGradBucketGroup.reset`` and
# ``.finish_grad_sync``), so a fused side that writes main_grad after its hook fired shows from
# step 2.
STEPS = 2


class RealEngine:
    """Runs cases under the real engines; ``start`` joins (or creates) the process group."""

    def __init__(
        self,
        backend: Backend,
        device: torch.device,
        sizes,
        fault: Fault | None,
        configs: Sequence[EngineConfig],
    ) -> None:
        self.backend = backend
        self.device = device
        self.sizes = sizes
        self.fault = fault
        self.configs = tuple(configs)
        self.rank: process_groups.Rank | None = None

    def start(self) -> process_groups.Rank:
        if self.rank is None:
            self.rank = process_groups.ensure(self.device)
        return self.rank

    def run(self, case: Case) -> CaseResult:
        """The case's merged result (identical on every rank). A backend that breaks the
        protocol raises BackendError on every rank alike."""
        start = time.perf_counter()
        rank = self.start()
        try:
            with uninitialized_memory_as_nan():
                outcome = self._run_local(case, rank)
        except BackendError:
            raise
        except Exception as exc:  # a bug of the checker: report it, keep the ranks in step
            detail = f"the checker failed on this case: {short(exc)}"
            outcome = RankOutcome(checks=[Check("reference", False, None, None, detail)])
        gathered = process_groups.gather(outcome)
        return case_result(case, gathered, STEPS, time.perf_counter() - start)

    # -- one rank -------------------------------------------------------------------------
    def _agree(self, error: object) -> object | None:
        """The first rank's error (None when no rank has one)."""
        return next((e for e in process_groups.gather(error) if e is not None), None)

    def _run_local(self, case: Case, rank: process_groups.Rank) -> RankOutcome:
        if case.quantized:
            # Not built yet: TE's autocast around the engines' forward, and Megatron-FSDP's
            # FP8 parameters (fp8_param_gather, preserve_high_precision_init_val).
            return RankOutcome(
                skip_reason="fp8: the FP8 axis runs under the emulated engine only "
                "(--megatron emulated)"
            )
        configs = for_mode(self.configs, case.mode)
        if not configs:
            return RankOutcome(skip_reason=f"no selected engine config runs mode {case.mode}")
        # The reference: plain autograd, outputs into .grad, exact fp32 weight gradients.
        plain = case.mlp_config(self.sizes, self.device).replace(
            accumulate_into_main_grad=False, delay_wgrad_compute=False, dtype=torch.float32
        )
        reference = GroupedMLP(plain)
        shapes = {n: p.shape for n, p in reference.named_parameters()}
        state, inputs = rank_data(case, self.sizes, shapes, self.device, rank.rank, STEPS)
        failure: RankOutcome | None = None
        try:
            fused = build_fused(self.backend, case, self.sizes, self.device, self.fault)
            load_parameters(fused, state)
            values = {n: p.detach().float() for n, p in fused.named_parameters()}
        except NotImplementedError as exc:
            failure = RankOutcome(skip_reason=str(exc) or "not implemented")
        except BackendError:
            raise
        except Exception as exc:
            failure = RankOutcome(checks=[Check("construct", False, None, None, short(exc))])
        agreed = self._agree(failure)
        if agreed is not None:
            return failure or agreed
        # Each side holds exactly the values of the other's dtype (as pair.py does).
        load_parameters(reference, values)
        precision = Precision(case.torch_dtype, fp32_matmul(fused))
        ref_steps = [run_reference(reference, i, case.activation, precision) for i in inputs]
        judge = Judge(
            case,
            self.sizes,
            precision,
            rank.world,
            shapes,
            {n: p.dtype for n, p in fused.named_parameters()},
            ref_steps,
            [promised(s) for s in ref_steps],
        )
        del fused
        batches = [microbatches(i) for i in inputs]
        return RankOutcome([self._run_config(case, c, state, batches, judge) for c in configs])

    def _run_config(self, case, config, state, batches, judge: Judge) -> ConfigOutcome:
        outcome = ConfigOutcome(config.name)
        wrapped, refusal = None, None
        try:
            module = build_fused(self.backend, case, self.sizes, self.device, self.fault)
            load_parameters(module, state)
            mark_params(module, delay=case.delay, zero_out=case.zero_out)
            observer = GradObserver(
                module, keep_weight_values=not case.mode_spec.accumulate_into_main_grad
            )
            try:
                wrapped = wrap(module, config, delay=case.delay, device=self.device)
            except Exception as exc:  # the engine refuses this configuration
                refusal = f"the engine refused it: {short(exc)}"
        except Exception as exc:
            refusal = f"the fused side could not be rebuilt for it: {short(exc)}"
        agreed = self._agree(refusal)
        if agreed is not None:
            outcome.skip_reason = str(agreed)
            return outcome
        run = ConfigRun([], [], observer.records)
        try:
            for step, mbs in enumerate(batches):
                run.records.append(run_step(wrapped, step, mbs, observer))
                try:
                    run.readings.append(wrapped.read())
                except Exception as exc:
                    raise EngineError(
                        f"step {step + 1} reading the reduced gradients", exc
                    ) from exc
        except EngineError as exc:
            detail = f"{exc.where}: {short(exc.original)}"
            outcome.checks = [Check("run", False, None, None, detail)]
            return outcome
        outcome.checks, outcome.last_only = judge.checks(run)
        outcome.coverage = {
            name: [(r[name].lo, r[name].hi, r[name].numel) for r in run.readings]
            for name in run.readings[0]
        }
        return outcome
