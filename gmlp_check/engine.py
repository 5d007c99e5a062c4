"""The Megatron engine around the modules of a run: ``Emulated`` (gmlp_check.refimpl.megatron,
CPU or CUDA, one process) or ``Real`` (megatron-core DDP and Megatron-FSDP, gmlp_check.engines,
on one or more ranks). Both answer the same questions, so the checker and its reports never
compare the ``--megatron`` value: how a case runs, which known deviations apply, who reports,
how the engine is named in reports and rerun commands.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import backends, deviations, observables
from .checks import Check, Context
from .diagnosis import diagnose
from .engines import configs as engine_configs
from .engines import process_groups
from .errors import UsageError
from .pair import run_pair
from .results import CaseResult

if TYPE_CHECKING:
    from .matrix import Case
    from .session import Checker


@dataclass
class Emulated:
    """Megatron's data-parallel hooks emulated around both modules, in this process."""

    name = "emulated"  # what --megatron takes
    nproc = 1
    config_names: tuple[str, ...] = ()

    def known_deviations(self, spec: str) -> tuple[deviations.Deviation, ...]:
        """The fused side's known deviations, as its backend entry lists them."""
        return backends.known_deviations(spec)

    @property
    def reports(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to leave."""

    def describe(self) -> str:
        return "emulated Megatron"

    def to_json(self) -> dict[str, object]:
        return {"megatron": self.name, "ranks": self.nproc, "configs": None}

    def run(self, checker: Checker, case: Case) -> CaseResult:
        start = time.perf_counter()
        deviation = deviations.expected_for(checker.known, case.id)
        try:
            pair = run_pair(case, checker.sizes, checker.device, checker.backend, checker.fault)
        except backends.BackendError as exc:
            raise UsageError(str(exc)) from None
        except Exception as exc:  # a failure of the checker itself must not hide the other cases
            return CaseResult(case, [checker_failed(exc)], time.perf_counter() - start)
        if pair.unsupported is not None:
            return CaseResult(case, [], time.perf_counter() - start, pair.unsupported)
        context = Context(case, checker.sizes, pair)
        try:
            checks = observables.compare(context)
        except Exception as exc:
            checks = [checker_failed(exc)]
        try:
            found = diagnose(context, checks)
        except Exception:  # an explanation that fails must not change the verdict
            found = None
        return CaseResult(case, checks, time.perf_counter() - start, None, deviation, found)


@dataclass
class Real:
    """megatron-core's DistributedDataParallel and Megatron-FSDP, one rank per process."""

    name = "real"
    nproc: int = 1
    config_names: tuple[str, ...] = ()  # the --engine-configs selection (empty: the default)
    _runner: object = field(default=None, repr=False)  # engines.real_run.RealEngine, once used

    def known_deviations(self, spec: str) -> tuple[deviations.Deviation, ...]:
        """None of the backend's: the engine configurations carry their own expectations
        (gmlp_check.engines.configs), judged per configuration."""
        return ()

    @property
    def reports(self) -> bool:
        """Rank 0 prints and writes the reports."""
        return process_groups.current().rank == 0

    def close(self) -> None:
        """Leave the process group, once a case has joined it."""
        if self._runner is not None:
            process_groups.shutdown()
            self._runner = None

    def describe(self) -> str:
        ranks = f", {self.nproc} ranks" if self.nproc > 1 else ""
        return f"real Megatron engines{ranks}"

    def to_json(self) -> dict[str, object]:
        from .engines.availability import megatron_core_version

        return {
            "megatron": self.name,
            "ranks": self.nproc,
            "configs": [c.name for c in engine_configs.select(self.config_names)],
            "megatron_core": megatron_core_version(),
        }

    def runner(self, checker: Checker):
        if self._runner is None:
            from .engines.real_run import RealEngine

            configs = engine_configs.select(self.config_names)
            self._runner = RealEngine(
                checker.backend, checker.device, checker.sizes, checker.fault, configs
            )
        return self._runner

    def run(self, checker: Checker, case: Case) -> CaseResult:
        runner = self.runner(checker)
        try:
            runner.start()
        except Exception as exc:  # NCCL, the rendezvous, parallel_state: the environment
            raise UsageError(
                f"--megatron real: cannot set up torch.distributed ({backends.short(exc)})"
            ) from None
        try:
            return runner.run(case)
        except backends.BackendError as exc:
            raise UsageError(str(exc)) from None


Engine = Emulated | Real


def checker_failed(exc: Exception) -> Check:
    """The check that reports a failure of the checker itself on a case."""
    return Check(
        "reference", False, None, None, f"the checker failed on this case: {backends.short(exc)}"
    )
