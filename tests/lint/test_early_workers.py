"""The worker processes started before the project facts, and the files they are given
before the facts are known (``engine._start_early``, ``workload.files_ahead``)."""

from __future__ import annotations

import multiprocessing

from gmlp_check.lint import engine, workload
from gmlp_check.lint.cache import Cache

from .support import ALL_CODES, write, write_plain_bulk
from .test_class_facts import BASE, UNRELATED, VARIANT
from .test_delayed_wgrad_facts import DDP, FSDP

# A run where facts decide how files are linted: fsdp.py's hook is analysed (and reported)
# only because ddp.py uses the delayed-wgrad contract; gated.py names no trigger but
# subclasses core/mlp.py's delayed-wgrad class.
FILES = {
    "fsdp.py": FSDP,
    "ddp.py": DDP,
    "core/mlp.py": BASE,
    "gated.py": VARIANT,
    "cfg.py": UNRELATED,
    "plain.py": "def add(a, b):\n    return a + b\n",
}


def _jobs(tmp_path, bulk: bool = False) -> list[engine.Job]:
    paths = [write(tmp_path / name, text) for name, text in FILES.items()]
    if bulk:
        paths += write_plain_bulk(tmp_path / "bulk", workload.PARALLEL_MIN_WORK)
    return [engine.Job(str(path), ALL_CODES) for path in paths]


def test_only_files_the_facts_cannot_change_go_ahead(tmp_path):
    jobs = [engine._with_data(job) for job in _jobs(tmp_path)]
    whatever = [workload.may_be_analysed(j.data, workload.EVERY_CONTRACT) for j in jobs]
    ahead = {jobs[i].path[len(str(tmp_path)) + 1 :] for i in workload.files_ahead(jobs, whatever)}
    # Not fsdp.py (analysed when another file uses the contract), not gated.py (given its
    # base's class facts), not the files naming a trigger themselves.
    assert ahead == {"cfg.py", "plain.py"}


def test_a_run_with_files_ahead_finds_what_a_serial_run_finds(tmp_path, monkeypatch):
    given = []
    real = engine.files_ahead

    def spy(*args):
        given.append(real(*args))
        return given[-1]

    monkeypatch.setattr(engine, "files_ahead", spy)
    jobs = _jobs(tmp_path, bulk=True)
    serial = engine.run(jobs, engine.Mode(), workers=1)
    assert given == []
    parallel = engine.run(jobs, engine.Mode(), workers=2)
    assert len(given) == 1 and len(given[0]) == len(jobs) - 4  # all but the four above
    found = {(r.path, f.code, f.line) for r in parallel for f in r.findings}
    assert found == {(r.path, f.code, f.line) for r in serial for f in r.findings}
    assert {(path.rsplit("/", 1)[-1], code) for path, code, _ in found} >= {
        ("fsdp.py", "GMLP028"),
        ("gated.py", "GMLP020"),
    }


def test_the_workers_start_before_the_facts_only_when_no_cache_is_read(tmp_path, monkeypatch):
    started = []
    real = engine.with_project_facts

    def spy(jobs):
        started.append(len(multiprocessing.active_children()))
        return real(jobs)

    monkeypatch.setattr(engine, "with_project_facts", spy)
    jobs = _jobs(tmp_path, bulk=True)
    engine.run(jobs, engine.Mode(), workers=2)
    # A cache may hold every file: then no worker is started for nothing.
    engine.run(jobs, engine.Mode(), workers=2, cache=Cache(tmp_path / "cache"))
    assert started[0] == 2 and started[1] == 0
