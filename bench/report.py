"""The benchmark's JSON document (schema "gmlp-check-bench/1", README) and its rich table."""

from __future__ import annotations

import platform
import sys
from datetime import datetime, timezone

import torch
from rich.console import Console
from rich.table import Table

from gmlp_check.lint.json_text import dumps

from . import compare
from .flops import phase_bytes, phase_flops
from .phases import BASELINE_BACKEND, Workload
from .runner import Result

SCHEMA = "gmlp-check-bench/1"
NOT_COMPARABLE = "CPU, not comparable"


def environment(device: torch.device, clock_name: str) -> dict:
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _version("triton"),
        "platform": platform.platform(),
        "device": device.type,
        "device_name": platform.processor() or "CPU",
        "timing": clock_name,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            device_name=props.name,
            capability=f"{props.major}.{props.minor}",
            memory_gb=round(props.total_memory / 1e9, 1),
            cuda=torch.version.cuda,
        )
    return env


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:  # not installed, or broken: the report says so instead of failing
        return None


def result_row(result: Result, shapes: dict, element_bytes: int) -> dict:
    shape = shapes[result.shape]
    row = {
        "shape": result.shape,
        "load": result.load,
        "weights": result.weights,
        "phase": result.phase,
        "impl": result.backend,
        "status": result.status,
        "reason": result.reason,
        "median_ms": None,
        "min_ms": None,
        "max_ms": None,
        "samples_ms": [],
        "repeats": 0,
        "warmup": 0,
        "warmup_s": None,
        "flops": phase_flops(shape, result.phase),
        "tflops": None,
        "bytes": phase_bytes(shape, result.phase, element_bytes),
        "gbps": None,
        "peak_memory_gb": None
        if result.peak_memory_bytes is None
        else round(result.peak_memory_bytes / 1e9, 3),
        "wall_s": round(result.wall_s, 3),
    }
    if result.samples is not None:
        samples = result.samples
        seconds = samples.median_ms * 1e-3
        row.update(
            median_ms=_significant(samples.median_ms),
            min_ms=_significant(min(samples.times_ms)),
            max_ms=_significant(max(samples.times_ms)),
            samples_ms=[_significant(t) for t in samples.times_ms],
            repeats=len(samples.times_ms),
            warmup=samples.warmup,
            warmup_s=round(samples.warmup_s, 3),
            tflops=_rate(row["flops"], seconds, 1e12),
            gbps=_rate(row["bytes"], seconds, 1e9),
        )
    return row


def _rate(amount: int | None, seconds: float, unit: float) -> float | None:
    if amount is None or seconds <= 0:
        return None
    return _significant(amount / seconds / unit)


def _significant(value: float, digits: int = 6) -> float:
    """Rounded for a readable document, relatively: CPU and H200 figures differ by 10^5."""
    return float(f"{value:.{digits}g}")


def document(
    *,
    command: str,
    env: dict,
    settings: dict,
    workloads: list[Workload],
    results: list[Result],
    targets: list[dict],
    wall_s: float,
    comparable: bool,
    complete: bool = True,
) -> dict:
    shapes = {w.shape.name: w.shape for w in workloads}
    element_bytes = workloads[0].dtype.itemsize if workloads else 2
    shape_rows = []
    for name, shape in shapes.items():
        loads = {}
        for w in workloads:
            if w.shape.name == name:
                loads[w.load] = {
                    "split_sizes": w.splits,
                    "empty_experts": sum(1 for s in w.splits if s == 0),
                    "max_rows": max(w.splits),
                }
        shape_rows.append(
            {
                "name": name,
                "model": shape.model,
                "experts": shape.experts,
                "hidden": shape.hidden,
                "ffn": shape.ffn,
                "fc1_out": shape.fc1_out,
                "tokens": shape.tokens,
                "top_k": shape.top_k,
                "rows": shape.rows,
                "loads": loads,
            }
        )
    return {
        "schema": SCHEMA,
        "complete": complete,
        "comparable": comparable,
        "note": None if comparable else NOT_COMPARABLE,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "environment": env,
        "settings": settings,
        "shapes": shape_rows,
        "results": [result_row(r, shapes, element_bytes) for r in results],
        "ratios": compare.ratio_rows(results),
        "targets": targets,
        "wall_s": round(wall_s, 3),
    }


def json_bytes(doc: dict) -> bytes:
    """The document as --output writes it (gmlp_check.files.write_output)."""
    return (dumps(doc, allow_nan=False) + "\n").encode()


