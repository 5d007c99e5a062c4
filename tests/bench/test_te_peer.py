"""Transformer Engine's op fuser as the bench's peer: timed by default where TE is installed,
a ratio column, and a target per phase and preset shape, judged on the H200 run recorded in
docs/gpu-runs (TE 2.20.2, discrete weights)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from bench import compare, saved, timed_backends
from bench.phases import MODULE_PHASES
from bench.runner import Result
from bench.shapes import PRESETS
from bench.targets import TARGETS, evaluate
from bench.timing import Samples

RECORDED = (
    Path(__file__).resolve().parents[2]
    / "docs/gpu-runs/h200-session-2026-12-02/bench-discrete.json"
)


def _te_targets():
    return [t for t in TARGETS if t.reference == timed_backends.TE_PEER]


def test_every_phase_of_every_preset_has_a_target_against_te_ops():
    cells = {(t.shape, t.phase) for t in _te_targets()}
    assert cells == {(s, p) for s in PRESETS for p in MODULE_PHASES}
    assert all(t.kind == "speedup" and t.threshold == 1.0 for t in _te_targets())


def test_te_ops_is_timed_by_default_only_where_te_is_installed(monkeypatch):
    found = {"transformer_engine": None}
    monkeypatch.setattr(
        timed_backends.importlib.util, "find_spec", lambda name: found.get(name, object())
    )
    assert timed_backends.TE_PEER not in timed_backends.default_backends()
    found.clear()
    assert timed_backends.TE_PEER in timed_backends.default_backends()


def _recorded_results() -> list[Result]:
    doc = saved.with_layouts(json.loads(RECORDED.read_text()))
    return [
        Result(
            r["shape"],
            r["load"],
            r["impl"],
            r["phase"],
            r["status"],
            Samples(r["samples_ms"], r["warmup"] or 0, r["warmup_s"] or 0.0)
            if r["samples_ms"]
            else None,
            r["reason"],
            weights=r["weights"],
        )
        for r in doc["results"]
    ]


def test_the_recorded_h200_run_judges_each_te_ops_target_from_its_own_medians():
    results = _recorded_results()
    shapes = {s: PRESETS[s] for s in {r.shape for r in results}}
    bf16 = torch.bfloat16
    rows = evaluate(
        results, shapes, PRESETS, ["uniform"], layouts=["discrete"], comparable=True, dtype=bf16
    )
    judged = {r["id"]: r for r in rows if r["id"].endswith("-vs-te-ops")}
    assert len(judged) == len(shapes) * len(MODULE_PHASES)
    for target in _te_targets():
        row = judged.get(target.id)
        if row is None:
            continue
        cell = (target.shape, "uniform")
        mine = compare.median_ms(results, *cell, "triton", target.phase, weights="discrete")
        theirs = compare.median_ms(results, *cell, "te-ops", target.phase, weights="discrete")
        assert row["met"] == (theirs / mine >= 1.0)
    # The ratio column has a te-ops entry wherever both ran.
    pairs = {(r["reference"], r["impl"]) for r in compare.ratio_rows(results)}
    assert ("te-ops", "triton") in pairs
