"""One differential run: a fused backend, a device, sizes, optionally an injected fault and the
backend's known deviations, and the Megatron engine around the modules: emulated, or real
(megatron-core DDP and Megatron-FSDP, on one or more ranks: gmlp_check.engines). The command
line, the pytest plugin, ``mutants`` and the tests all go through ``Checker``: it selects
cases, runs them and explains failures.

Errors in what the user asked for (options, the backend spec, a factory that breaks the
protocol) raise ``UsageError`` with one line naming the option; the CLIs exit 2 on it.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from gmlp_check.refimpl import ACTIVATIONS
from gmlp_check.refimpl.config import MLPConfig

from . import backends, capacity, deviations, faults, fp8, warmup
from .devices import resolve_device
from .engine import Emulated, Engine, Real
from .engines import availability, process_groups
from .engines import configs as engine_configs
from .errors import UsageError, not_an_exception
from .inputs import DEVICE_SIZES, Sizes
from .matrix import DEVICE_DTYPES, DTYPES, MODES, Case, MatrixSelection, default_matrix, torch_dtype
from .options import RunOptions
from .results import CaseResult
from .selection import SelectionError, compile_expression
from .tolerance import Precision, fp32_matmul


@dataclass
class Checker:
    backend: backends.Backend
    device: torch.device
    sizes: Sizes
    fault: faults.Fault | None = None
    known: tuple[deviations.Deviation, ...] = ()
    engine: Engine = field(default_factory=Emulated)
    notes: list[str] = field(default_factory=list)  # one-line remarks on the selection

    @classmethod
    def from_options(cls, options: RunOptions, *, can_launch: bool = False) -> Checker:
        """``can_launch``: the caller starts ``nproc`` workers itself when this process is not
        one of them (``gmlp-check diff``); otherwise --nproc > 1 needs torchrun."""
        device = resolve_device(options.device)
        base = DEVICE_SIZES[device.type]
        try:
            sizes = Sizes(
                experts=base.experts if options.experts is None else options.experts,
                hidden=base.hidden if options.hidden is None else options.hidden,
                ffn=base.ffn if options.ffn is None else options.ffn,
                tokens=base.tokens if options.tokens is None else options.tokens,
                seed=options.seed,
            )
            fault = faults.get(options.inject) if options.inject else None
            megatron = availability.resolve(options.megatron, device)
            selected = engine_configs.select(options.engine_configs)
            nproc = _ranks(options, device, megatron, can_launch)
            if megatron == "real":
                process_groups.select_device(device)
            backend = backends.load(options.fused)
        except ValueError as exc:  # Sizes, FaultError and BackendError are ValueErrors
            raise UsageError(str(exc)) from None
        if options.engine_configs and megatron != "real":
            raise UsageError(
                "--engine-configs: selects configurations of the real engines, but this run "
                "uses the emulated one (see --megatron)"
            )
        names = tuple(c.name for c in selected) if options.engine_configs else ()
        engine: Engine = Real(nproc, names) if megatron == "real" else Emulated()
        known = engine.known_deviations(options.fused)
        checker = cls(backend, device, sizes, None, known, engine)
        return checker if fault is None else checker.with_fault(fault)

    def with_fault(self, fault: faults.Fault) -> Checker:
        """This checker with ``fault`` injected. A fault changes what the backend does, so the
        backend's deviation table no longer applies."""
        return replace(self, fault=fault, known=())

    # -- ranks ----------------------------------------------------------------------------
    @property
    def needs_launch(self) -> bool:
        """This process must start the ranks itself (--nproc N > 1 outside a launch)."""
        return self.nproc > 1 and not process_groups.launched()

    @property
    def nproc(self) -> int:
        """Data-parallel ranks (more than one only under the real engines)."""
        return self.engine.nproc

    @property
    def reports(self) -> bool:
        """Whether this process prints and writes reports: rank 0 only."""
        return self.engine.reports

    def close(self) -> None:
        """Leave the process group of the real engines (a no-op otherwise)."""
        self.engine.close()

    def warm_up_plan(self, cases: Sequence[Case], workers: int | None) -> warmup.Plan | None:
        """The parallel compile before running ``cases`` (gmlp_check.warmup); None when there
        is nothing to warm: ``workers`` 0, a backend that does not compile on first use (unless
        ``workers`` is given), the CPU, ranks of a multi-process run, or an already warm
        machine."""
        if workers is not None and workers < 0:
            raise UsageError(f"--compile-workers: expected a count >= 0, got {workers}")
        if self.nproc > 1 or self.device.type != "cuda":
            return None
        entry = backends.BUILTIN.get(self.backend.spec)
        compiles = entry is not None and entry.compiles_on_first_use
        if workers is None:
            groups = len(warmup.representatives(cases))
            workers = warmup.default_workers(compiles, self.device, groups)
        # The built-in sources key the "already warm" marker; anyone's factory warms each run.
        source = None
        if compiles:
            source = Path(sys.modules[self.backend.factory.__module__].__file__).parent
        return warmup.plan(self.backend.spec, source, self.device, self.sizes, cases, workers)

    # -- what the backend can run -------------------------------------------------------
    def refusal(self, dtype: str) -> str | None:
        """Why the fused side refuses ``dtype`` on this device (its factory raised
        NotImplementedError), or None. A factory that fails otherwise, or breaks the
        protocol, or cannot take the injected fault, is a UsageError: no case could run."""
        try:
            module = self._build(dtype)
        except NotImplementedError as exc:
            return str(exc) or "not implemented"
        if self.fault is not None and (why := faults.refusal(self.fault, module)):
            raise UsageError(f"--inject {self.fault.name}: {why}")
        return None

    def fault_refusal(self, dtype: str) -> str | None:
        """Why the fused side cannot take the injected fault in ``dtype`` (a policy fault on a
        backend without a main_grad policy), or None; None too when no fault is
        injected or the factory refuses ``dtype`` altogether."""
        if self.fault is None:
            return None
        try:
            module = self._build(dtype)
        except NotImplementedError:
            return None
        return faults.refusal(self.fault, module)

    def precision(self, case: Case) -> Precision:
        """How the fused side computes ``case``: its dtype, whether its fp32 GEMMs run in TF32
        (the module says so), and the case's FP8 recipe. What its values are judged by."""
        return Precision(torch_dtype(case.dtype), fp32_matmul(self._build(case.dtype)), case.fp8)

    def _build(self, dtype: str) -> torch.nn.Module:
        """A module of the fused side in ``dtype``; NotImplementedError passes through, any
        other failure is a UsageError."""
        try:
            config = MLPConfig(
                num_experts=self.sizes.experts,
                hidden=self.sizes.hidden,
                ffn=self.sizes.ffn,
                dtype=torch_dtype(dtype),
                device=self.device,
            )
            return self.backend.build(config)
        except NotImplementedError:
            raise
        except backends.BackendError as exc:  # a factory that exits is one, too (build)
            raise UsageError(str(exc)) from None
        except Exception as exc:
            raise UsageError(
                f"--fused {self.backend.spec}: the factory failed to build a {dtype} module on "
                f"{self.device.type} ({backends.short(exc)})"
            ) from None

    def select(self, options: RunOptions) -> list[Case]:
        """The cases a run selects: the default matrix for the device's dtypes the backend
        supports (or the given ones), narrowed by -k. A -k that is a complete case id selects
        exactly that case, so a rerun command always finds it."""
        unknown = [d for d in options.dtype if d not in DTYPES]
        if unknown:
            raise UsageError(f"--dtype: expected values from {', '.join(DTYPES)}, got {unknown}")
        keyword = options.k.strip() if options.k else None
        full_id = _parse_id(keyword)
        wanted = [full_id.dtype] if full_id else list(options.dtype)
        candidates = wanted or list(DEVICE_DTYPES[self.device.type])
        self._check_capacity(candidates)
        refused = {d: why for d in candidates if (why := self.refusal(d)) is not None}
        if wanted and refused:
            name, why = next(iter(refused.items()))
            raise UsageError(f"--dtype {name}: --fused {self.backend.spec} refuses it here: {why}")
        usable = [d for d in candidates if d not in refused]
        if not usable:
            why = "; ".join(f"{d}: {msg}" for d, msg in refused.items())
            raise UsageError(
                f"--fused {self.backend.spec}: refuses every dtype on {self.device.type} ({why})"
            )
        if full_id is not None:
            return [full_id]
        try:
            selection = MatrixSelection(
                tuple(usable),
                tuple(options.activation) or tuple(ACTIVATIONS),
                tuple(options.mode) or tuple(MODES),
                self._fp8_recipes(options.fp8),
            )
            cases = default_matrix(selection)
            if keyword:
                matcher = compile_expression(keyword)
                cases = [c for c in cases if matcher(c.id)]
        except (SelectionError, ValueError) as exc:
            raise UsageError(str(exc)) from None
        if not cases:
            raise UsageError(f"-k {keyword!r}: no case of the matrix matches (see --list)")
        return cases

    def _fp8_recipes(self, given: tuple[str, ...]) -> tuple[str, ...]:
        """The FP8 recipes a run crosses: those given (none: none), else every recipe on CUDA
        for a fused side that declares FP8 compute; on the CPU none, said in one line."""
        if given:
            return tuple(r for r in given if r != fp8.NONE)
        if self.device.type != "cuda":
            self.notes.append("fp8: the FP8 axis runs on CUDA with Transformer Engine; skipped")
            return ()
        try:
            declares = fp8.declares_fp8(self._build("bf16"))
        except NotImplementedError:
            declares = False
        if not declares:
            attr, value = fp8.DECLARATION
            self.notes.append(
                f"fp8: --fused {self.backend.spec} declares no FP8 compute ({attr} = "
                f"{value!r}); the FP8 axis is skipped"
            )
            return ()
        return tuple(fp8.RECIPES)

    def _check_capacity(self, dtypes: list[str]) -> None:
        """UsageError before any module is built when the sizes can never fit."""
        sizes = {name: getattr(self.sizes, name) for name in ("experts", "hidden", "ffn", "tokens")}
        element_size = max(torch_dtype(d).itemsize for d in dtypes if d in DTYPES)
        if why := capacity.refusal(sizes, element_size, self.device):
            raise UsageError(why)

    # -- running ------------------------------------------------------------------------
    def run(self, case: Case) -> CaseResult:
        try:
            return self.engine.run(self, case)
        # An Exception the engine let through; Ctrl-C or SIGTERM (interrupts.py).
        except (Exception, KeyboardInterrupt):
            raise
        except BaseException as exc:  # the fused side left by sys.exit or another non-Exception
            raise UsageError(
                f"--fused {self.backend.spec}: {not_an_exception(exc)} in case {case.id}; "
                "a factory or a forward must raise an Exception, never exit"
            ) from None

    def run_all(
        self,
        cases: Iterable[Case],
        on_result: Callable[[CaseResult], None] | None = None,
        stop_at_first_failure: bool = False,
    ) -> list[CaseResult]:
        results = []
        for case in cases:
            result = self.run(case)
            results.append(result)
            if on_result is not None:
                on_result(result)
            if stop_at_first_failure and not result.ok:
                break
        return results

    # -- explaining ---------------------------------------------------------------------
    def rerun_command(self, case_id: str) -> str:
        words = ["gmlp-check", "diff", "--fused", self.backend.spec, "--device", self.device.type]
        if self.fault:
            words += ["--inject", self.fault.name]
        words += ["--megatron", self.engine.name]
        if self.nproc > 1:
            words += ["--nproc", str(self.nproc)]
        for name in self.engine.config_names:
            words += ["--engine-configs", name]
        # Quoted even where the shell would not need it, so the id reads as one argument.
        return f"{shlex.join([*words, *self.sizes.as_options(), '-k'])} '{case_id}'"

    def failure_message(self, result: CaseResult) -> str:
        lines = [f"{result.case.id}: {result.status}"]
        lines += [f"  {line}" for line in result.explanation()]
        lines.append(f"  rerun: {self.rerun_command(result.case.id)}")
        return "\n".join(lines)


