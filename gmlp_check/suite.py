"""The differential suite as a library: what pytest (our tests and the plugin) runs per case."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .harness import Factory
from .report import Settings
from .runner import (
    CaseResult,
    UsageError,
    check_dtypes,
    refused_dtypes,
    resolve_device,
    resolve_factory,
    run_case,
)
from .scenarios import (
    ACTIVATION_NAMES,
    DEVICE_DTYPES,
    DEVICE_SIZES,
    DTYPES,
    MODES,
    Case,
    Sizes,
    build_cases,
)
from .selection import SelectionError


@dataclass
class DiffSuite:
    """A fused side, a device and sizes; selects and runs cases and explains failures. The
    CLI, our tests and the pytest plugin all go through it.

    ``create`` and ``cases`` raise ``runner.UsageError`` with a message naming the bad option."""

    settings: Settings
    device: torch.device
    factory: Factory

    @classmethod
    def create(
        cls,
        spec: str,
        device: str = "auto",
        *,
        inject: str | None = None,
        experts: int | None = None,
        hidden: int | None = None,
        ffn: int | None = None,
        tokens: int | None = None,
        seed: int = 0,
    ) -> DiffSuite:
        device_obj = resolve_device(device)
        base = DEVICE_SIZES[device_obj.type]
        try:
            sizes = Sizes(
                experts=base.experts if experts is None else experts,
                hidden=base.hidden if hidden is None else hidden,
                ffn=base.ffn if ffn is None else ffn,
                tokens=base.tokens if tokens is None else tokens,
                seed=seed,
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        factory = resolve_factory(spec, inject)
        settings = Settings(fused=spec, device=device_obj.type, sizes=sizes, inject=inject)
        return cls(settings, device_obj, factory)

    @property
    def sizes(self) -> Sizes:
        return self.settings.sizes

    def cases(
        self,
        dtypes: Sequence[str] = (),
        activations: Sequence[str] = (),
        modes: Sequence[str] = (),
        keyword: str | None = None,
    ) -> list[Case]:
        """The selected cases (see scenarios.build_cases). Without explicit dtypes, the
        device's dtypes that the fused side does not refuse; UsageError for a dtype it
        refuses, a malformed -k, or an empty selection."""
        spec = self.settings.fused
        for option, given, known in (
            ("--dtype", dtypes, DTYPES),
            ("--activation", activations, ACTIVATION_NAMES),
            ("--mode", modes, MODES),
        ):
            unknown = [v for v in given if v not in known]
            if unknown:
                raise UsageError(
                    f"{option}: expected values from {', '.join(known)}, got {unknown}"
                )
        try:
            full_id = Case.from_id(keyword.strip()) if keyword else None
        except ValueError:
            full_id = None
        wanted = [full_id.dtype] if full_id else list(dtypes)
        candidates = wanted or list(DEVICE_DTYPES[self.device.type])
        check_dtypes(spec, self.device, wanted)
        refused = refused_dtypes(self.factory, self.sizes, self.device, candidates)
        if wanted and refused:
            name, why = next(iter(refused.items()))
            raise UsageError(f"--dtype {name}: --fused {spec} refuses it here: {why}")
        usable = [d for d in candidates if d not in refused]
        if not usable:
            why = "; ".join(f"{d}: {msg}" for d, msg in refused.items())
            raise UsageError(f"--fused {spec}: refuses every dtype on {self.device.type} ({why})")
        try:
            cases = build_cases(self.device.type, usable, activations, modes, keyword)
        except SelectionError as exc:
            raise UsageError(str(exc)) from None
        except ValueError as exc:  # an unknown mode, activation or dtype name
            raise UsageError(str(exc)) from None
        if not cases:
            raise UsageError(f"-k {keyword!r}: no case of the matrix matches (see --list)")
        return cases

    def run(self, case: Case) -> CaseResult:
        return run_case(case, self.sizes, self.device, self.factory)

    def failure_message(self, result: CaseResult) -> str:
        lines = [f"{result.case.id}: the fused side differs from the reference"]
        lines += [f"  {c.observable}: {c.detail}" for c in result.checks if not c.passed]
        lines.append(f"  rerun: {self.settings.rerun_command(result.case.id)}")
        return "\n".join(lines)
