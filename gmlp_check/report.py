"""Reports of a differential run: rich table, JSON (a stable, documented schema), JUnit XML.

JSON schema ``gmlp-check/diff/v1`` (``gmlp-check diff --format json``)::

    {
      "schema": "gmlp-check/diff/v1",
      "fused": "triton",                  # the --fused spec
      "inject": null,                     # the --inject fault, or null
      "device": "cpu",
      "sizes": {"experts": 4, "hidden": 16, "ffn": 12, "tokens": 20, "seed": 0},
      "engine": {"megatron": "emulated", "ranks": 1, "configs": null},
                                          # real: "ranks": N, "configs": the engine configs run
                                          # (gmlp_check.engines.configs), "megatron_core": version
      "summary": {"cases": 76, "passed": 76, "failed": 0, "skipped": 0, "xfailed": 0,
                  "xpassed": 0, "duration_s": 41.2},
      "cases": [
        {
          "id": "mode=overwrite-fsdp,delay=1,zero=0,single=1,bias=0,act=swiglu,...",
          "config": {"mode": "overwrite-fsdp", "delay": true, "zero_out": false,
                     "single": true, "bias": false, "activation": "swiglu",
                     "dtype": "fp32", "splits": "ragged-empty", "microbatches": 2},
          "passed": true,
          "status": "passed",             # passed | failed | skipped | xfailed | xpassed
          "reason": null,                 # why skipped, or the known deviation's reason
          "duration_s": 0.41,
          "rerun": "gmlp-check diff --fused triton --device cpu ... -k '<id>'",
          "diagnosis": null,              # a failing case: {"classes": [likely, ...],
                                          #   "symptoms": [...], "why": null}
          "checks": [
            {"observable": "output", "passed": true, "max_abs_err": 1.2e-07,
             "tolerance": 1.1e-05, "detail": "mb 2: worst 1.2e-07 <= 1.1e-05 at [3, 7]"}
          ]
        }
      ]
    }

``passed`` is true when every check passed (``status`` passed); ``max_abs_err`` and
``tolerance`` belong to the worst element of the check (the largest error / tolerance ratio);
both are null where no number applies (a NaN that survived, an exception, a flag), and
``tolerance`` is 0.0 for exact checks. Observable names are listed in
``gmlp_check.observables``. New keys may be added in v1; existing keys keep their meaning.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from .lint.json_text import display
from .results import STATUSES, CaseResult
from .session import Checker

SCHEMA = "gmlp-check/diff/v1"
_STYLE = {
    "passed": "[green]pass[/green]",
    "failed": "[bold red]FAIL[/bold red]",
    "skipped": "[yellow]skip[/yellow]",
    "xfailed": "[cyan]xfail[/cyan]",
    "xpassed": "[bold red]XPASS[/bold red]",
}


def _number(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _reason(result: CaseResult) -> str | None:
    if result.skip_reason is not None:
        return result.skip_reason
    return result.deviation.reason if result.deviation is not None else None


def case_json(result: CaseResult, checker: Checker) -> dict[str, object]:
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
        "status": result.status,
        "reason": _reason(result),
        "duration_s": round(result.duration_s, 4),
        "rerun": checker.rerun_command(result.case.id),
        "checks": checks,
        "diagnosis": None if result.diagnosis is None else result.diagnosis.to_json(),
        "source": result.source,
    }


def summary(results: Sequence[CaseResult]) -> dict[str, object]:
    counts = Counter(r.status for r in results)
    return {
        "cases": len(results),
        **{status: counts.get(status, 0) for status in STATUSES},
        "duration_s": round(sum(r.duration_s for r in results), 3),
    }


def diff_json(results: Sequence[CaseResult], checker: Checker) -> dict[str, object]:
    return {
        "schema": SCHEMA,
        "fused": checker.backend.spec,
        "inject": checker.fault.name if checker.fault else None,
        "device": checker.device.type,
        "sizes": checker.sizes.to_json(),
        "engine": checker.engine.to_json(),
        "summary": summary(results),
        "cases": [case_json(r, checker) for r in results],
    }


def _worst_text(result: CaseResult) -> str:
    worst = result.worst()
    if worst is not None and not worst.passed and worst.max_abs_err is None:
        return "n/a (see below)"  # a NaN, an exception or a flag: no number to show
    if worst is None or worst.max_abs_err is None or not worst.tolerance:
        return "-"
    return f"{worst.max_abs_err:.2e} / {worst.tolerance:.2e}"


def _title(checker: Checker) -> str:
    inject = f" with {checker.fault.name}" if checker.fault else ""
    return (
        f"gmlp-check diff: {checker.backend.spec}{inject} vs the reference on "
        f"{checker.device.type} ({checker.engine.describe()})"
    )


def print_table(console: Console, results: Sequence[CaseResult], checker: Checker) -> None:
    table = Table(title=_title(checker), title_justify="left")
    table.add_column("case", overflow="fold")
    table.add_column("result")
    table.add_column("worst |err| / tol", justify="right")
    table.add_column("failed observables")
    for r in results:
        table.add_row(
            r.case.id,
            _STYLE[r.status],
            _worst_text(r),
            ", ".join(r.failed_observables) or "-",
        )
    console.print(table)


def print_failures(console: Console, results: Sequence[CaseResult], checker: Checker) -> None:
    for r in results:
        if r.status not in ("failed", "xpassed"):
            continue
        # soft_wrap: long details and the rerun command stay on one line, ready to copy.
        console.print(f"\n{_STYLE[r.status]} {r.case.id}", highlight=False, soft_wrap=True)
        for line in r.explanation():
            console.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
        console.print(
            f"  rerun: {checker.rerun_command(r.case.id)}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summary_line(results: Sequence[CaseResult], checker: Checker) -> str:
    s = summary(results)
    sizes = checker.sizes
    inject = f", fault {checker.fault.name}" if checker.fault else ""
    counts = ", ".join(f"{s[k]} {k}" for k in STATUSES if s[k] or k in ("passed", "failed"))
    return (
        f"{_plural(int(s['cases']), 'case')}: {counts} in {s['duration_s']}s "
        f"(fused {checker.backend.spec}{inject} on {checker.device.type}, "
        f"{checker.engine.describe()}; experts "
        f"{sizes.experts}, hidden {sizes.hidden}, ffn {sizes.ffn}, tokens {sizes.tokens}, "
        f"seed {sizes.seed})"
    )


def junit_xml(results: Sequence[CaseResult], checker: Checker) -> bytes:
    """JUnit XML: one testsuite, one testcase per case; <failure> for failed and xpassed
    cases, <skipped> for unsupported ones and for known deviations (as pytest writes xfail)."""
    s = summary(results)
    failures = int(s["failed"]) + int(s["xpassed"])
    skipped = int(s["skipped"]) + int(s["xfailed"])
    inject = f", {checker.fault.name}" if checker.fault else ""
    name = f"gmlp-check diff ({checker.backend.spec}{inject}, {checker.device.type})"
    suites = ET.Element(
        "testsuites",
        name="gmlp-check",
        tests=str(s["cases"]),
        failures=str(failures),
        errors="0",
        time=f"{s['duration_s']:.3f}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=name,
        tests=str(s["cases"]),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time=f"{s['duration_s']:.3f}",
    )
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"gmlp_check.diff.{checker.backend.spec}",
            name=r.case.id,
            time=f"{r.duration_s:.3f}",
        )
        if r.status in ("failed", "xpassed"):
            lines = r.explanation()
            failure = ET.SubElement(
                case,
                "failure",
                message="; ".join(lines)[:500],
                type="mismatch" if r.status == "failed" else "xpass",
            )
            failure.text = "\n".join([*lines, f"rerun: {checker.rerun_command(r.case.id)}"])
            if r.diagnosis is not None and r.diagnosis.likely is not None:
                properties = ET.SubElement(case, "properties")
                ET.SubElement(properties, "property", name="diagnosis", value=r.diagnosis.likely)
        elif r.status in ("skipped", "xfailed"):
            ET.SubElement(
                case,
                "skipped",
                message=(_reason(r) or "")[:500],
                type="xfail" if r.status == "xfailed" else "unsupported",
            )
    for element in suites.iter():
        # A name that is not UTF-8 (a message quoting one) would be written as a character
        # reference to a surrogate, which no XML parser accepts: shown as in the JSON.
        element.attrib = {key: display(value) for key, value in element.attrib.items()}
        element.text = display(element.text) if element.text else element.text
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)