def _ranks(options: RunOptions, device: torch.device, megatron: str, can_launch: bool) -> int:
    """The number of data-parallel ranks the run has; ValueError naming --nproc when it
    cannot have them."""
    nproc = options.nproc
    if nproc is not None and nproc < 1:
        raise ValueError(f"--nproc: expected an int >= 1, got {nproc}")
    if process_groups.launched():
        world = process_groups.from_env().world
        if nproc is not None and nproc != world:
            raise ValueError(
                f"--nproc {nproc}: this process is one of WORLD_SIZE={world} workers (torchrun "
                f"or gmlp-check's launcher); give --nproc {world} or leave it out"
            )
        nproc = world
    nproc = nproc or 1
    if nproc > 1 and megatron != "real":
        why = availability.unavailable_reason(device)
        raise ValueError(
            f"--nproc {nproc}: several ranks need the real engines (--megatron real)"
            + (f"; {why}" if why else "")
        )
    if nproc > 1 and not process_groups.launched():
        gpus = torch.cuda.device_count()
        if nproc > gpus:
            raise ValueError(f"--nproc {nproc}: one process per GPU, and there are {gpus} here")
        if not can_launch:
            raise ValueError(
                f"--nproc {nproc}: start the ranks with torchrun --nproc-per-node {nproc} "
                "(gmlp-check diff starts them itself)"
            )
    return nproc


def _parse_id(keyword: str | None) -> Case | None:
    if not keyword:
        return None
    try:
        return Case.from_id(keyword)
    except ValueError:
        return None
