"""Reports of a differential run: rich table, JSON (a stable, documented schema), JUnit XML.

JSON schema ``gmlp-check/diff/v1`` (``gmlp-check diff --format json``)::

    {
      "schema": "gmlp-check/diff/v1",
      "fused": "triton",                  # the --fused spec
      "inject": null,                     # the --inject fault, or null
      "device": "cpu",
      "sizes": {"experts": 4, "hidden": 16, "ffn": 12, "tokens": 20, "seed": 0},
      "summary": {"cases": 76, "passed": 76, "failed": 0, "duration_s": 41.2},
      "cases": [
        {
          "id": "mode=overwrite-fsdp,delay=1,zero=0,single=1,bias=0,act=swiglu,...",
          "config": {"mode": "overwrite-fsdp", "delay": true, "zero_out": false,
                     "single": true, "bias": false, "activation": "swiglu",
                     "dtype": "fp32", "splits": "ragged-empty", "microbatches": 2},
          "passed": true,
          "duration_s": 0.41,
          "rerun": "gmlp-check diff --fused triton --device cpu ... -k '<id>'",
          "checks": [
            {"observable": "output", "passed": true, "max_abs_err": 1.2e-07,
             "tolerance": 1.1e-05, "detail": "mb 2: worst 1.2e-07 <= 1.1e-05 at [3, 7]"}
          ]
        }
      ]
    }

``max_abs_err`` and ``tolerance`` belong to the worst element of the check (the largest
error / tolerance ratio); both are null where no number applies (a NaN that survived, an
exception, a flag), and ``tolerance`` is 0.0 for exact checks. Observable names are listed in
``gmlp_check.compare``. New keys may be added in v1; existing keys keep their meaning.
"""

from __future__ import annotations

import math
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from .runner import CaseResult
from .scenarios import Sizes

SCHEMA = "gmlp-check/diff/v1"


@dataclass(frozen=True)
class Settings:
    """What a run was: enough to rerun any one of its cases."""

    fused: str
    device: str
    sizes: Sizes
    inject: str | None = None

    def rerun_command(self, case_id: str) -> str:
        words = ["gmlp-check", "diff", "--fused", self.fused, "--device", self.device]
        if self.inject:
            words += ["--inject", self.inject]
        # Quoted even where the shell would not need it, so the id reads as one argument.
        return f"{shlex.join([*words, *self.sizes.as_options(), '-k'])} '{case_id}'"


def _number(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def case_json(result: CaseResult, settings: Settings) -> dict[str, object]:
    checks = []
    for c in result.checks:
        entry = c.to_json()
        entry["max_abs_err"] = _number(c.max_abs_err)
        entry["tolerance"] = _number(c.tolerance)
        checks.append(entry)
    return {
        "id": result.case.id,
        "config": result.case.config(),
        "passed": result.passed,
        "duration_s": round(result.duration_s, 4),
        "rerun": settings.rerun_command(result.case.id),
        "checks": checks,
    }


def summary(results: Sequence[CaseResult]) -> dict[str, object]:
    passed = sum(r.passed for r in results)
    return {
        "cases": len(results),
        "passed": passed,
        "failed": len(results) - passed,
        "duration_s": round(sum(r.duration_s for r in results), 3),
    }


def diff_json(results: Sequence[CaseResult], settings: Settings) -> dict[str, object]:
    return {
        "schema": SCHEMA,
        "fused": settings.fused,
        "inject": settings.inject,
        "device": settings.device,
        "sizes": {
            "experts": settings.sizes.experts,
            "hidden": settings.sizes.hidden,
            "ffn": settings.sizes.ffn,
            "tokens": settings.sizes.tokens,
            "seed": settings.sizes.seed,
        },
        "summary": summary(results),
        "cases": [case_json(r, settings) for r in results],
    }


def _worst_text(result: CaseResult) -> str:
    worst = result.worst()
    if worst is not None and not worst.passed and worst.max_abs_err is None:
        return "n/a (see below)"  # a NaN, an exception or a flag: no number to show
    if worst is None or worst.max_abs_err is None or not worst.tolerance:
        return "-"
    return f"{worst.max_abs_err:.2e} / {worst.tolerance:.2e}"


def print_table(console: Console, results: Sequence[CaseResult], settings: Settings) -> None:
    table = Table(
        title=f"gmlp-check diff: {settings.fused} vs refimpl on {settings.device}",
        title_justify="left",
    )
    table.add_column("case", overflow="fold")
    table.add_column("result")
    table.add_column("worst |err| / tol", justify="right")
    table.add_column("failed observables")
    for r in results:
        table.add_row(
            r.case.id,
            "[green]pass[/green]" if r.passed else "[bold red]FAIL[/bold red]",
            _worst_text(r),
            ", ".join(r.failed_observables) or "-",
        )
    console.print(table)


def print_failures(console: Console, results: Sequence[CaseResult], settings: Settings) -> None:
    for r in results:
        if r.passed:
            continue
        # soft_wrap: long details and the rerun command stay on one line, ready to copy.
        console.print(f"\n[bold red]FAIL[/bold red] {r.case.id}", highlight=False, soft_wrap=True)
        for c in r.checks:
            if not c.passed:
                console.print(
                    f"  {c.observable}: {c.detail}", highlight=False, markup=False, soft_wrap=True
                )
        console.print(
            f"  rerun: {settings.rerun_command(r.case.id)}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


def summary_line(results: Sequence[CaseResult], settings: Settings) -> str:
    s = summary(results)
    sizes = settings.sizes
    inject = f", fault {settings.inject}" if settings.inject else ""
    return (
        f"{s['cases']} cases: {s['passed']} passed, {s['failed']} failed in {s['duration_s']}s "
        f"(fused {settings.fused}{inject} on {settings.device}; experts {sizes.experts}, "
        f"hidden {sizes.hidden}, ffn {sizes.ffn}, tokens {sizes.tokens}, seed {sizes.seed})"
    )


def junit_xml(results: Sequence[CaseResult], settings: Settings) -> bytes:
    """JUnit XML: one testsuite, one testcase per case, a <failure> per failing case."""
    s = summary(results)
    name = f"gmlp-check diff ({settings.fused}{', ' + settings.inject if settings.inject else ''}"
    name += f", {settings.device})"
    suites = ET.Element(
        "testsuites",
        name="gmlp-check",
        tests=str(s["cases"]),
        failures=str(s["failed"]),
        errors="0",
        time=f"{s['duration_s']:.3f}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=name,
        tests=str(s["cases"]),
        failures=str(s["failed"]),
        errors="0",
        skipped="0",
        time=f"{s['duration_s']:.3f}",
    )
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"gmlp_check.diff.{settings.fused}",
            name=r.case.id,
            time=f"{r.duration_s:.3f}",
        )
        failing = [c for c in r.checks if not c.passed]
        if failing:
            failure = ET.SubElement(
                case,
                "failure",
                message="; ".join(f"{c.observable}: {c.detail}" for c in failing)[:500],
                type="mismatch",
            )
            lines = [f"{c.observable}: {c.detail}" for c in failing]
            lines.append(f"rerun: {settings.rerun_command(r.case.id)}")
            failure.text = "\n".join(lines)
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)