def print_json(doc: dict) -> None:
    sys.stdout.write(json_bytes(doc).decode())


# -- the table ------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int) -> str:
    """Fixed decimals for H200-sized figures, three significant digits for tiny CPU ones."""
    if value is None:
        return ""
    return f"{value:.{digits}f}" if abs(value) >= 1 else f"{value:.3g}"


def _fmt_ms(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.3f}" if value < 100 else f"{value:.1f}"


def workload_key(row: dict) -> tuple[str, str, str]:
    """Which workload a result row measured: its shape, load and weight layout."""
    return row["shape"], row["load"], row["weights"]


def print_tables(doc: dict, console: Console) -> None:
    comparable = doc["comparable"]
    env = doc["environment"]
    suffix = "" if comparable else f"  [bold red]({NOT_COMPARABLE})[/]"
    console.print(
        f"gmlp-check bench on {env['device_name']} ({doc['settings']['dtype']}, "
        f"{env['timing']}){suffix}"
    )
    speedups = {
        (r["shape"], r["load"], r["weights"], r["phase"], r["impl"], r["reference"]): r["value"]
        for r in doc["ratios"]
    }
    shapes = {s["name"]: s for s in doc["shapes"]}
    workloads = list(dict.fromkeys(workload_key(r) for r in doc["results"]))
    for shape_name, load, weights in workloads:
        shape = shapes[shape_name]
        title = (
            f"{shape_name} ({shape['model']}): {shape['experts']} experts, hidden "
            f"{shape['hidden']}, ffn {shape['ffn']}, {shape['rows']} rows, {load} load, "
            f"{weights} weights{'' if comparable else ' - ' + NOT_COMPARABLE}"
        )
        table = Table(title=title, title_justify="left")
        for column, justify in (
            ("phase", "left"),
            ("impl", "left"),
            ("median ms", "right"),
            ("TFLOP/s", "right"),
            ("GB/s", "right"),
            ("x vs torch-grouped-mm", "right"),
            ("x vs te-ops", "right"),
            ("x vs refimpl", "right"),
            ("time / baseline", "right"),
            ("repeats", "right"),
            ("status", "left"),
        ):
            table.add_column(column, justify=justify)
        told: set[tuple[str, str | None]] = set()  # each reason in full once per table
        for r in doc["results"]:
            if workload_key(r) != (shape_name, load, weights):
                continue
            key = (*workload_key(r), r["phase"], r["impl"])
            status = r["status"]
            if status != "ok":
                seen = (r["impl"], r["reason"]) in told
                told.add((r["impl"], r["reason"]))
                status += " (as above)" if seen else f": {r['reason']}"
            table.add_row(
                r["phase"],
                r["impl"],
                _fmt_ms(r["median_ms"]),
                _fmt(r["tflops"], 1),
                _fmt(r["gbps"], 0),
                _fmt(speedups.get((*key, "torch-grouped-mm")), 2),
                _fmt(speedups.get((*key, "te-ops")), 2),
                _fmt(speedups.get((*key, "refimpl")), 2),
                _fmt(speedups.get((*key, BASELINE_BACKEND)), 2),
                str(r["repeats"]) if r["repeats"] else "",
                status,
            )
        console.print(table)
    judged = [t for t in doc["targets"] if t["met"] is not None]
    if doc["targets"]:
        table = Table(title="performance targets", title_justify="left")
        for column in ("target", "load", "weights", "value", "threshold", "met"):
            table.add_column(column)
        for t in doc["targets"]:
            met = {True: "[green]yes[/]", False: "[red]no[/]", None: t["note"]}[t["met"]]
            value, threshold = _fmt(t["value"], 3), str(t["threshold"])
            table.add_row(t["text"], t["load"], t["weights"], value, threshold, met)
        if judged or comparable:
            console.print(table)
    spent = {}
    for r in doc["results"]:
        total, warm = spent.get(r["impl"], (0.0, 0.0))
        spent[r["impl"]] = (total + r["wall_s"], warm + (r["warmup_s"] or 0.0))
    per_backend = ", ".join(
        f"{backend} {total:.1f} s (warm-up {warm:.1f} s)"
        for backend, (total, warm) in spent.items()
    )
    state = "" if doc.get("complete", True) else " [bold red](incomplete run)[/]"
    console.print(f"total {doc['wall_s']:.1f} s: {per_backend}{state}")
