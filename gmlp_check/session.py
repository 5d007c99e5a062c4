"""One differential run: a fused backend, a device, sizes, optionally an injected fault and the
backend's known deviations. The command line, the pytest plugin, ``mutants`` and the tests
all go through ``Checker``: it selects cases, runs them and explains failures.

Errors in what the user asked for (options, the backend spec, a factory that breaks the
protocol) raise ``UsageError`` with one line naming the option; the CLIs exit 2 on it.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from gmlp_check.refimpl import ACTIVATIONS

from . import backends, deviations, faults, observables
from .checks import Check, Context
from .devices import UsageError, resolve_device
from .inputs import DEVICE_SIZES, Sizes
from .matrix import DEVICE_DTYPES, DTYPES, MODES, Case, Selection, default_matrix
from .options import RunOptions
from .pair import run_pair
from .results import CaseResult
from .selection import SelectionError, compile_expression


@dataclass
class Checker:
    backend: backends.Backend
    device: torch.device
    sizes: Sizes
    fault: faults.Fault | None = None
    known: tuple[deviations.Deviation, ...] = ()

    @classmethod
    def from_options(cls, options: RunOptions) -> Checker:
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
            backend = backends.load(options.fused)
        except ValueError as exc:  # Sizes, FaultError and BackendError are ValueErrors
            raise UsageError(str(exc)) from None
        # A fault changes what the backend does, so its deviation table no longer applies.
        known = () if fault else deviations.for_backend(options.fused)
        return cls(backend, device, sizes, fault, known)

    # -- what the backend can run -------------------------------------------------------
    def refusal(self, dtype: str) -> str | None:
        """Why the fused side refuses ``dtype`` on this device (its factory raised
        NotImplementedError), or None. A factory that fails otherwise, or breaks the
        protocol, is a UsageError: no case could run."""
        try:
            module = self.backend.build(
                num_experts=self.sizes.experts,
                hidden=self.sizes.hidden,
                ffn=self.sizes.ffn,
                dtype=DTYPES[dtype],
                device=self.device,
            )
        except NotImplementedError as exc:
            return str(exc) or "not implemented"
        except backends.BackendError as exc:
            raise UsageError(str(exc)) from None
        except Exception as exc:
            raise UsageError(
                f"--fused {self.backend.spec}: the factory failed to build a {dtype} module on "
                f"{self.device.type} ({backends.short(exc)})"
            ) from None
        if self.fault is not None and (why := faults.refusal(self.fault, module)):
            raise UsageError(f"--inject {self.fault.name}: {why}")
        return None

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
            selection = Selection(
                tuple(usable),
                tuple(options.activation) or tuple(ACTIVATIONS),
                tuple(options.mode) or tuple(MODES),
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

    # -- running ------------------------------------------------------------------------
    def run(self, case: Case) -> CaseResult:
        start = time.perf_counter()
        deviation = deviations.expected_for(self.known, case.id)
        try:
            pair = run_pair(case, self.sizes, self.device, self.backend, self.fault)
        except backends.BackendError as exc:
            raise UsageError(str(exc)) from None
        except Exception as exc:  # a harness failure must not hide the other cases
            detail = f"the checker failed on this case: {backends.short(exc)}"
            return CaseResult(
                case, [Check("reference", False, None, None, detail)], time.perf_counter() - start
            )
        if pair.unsupported is not None:
            return CaseResult(case, [], time.perf_counter() - start, pair.unsupported)
        try:
            checks = observables.compare(Context(case, self.sizes, pair))
        except Exception as exc:
            checks = [
                Check(
                    "reference",
                    False,
                    None,
                    None,
                    f"the checker failed on this case: {backends.short(exc)}",
                )
            ]
        return CaseResult(case, checks, time.perf_counter() - start, None, deviation)

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
        # Quoted even where the shell would not need it, so the id reads as one argument.
        return f"{shlex.join([*words, *self.sizes.as_options(), '-k'])} '{case_id}'"

    def failure_message(self, result: CaseResult) -> str:
        lines = [f"{result.case.id}: {result.status}"]
        lines += [f"  {line}" for line in result.explanation()]
        lines.append(f"  rerun: {self.rerun_command(result.case.id)}")
        return "\n".join(lines)


def _parse_id(keyword: str | None) -> Case | None:
    if not keyword:
        return None
    try:
        return Case.from_id(keyword)
    except ValueError:
        return None
