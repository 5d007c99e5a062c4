"""Regenerate the documentation's tables from the declarations they document, or check them.

    python scripts/readme_tables.py            # rewrite every generated table (README, docs/)
    python scripts/readme_tables.py --check    # exit 1 if one is stale (the tests run this)

A generated table sits between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->`` in
README.md or a file docs/*.md; NAME picks its generator below. Everything else is left alone.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"(<!-- generated: ([\w-]+) -->\n)(.*?)(<!-- end: \2 -->)", re.S)


def _modes() -> str:
    from gmlp_check.matrix import MODES

    lines = ["| mode | output into main_grad | parameters | overwrite | meaning |",
             "|---|---|---|---|---|"]  # fmt: skip
    for m in MODES.values():
        owner = "Megatron-FSDP" if m.fsdp else "Megatron DDP"
        lines.append(
            f"| `{m.name}` | {m.accumulate_into_main_grad} | {owner} | {m.overwrite} | "
            f"{m.description} |"
        )
    return "\n".join(lines)


def _faults() -> str:
    from gmlp_check.faults import FAULTS

    lines = ["| fault | bug class | kind |", "|---|---|---|"]
    for f in FAULTS.values():
        lines.append(f"| `{f.name}` | {f.bug_class} | {f.kind} |")
    return "\n".join(lines)


def _backends() -> str:
    from gmlp_check.backends import BUILTIN

    lines = ["| spec | module:factory | what it builds |", "|---|---|---|"]
    lines += [f"| `{name}` | `{e.target}` | {e.doc} |" for name, e in BUILTIN.items()]
    return "\n".join(lines)


def _lint_rules() -> str:
    from gmlp_check.lint.registry import markdown_table

    return markdown_table()


def _recorded_runs() -> str:
    """Every recorded diff run of a built-in backend under docs/gpu-runs/, one row each, from
    the run's own JSON: which engine, how many cases (FP8 ones among them), the outcome."""
    import json

    from gmlp_check.backends import BUILTIN

    root = README.parent / "docs" / "gpu-runs"
    lines = [
        "| backend | engine | cases (FP8) | passed | skipped | xfailed | failed | recorded in |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for path in sorted(root.glob("*/*.json")):
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or doc.get("schema") != "gmlp-check/diff/v1":
            continue
        if doc.get("fused") not in BUILTIN:
            continue
        engine = doc.get("engine") or {}
        where = engine.get("megatron", "emulated")
        if where == "real":
            where = f"real, {engine.get('ranks', 1)} rank(s)"
        summary = doc["summary"]
        fp8_cases = sum("fp8=" in case["id"] for case in doc.get("cases", []))
        lines.append(
            f"| `{doc['fused']}` | {where} | {summary['cases']} ({fp8_cases}) | "
            f"{summary['passed']} | {summary['skipped']} | {summary['xfailed']} | "
            f"{summary['failed']} | `{path.relative_to(README.parent)}` |"
        )
    return "\n".join(lines)


# The recorded H200 run every performance figure in the docs comes from: all preset shapes,
# both loads, both weight layouts, Transformer Engine's op fuser beside the fused path.
BENCH_RUN = "docs/bench-h200.json"
BENCH_BACKENDS = ("refimpl", "torch-grouped-mm", "te-ops", "triton")


def _bench_doc() -> dict:
    import json

    from gmlp_check.bench.saved import with_layouts

    return with_layouts(json.loads((README.parent / BENCH_RUN).read_text()))


def _ms(doc: dict, field: str = "median_ms") -> dict[tuple[str, str, str, str, str], float]:
    """(shape, load, weights, impl, phase) -> ``field`` (median ms unless told) of every
    measurement that ran."""
    return {
        (r["shape"], r["load"], r["weights"], r["impl"], r["phase"]): r[field]
        for r in doc["results"]
        if r["status"] == "ok"
    }


def _cell(values: list[float | None], suffix: str = "") -> str:
    return " / ".join("n/a" if v is None else f"{v:.2f}{suffix}" for v in values)


def _bench_h200() -> str:
    """Per shape, load and layout: the step of every backend, triton's TFLOP/s and speed-ups,
    and the weight gradient into main_grad against the bare bf16 GEMM."""
    doc = _bench_doc()
    ms = _ms(doc)
    tflops = _ms(doc, "tflops")
    env, settings = doc["environment"], doc["settings"]
    lines = [
        f"{env['device_name']}, torch {env['torch']}, Triton {env['triton']}, "
        f"{settings['dtype']}, whole run {doc['wall_s']:.0f} s; command:",
        "",
        f"    {doc['command']}",
        "",
        "| shape | load | weights | step ms: " + " / ".join(BENCH_BACKENDS) + " | triton "
        "TFLOP/s | triton speed-up vs " + " / ".join(BENCH_BACKENDS[:3]) + " | wgrad-accumulate "
        "ms: bf16 `_grouped_mm` baseline / te-ops / triton |",
        "|---|---|---|---|---:|---|---|",
    ]
    cells = dict.fromkeys(key[:3] for key in ms)
    for shape, load, weights in cells:
        where = (shape, load, weights)
        step = [ms.get((*where, impl, "step")) for impl in BENCH_BACKENDS]
        mine = ms.get((*where, "triton", "step"))
        speedups = [None if t is None or mine is None else t / mine for t in step[:3]]
        wgrad = [
            ms.get((*where, "torch._grouped_mm", "wgrad-baseline")),
            ms.get((*where, "te-ops", "wgrad-accumulate")),
            ms.get((*where, "triton", "wgrad-accumulate")),
        ]
        rate = tflops.get((*where, "triton", "step"))
        rate_cell = "n/a" if rate is None else f"{rate:.0f}"
        lines.append(
            f"| {shape} | {load} | {weights} | {_cell(step)} | {rate_cell} | "
            f"{_cell(speedups, 'x')} | {_cell(wgrad)} |"
        )
    return "\n".join(lines)


def _bench_vs_te() -> str:
    """Per shape and phase (uniform load, each layout where te-ops ran), the median ms of
    triton, te-ops and torch-grouped-mm in the recorded run, and triton's speed-up over
    te-ops."""
    ms = _ms(_bench_doc())
    lines = [
        "| shape | weights | phase | triton ms | te-ops ms | torch-grouped-mm ms "
        "| triton speed-up vs te-ops |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    cells = dict.fromkeys(
        (shape, weights, phase)
        for shape, load, weights, impl, phase in ms
        if impl == "te-ops" and load == "uniform"
    )
    for shape, weights, phase in cells:
        mine, te, torch_mm = (
            ms.get((shape, "uniform", weights, b, phase))
            for b in ("triton", "te-ops", "torch-grouped-mm")
        )
        speedup = f"{te / mine:.2f}x" if te and mine else "n/a"
        row = [f"{v:.2f}" if v else "n/a" for v in (mine, te, torch_mm)]
        lines.append(f"| {shape} | {weights} | {phase} | {' | '.join(row)} | {speedup} |")
    lines.append("")
    lines.append(f"Recorded in `{BENCH_RUN}`.")
    return "\n".join(lines)


def _bench_targets() -> str:
    """Every performance target the recorded run judged, from its medians; a count of those
    it could not judge (a backend unavailable for that layout)."""
    doc = _bench_doc()
    lines = ["| target | load | weights | value | threshold | met |", "|---|---|---|---:|---:|---|"]
    judged = [t for t in doc["targets"] if t["met"] is not None]
    for t in judged:
        met = "yes" if t["met"] else "**no**"
        lines.append(
            f"| {t['text']} | {t['load']} | {t['weights']} | {t['value']:.3g} | "
            f"{t['threshold']} | {met} |"
        )
    met = sum(t["met"] for t in judged)
    lines.append("")
    lines.append(
        f"{met} of {len(judged)} judged targets met; "
        f"{len(doc['targets']) - len(judged)} not judged (not measured in this run)."
    )
    return "\n".join(lines)


def _deviations(spec: str) -> Callable[[], str]:
    def table() -> str:
        from gmlp_check.backends import known_deviations
        from gmlp_check.deviations import markdown_table

        return markdown_table(spec, known_deviations(spec))

    return table


def _generators() -> dict[str, Callable[[], str]]:
    from gmlp_check.backends import BUILTIN
    from gmlp_check.engines.configs import markdown_configs, markdown_upstream
    from gmlp_check.fp8 import markdown_table as markdown_fp8
    from gmlp_check.matrix import markdown_axes, markdown_parts
    from gmlp_check.observables import markdown_table

    generators = {
        "engine-configs": markdown_configs,
        "engine-deviations": markdown_upstream,
        "axes": markdown_axes,
        "parts": markdown_parts,
        "modes": _modes,
        "observables": markdown_table,
        "faults": _faults,
        "backends": _backends,
        "lint-rules": _lint_rules,
        "fp8-recipes": markdown_fp8,
        "recorded-runs": _recorded_runs,
        "bench-vs-te": _bench_vs_te,
        "bench-h200": _bench_h200,
        "bench-targets": _bench_targets,
    }
    for spec in BUILTIN:
        generators[f"deviations-{spec}"] = _deviations(spec)
    return generators


def render(text: str) -> tuple[str, list[str]]:
    """The README with every generated block rewritten; the names of blocks with no generator."""
    generators = _generators()
    unknown: list[str] = []

    def replace(match: re.Match) -> str:
        name = match.group(2)
        if name not in generators:
            unknown.append(name)
            return match.group(0)
        return f"{match.group(1)}{generators[name]()}\n{match.group(4)}"

    return _BLOCK.sub(replace, text), unknown


def documents() -> list[Path]:
    """README.md and the docs/*.md files beside it."""
    return [README, *sorted((README.parent / "docs").glob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a table is stale")
    args = parser.parse_args(argv)
    rendered = {}
    for path in documents():
        text = path.read_text()
        new, unknown = render(text)
        if unknown:
            print(f"{path.name}: no generator for block(s) {', '.join(unknown)}", file=sys.stderr)
            return 2
        rendered[path] = (text, new)
    stale = [p.name for p, (old, new) in rendered.items() if old != new]
    if args.check:
        if stale:
            print(f"{', '.join(stale)}: generated tables are stale; run "
                  "python scripts/readme_tables.py", file=sys.stderr)  # fmt: skip
            return 1
        return 0
    for path, (old, new) in rendered.items():
        if old != new:
            path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
