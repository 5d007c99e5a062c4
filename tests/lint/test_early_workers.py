"""The worker processes started before the project facts, and the files they are given
before the facts are known (``engine._start_early``, ``workload.files_ahead``)."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Future

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
    # A cache that holds nothing yet (a first run) lints every file: the workers start early
    # and the run's entries are still written.
    first = engine.run(jobs, engine.Mode(), workers=2, cache=Cache(tmp_path / "cache"))
    # Now it may hold every file: then no worker is started for nothing.
    again = engine.run(jobs, engine.Mode(), workers=2, cache=Cache(tmp_path / "cache"))
    assert started == [2, 2, 0]
    found = [{(f.code, f.line) for f in r.findings} for r in first]
    assert found == [{(f.code, f.line) for f in r.findings} for r in again]
    assert any(found)


class _InlinePool:
    """Runs each task at once, recording which jobs were handed out, in order."""

    def __init__(self) -> None:
        self.handed: list[list[str]] = []

    def submit(self, function, jobs, mode) -> Future:
        self.handed.append([job.path for job in jobs])
        future: Future = Future()
        future.set_result(function(jobs, mode))
        return future

    def close(self) -> None:
        pass

    stop = close


def test_files_ahead_not_yet_started_are_handed_out_after_the_analysed_files(tmp_path):
    jobs = [engine._with_data(job) for job in _jobs(tmp_path)]
    started, waiting = Future(), Future()
    started.set_running_or_notify_cancel()  # a worker holds it: it is not handed out again
    started.set_result([engine.process(jobs[4], engine.Mode())])
    ahead = {started: [4], waiting: [5]}  # cfg.py, plain.py
    pool = _InlinePool()
    results: list = [None] * len(jobs)
    work = [workload.estimate_work(job) for job in jobs]
    engine._run_pool(jobs, work, engine.Mode(), 2, results, None, pool, ahead)
    names = [[path.rsplit("/", 1)[-1] for path in chunk] for chunk in pool.handed]
    assert names[-1] == ["plain.py"] and all("cfg.py" not in chunk for chunk in names)
    assert sorted(n for chunk in names for n in chunk) == [
        "ddp.py",
        "fsdp.py",
        "gated.py",
        "mlp.py",
        "plain.py",
    ]
    assert all(result is not None for result in results)
