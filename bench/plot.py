"""The comparison plot: one panel per shape, load and weight layout, TFLOP/s per phase, one bar
per backend.

TFLOP/s (model FLOPs, flops.py) rather than milliseconds, so that phases of different sizes
share an axis; the axis is logarithmic because the per-expert loop and the fused kernels are
orders of magnitude apart on the many-expert shapes. Measurements that did not happen
(unavailable, error) are marked "n/a" instead of a bar.
"""

from __future__ import annotations

import io

from .phases import BASELINE_BACKEND, PHASES
from .report import NOT_COMPARABLE, workload_key


def render_png(doc: dict) -> bytes:
    """The plot as PNG bytes, written by the caller (gmlp_check.files.write_output)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    results = doc["results"]
    cells = {(*workload_key(r), r["impl"], r["phase"]): r for r in results}
    workloads = list(dict.fromkeys(workload_key(r) for r in results))
    shapes = list(dict.fromkeys(shape for shape, _, _ in workloads))
    # One column per load and layout that the run measured.
    columns = list(dict.fromkeys((load, weights) for _, load, weights in workloads))
    backends = list(dict.fromkeys(r["impl"] for r in results))
    phases = [p for p in PHASES if any(r["phase"] == p for r in results)]
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color = {backend: palette[i % len(palette)] for i, backend in enumerate(backends)}
    # One slot per backend that has a row in that phase, centred on the phase's tick.
    slots = {p: [i for i in backends if any(r["impl"] == i and r["phase"] == p for r in results)]
             for p in phases}  # fmt: skip
    width = 0.8 / max(len(s) for s in slots.values())

    fig, axes = plt.subplots(
        len(shapes),
        len(columns),
        figsize=(6.5 * len(columns), 3.4 * len(shapes) + 0.8),
        squeeze=False,
    )
    for row, shape in enumerate(shapes):
        for col, (load, weights) in enumerate(columns):
            ax = axes[row][col]
            ax.set_title(f"{shape}, {load} load, {weights} weights", fontsize=10)
            for x, phase in enumerate(phases):
                for i, backend in enumerate(slots[phase]):
                    cell = cells.get((shape, load, weights, backend, phase))
                    if cell is None:
                        continue
                    position = x + width * (i - (len(slots[phase]) - 1) / 2)
                    value = cell["tflops"]
                    if value is None or value <= 0:
                        ax.text(
                            position,
                            0.02,
                            "n/a",
                            rotation=90,
                            fontsize=6,
                            ha="center",
                            va="bottom",
                            transform=ax.get_xaxis_transform(),
                        )
                        continue
                    ax.bar(position, value, width, color=color[backend])
            ax.set_yscale("log")
            ax.set_xticks(range(len(phases)))
            ax.set_xticklabels(phases, rotation=20, fontsize=8)
            ax.set_ylabel("TFLOP/s (model FLOPs)", fontsize=8)
            ax.grid(axis="y", which="both", alpha=0.3)
    labels = [f"{i} (bf16 wgrad, no main_grad)" if i == BASELINE_BACKEND else i for i in backends]
    fig.legend(
        [Patch(color=color[i]) for i in backends], labels, loc="upper right", fontsize=8, ncol=2
    )
    env = doc["environment"]
    title = f"gmlp-check bench: {env['device_name']}, {doc['settings']['dtype']}"
    if not doc["comparable"]:
        title += f" ({NOT_COMPARABLE})"
    fig.suptitle(title, fontsize=11, x=0.02, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    # Rendered in memory, so a failed write leaves no half-written PNG behind.
    image = io.BytesIO()
    try:
        fig.savefig(image, format="png", dpi=110)
    finally:
        plt.close(fig)
    return image.getvalue()
