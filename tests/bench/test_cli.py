"""`gmlp-check bench` end to end on CPU at the tiny shape, through the click command."""

import json
import os
import shlex
import statistics

import pytest
import torch
from click.testing import CliRunner

from gmlp_check.bench import runner
from gmlp_check.bench.flops import phase_bytes, phase_flops
from gmlp_check.bench.phases import PHASES, Workload
from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.bench.timing import RepeatPolicy, WallClock
from gmlp_check.cli import main
from gmlp_check.refimpl import GroupedMLP

FAST = ["--device", "cpu", "--shape", "tiny", "--warmup", "1", "--repeats", "2", "--no-progress"]
WGRAD_PHASES = ("wgrad-accumulate", "wgrad-overwrite", "wgrad-baseline")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def bench(*args: str):
    return CliRunner().invoke(main, ["bench", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def refimpl_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    result = bench(
        *FAST, "--impl", "refimpl", "--format", "json",
        "--output", str(out / "bench.json"), "--plot", str(out / "bench.png"),
    )  # fmt: skip
    return result, out


def test_tiny_run_writes_a_complete_document(refimpl_run):
    result, out = refimpl_run
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "bench.json").read_text())
    assert doc["schema"] == "gmlp-check-bench/1"
    assert doc["complete"] is True
    assert doc["comparable"] is False
    assert doc["note"] == "CPU, not comparable"
    assert doc["environment"]["timing"] == "wall-clock"
    assert doc["settings"]["dtype"] == "float32"
    assert doc["command"].startswith("gmlp-check bench --device cpu --shape tiny")
    for key in ("created", "shapes", "results", "ratios", "targets", "wall_s"):
        assert key in doc

    (shape,) = doc["shapes"]
    tiny = PRESETS["tiny"]
    assert shape["rows"] == tiny.rows
    for load in ("uniform", "skewed"):
        assert sum(shape["loads"][load]["split_sizes"]) == tiny.rows
    assert shape["loads"]["skewed"]["empty_experts"] == tiny.experts // 4

    cells = {(r["load"], r["impl"], r["phase"]) for r in doc["results"]}
    expected = {(load, "refimpl", p) for load in ("uniform", "skewed") for p in PHASES[:-1]}
    expected |= {(load, "torch._grouped_mm", "wgrad-baseline") for load in ("uniform", "skewed")}
    assert cells == expected
    for r in doc["results"]:
        assert r["status"] == "ok", r
        assert r["repeats"] == 2 == len(r["samples_ms"])
        assert all(t > 0 for t in r["samples_ms"])
        assert r["median_ms"] == pytest.approx(statistics.median(r["samples_ms"]), rel=1e-5)
        assert r["flops"] == phase_flops(tiny, r["phase"]) > 0
        assert r["tflops"] == pytest.approx(r["flops"] / (r["median_ms"] * 1e-3) / 1e12, rel=1e-3)
        if r["phase"] in WGRAD_PHASES:
            assert r["bytes"] == phase_bytes(tiny, r["phase"], 4)
            assert r["gbps"] > 0
        else:
            assert r["bytes"] is None and r["gbps"] is None


def test_the_recorded_command_reruns_the_same_settings(refimpl_run, tmp_path):
    _, out = refimpl_run
    doc = json.loads((out / "bench.json").read_text())
    program, subcommand, *args = shlex.split(doc["command"])
    assert (program, subcommand) == ("gmlp-check", "bench")
    again = bench(*args, "--no-progress", "--output", str(tmp_path / "again.json"))
    assert again.exit_code == 0, again.output
    rerun = json.loads((tmp_path / "again.json").read_text())
    assert rerun["settings"] == doc["settings"]
    assert rerun["command"] == doc["command"]


def test_time_over_baseline_is_the_ratio_of_the_medians(refimpl_run):
    _, out = refimpl_run
    doc = json.loads((out / "bench.json").read_text())
    median = {(r["load"], r["impl"], r["phase"]): r["median_ms"] for r in doc["results"]}
    over = [r for r in doc["ratios"] if r["kind"] == "time_over_baseline"]
    assert {(r["load"], r["phase"]) for r in over} == {
        (load, phase)
        for load in ("uniform", "skewed")
        for phase in ("wgrad-accumulate", "wgrad-overwrite")
    }
    for r in over:
        expected = (
            median[(r["load"], "refimpl", r["phase"])]
            / median[(r["load"], "torch._grouped_mm", "wgrad-baseline")]
        )
        assert r["value"] == pytest.approx(expected, rel=1e-3)


def test_targets_are_not_judged_on_cpu(refimpl_run):
    _, out = refimpl_run
    doc = json.loads((out / "bench.json").read_text())
    assert all(t["met"] is None for t in doc["targets"])


def test_plot_is_a_png(refimpl_run):
    _, out = refimpl_run
    data = (out / "bench.png").read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 10_000  # a rendered figure, not an empty canvas


def test_from_redraws_the_plot_and_prints_the_table_of_a_saved_document(refimpl_run, tmp_path):
    _, out = refimpl_run
    png = tmp_path / "again.png"
    drawn = bench("--from", str(out / "bench.json"), "--plot", str(png))
    assert drawn.exit_code == 0, drawn.output
    assert png.read_bytes().startswith(PNG_SIGNATURE)
    table = bench("--from", str(out / "bench.json"))
    assert table.exit_code == 0 and "refimpl" in table.stdout
    again = bench("--from", str(out / "bench.json"), "--format", "json")
    assert json.loads(again.stdout) == json.loads((out / "bench.json").read_text())


@pytest.mark.parametrize("content", ["not json", '{"schema": "other/1"}', "[1, 2]"])
def test_from_a_file_that_is_not_a_bench_document_is_a_usage_error(tmp_path, content):
    path = tmp_path / "x.json"
    path.write_text(content)
    result = bench("--from", str(path))
    assert result.exit_code == 2 and "--from" in result.output
    assert "Traceback" not in result.output
    assert bench("--from", str(tmp_path / "missing.json")).exit_code == 2


def test_from_an_empty_name_is_named_as_given():
    # click made '' the current directory: "--from '.': cannot read: Is a directory".
    result = bench("--from", "")
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == "Error: --from: expected a file name, got ''"


def _from_error_line(tmp_path, doc: dict) -> str:
    """The one error line of ``bench --from`` on ``doc``, after checking it is a usage error."""
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(doc))
    result = bench("--from", str(path))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert "--from" in line and "missing" in line
    return line


@pytest.mark.parametrize("dropped", [("results",), ("environment", "wall_s")])
def test_from_a_bench_document_without_its_fields_names_what_is_missing(
    refimpl_run, tmp_path, dropped
):
    _, out = refimpl_run
    doc = json.loads((out / "bench.json").read_text())
    for key in dropped:
        del doc[key]
    line = _from_error_line(tmp_path, doc)
    assert all(repr(key) in line for key in dropped)


def test_from_a_document_with_only_the_schema_is_a_usage_error(tmp_path):
    line = _from_error_line(tmp_path, {"schema": "gmlp-check-bench/1"})
    assert "'results'" in line


def _spoiled(doc: dict, where: str, value) -> dict:
    """``doc`` with the field at ``where`` (``results.0.tflops``) set to ``value``."""
    *path, last = [int(p) if p.isdigit() else p for p in where.split(".")]
    holder = doc
    for part in path:
        holder = holder[part]
    holder[last] = value
    return doc


@pytest.mark.parametrize(
    ("where", "value", "named"),
    [
        ("environment", None, "environment is None, expected an object"),
        ("settings", {}, "settings has no 'dtype'"),
        ("shapes", 1, "shapes is 1, expected a list"),
        ("results", [{}], "results[0] has no 'shape'"),
        ("results.0.tflops", "x", "results[0].tflops is 'x', expected a number or null"),
        ("results.0.phase", 3, "results[0].phase is 3, expected a string"),
        ("results.0.status", None, "results[0].status is None, expected a string"),
        ("results.0.shape", "nosuch", "results[0].shape 'nosuch' names no entry of shapes"),
        ("targets.0.met", "x", "targets[0].met is 'x', expected true, false or null"),
        ("wall_s", None, "wall_s is None, expected a number"),
    ],
)
@pytest.mark.parametrize("output", [[], ["--format", "json"], ["--plot", "PNG"]])
def test_from_a_bench_document_with_a_field_of_the_wrong_kind_names_it(
    refimpl_run, tmp_path, where, value, named, output
):
    _, out = refimpl_run
    doc = _spoiled(json.loads((out / "bench.json").read_text()), where, value)
    path = tmp_path / "spoiled.json"
    path.write_text(json.dumps(doc))
    output = [str(tmp_path / "x.png") if o == "PNG" else o for o in output]
    result = CliRunner().invoke(main, ["bench", "--from", str(path), *output])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"Error: --from {str(path)!r}: not a gmlp-check-bench/1 document: {named}"
    )
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[" * 100_000, "JSON nested too deeply to read"),
        ('{"schema": "gmlp-check-bench/1", "wall_s": NaN}', "NaN is not a JSON value"),
    ],
)
def test_from_json_python_cannot_nest_or_json_does_not_have_is_one_line(tmp_path, content, message):
    path = tmp_path / "odd.json"
    path.write_text(content)
    result = CliRunner().invoke(main, ["bench", "--from", str(path)])
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert line.startswith(f"Error: --from {str(path)!r}: ") and message in line


def test_from_a_document_without_results_draws_no_plot(refimpl_run, tmp_path):
    _, out = refimpl_run
    doc = json.loads((out / "bench.json").read_text())
    doc.update(results=[], ratios=[], complete=False)
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(doc))
    result = CliRunner().invoke(
        main, ["bench", "--from", str(path), "--plot", str(tmp_path / "p.png")]
    )
    assert result.exit_code == 2, result.output
    assert "--plot: no result of a phase to draw" in result.output
    assert not (tmp_path / "p.png").exists()


def test_written_files_get_the_umask_mode_not_0600(refimpl_run):
    _, out = refimpl_run
    mask = os.umask(0)
    os.umask(mask)
    for name in ("bench.json", "bench.png"):
        assert (out / name).stat().st_mode & 0o777 == 0o666 & ~mask, name


def test_runner_hands_over_each_finished_workload():
    """What `--output` checkpoints after every workload, so a stopped run keeps its results."""
    tiny = PRESETS["tiny"]
    workloads = [
        Workload(tiny, load, split_sizes(tiny, load), torch.float32, torch.device("cpu"), True)
        for load in ("uniform", "skewed")
    ]
    seen = []
    results = runner.run(
        workloads,
        ["refimpl"],
        ["forward", "wgrad-baseline"],
        WallClock(),
        RepeatPolicy(warmup=1, repeats=1),
        on_workload_done=lambda so_far: seen.append([(r.load, r.phase) for r in so_far]),
    )
    assert seen == [
        [("uniform", "wgrad-baseline"), ("uniform", "forward")],
        [("uniform", "wgrad-baseline"), ("uniform", "forward"),
         ("skewed", "wgrad-baseline"), ("skewed", "forward")],
    ]  # fmt: skip
    assert [r.status for r in results] == ["ok"] * 4


def test_text_format_prints_the_table_labelled_not_comparable():
    result = bench(*FAST, "--impl", "refimpl", "--load", "skewed", "--phases", "forward,step")
    assert result.exit_code == 0, result.output
    assert "CPU, not comparable" in result.stdout
    assert "forward" in result.stdout and "step" in result.stdout
    assert "uniform load" not in result.stdout


def test_json_format_without_output_goes_to_stdout():
    result = bench(*FAST, "--impl", "refimpl", "--load", "uniform", "--phases", "forward",
                   "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(r["impl"], r["phase"]) for r in doc["results"]] == [("refimpl", "forward")]


def test_tokens_rescale_the_shape():
    result = bench(*FAST, "--impl", "refimpl", "--load", "uniform", "--phases", "forward",
                   "--tokens", "5", "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (shape,) = doc["shapes"]
    assert shape["tokens"] == 5
    assert shape["rows"] == 5 * PRESETS["tiny"].top_k
    assert doc["results"][0]["flops"] == phase_flops(PRESETS["tiny"].with_tokens(5), "forward")


def unsupported_here(**kwargs):
    raise NotImplementedError("this backend needs an accelerator we do not have")


def factory_with_a_bug(**kwargs):
    raise ValueError("a bug in the user's factory")


def test_an_implementation_that_cannot_run_here_is_recorded_unavailable_not_fatal():
    spec = f"{__name__}:unsupported_here"
    result = bench(*FAST, "--impl", f"refimpl,{spec}", "--load", "uniform",
                   "--phases", "forward,step", "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    by_impl = {}
    for r in doc["results"]:
        by_impl.setdefault(r["impl"], []).append(r)
    assert [r["status"] for r in by_impl["refimpl"]] == ["ok", "ok"]
    assert [r["status"] for r in by_impl[spec]] == ["unavailable", "unavailable"]
    assert all("accelerator" in r["reason"] and r["median_ms"] is None for r in by_impl[spec])


def test_a_factory_that_raises_is_an_error_exit_1():
    spec = f"{__name__}:factory_with_a_bug"
    result = bench(*FAST, "--impl", spec, "--load", "uniform", "--phases", "forward",
                   "--format", "json")  # fmt: skip
    assert result.exit_code == 1, result.output
    (row,) = json.loads(result.stdout)["results"]
    assert row["status"] == "error" and "a bug in the user's factory" in row["reason"]


def discrete_weights_only(**kwargs):
    """A backend with only discrete weights, as Transformer Engine's op fuser is on a machine
    whose cuBLASLt lacks the grouped-tensor GEMM."""
    if kwargs["single_grouped_weight"]:
        raise NotImplementedError("single grouped weights need a newer library here")
    return GroupedMLP(**kwargs)


def test_weights_both_times_each_workload_once_per_layout_in_one_run(tmp_path):
    spec = f"{__name__}:discrete_weights_only"
    output = tmp_path / "bench.json"
    result = bench(*FAST, "--impl", f"refimpl,{spec}", "--load", "uniform", "--weights",
                   "both", "--phases", "wgrad-accumulate,wgrad-baseline",
                   "--output", str(output))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "single weights" in result.stdout and "discrete weights" in result.stdout
    doc = json.loads(output.read_text())
    assert doc["settings"]["weights"] == "both"
    assert doc["settings"]["layouts"] == ["single", "discrete"]
    assert "--weights both" in doc["command"]
    status = {(r["weights"], r["impl"], r["phase"]): r["status"] for r in doc["results"]}
    assert len(status) == len(doc["results"]) == 2 * 3
    # Each layout built its own modules: the factory refused only the single-weight ones.
    assert status[("single", spec, "wgrad-accumulate")] == "unavailable"
    assert status[("discrete", spec, "wgrad-accumulate")] == "ok"
    assert status[("single", "refimpl", "wgrad-accumulate")] == "ok"
    median = {(r["weights"], r["impl"]): r["median_ms"] for r in doc["results"]}
    over = {
        (r["weights"], r["impl"]): r["value"]
        for r in doc["ratios"]
        if r["kind"] == "time_over_baseline"
    }
    assert set(over) == {("single", "refimpl"), ("discrete", "refimpl"), ("discrete", spec)}
    for (weights, impl), value in over.items():
        expected = median[(weights, impl)] / median[(weights, "torch._grouped_mm")]
        assert value == pytest.approx(expected, rel=1e-3)


def test_from_a_document_of_one_layout_without_per_row_layouts_shows_it(refimpl_run, tmp_path):
    """Documents written before --weights both name their layout once, in the settings."""
    _, out = refimpl_run
    doc = json.loads((out / "bench.json").read_text())
    doc["settings"]["weights"] = "discrete"
    for field in ("results", "ratios", "targets"):
        for row in doc[field]:
            row.pop("weights", None)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    table = bench("--from", str(path))
    assert table.exit_code == 0, table.output
    assert "discrete weights" in table.stdout and "single weights" not in table.stdout
    assert bench("--from", str(path), "--plot", str(tmp_path / "old.png")).exit_code == 0


def test_all_three_implementations_in_one_run_with_triton_interpreted():
    """triton runs on CPU through the interpreter; torch-grouped-mm refuses CPU and is recorded."""
    result = bench("--device", "cpu", "--shape", "tiny", "--warmup", "1", "--repeats", "1",
                   "--no-progress", "--load", "skewed", "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    status = {(r["impl"], r["phase"]): r["status"] for r in doc["results"]}
    for phase in PHASES[:-1]:
        assert status[("triton", phase)] == "ok"
        assert status[("refimpl", phase)] == "ok"
        assert status[("torch-grouped-mm", phase)] == "unavailable"
    reasons = {r["reason"] for r in doc["results"] if r["impl"] == "torch-grouped-mm"}
    assert len(reasons) == 1 and "torch-grouped-mm" in reasons.pop()

    median = {(r["impl"], r["phase"]): r["median_ms"] for r in doc["results"]}
    speedups = [r for r in doc["ratios"] if r["kind"] == "speedup"]
    assert {(r["impl"], r["reference"]) for r in speedups} == {("triton", "refimpl")}
    assert {r["phase"] for r in speedups} == set(PHASES[:-1])
    for r in speedups:
        expected = median[("refimpl", r["phase"])] / median[("triton", r["phase"])]
        assert r["value"] == pytest.approx(expected, rel=1e-3)


def grouped_mlp_with_broken_delayed_wgrad(**kwargs):
    """A grouped MLP whose backward_dw() raises, as a fused path with a broken kernel would."""
    mlp = GroupedMLP(**kwargs)

    def backward_dw():
        raise RuntimeError("wgrad kernel launch failed")

    mlp.backward_dw = backward_dw
    return mlp


def test_an_implementation_that_raises_is_an_error_exit_1_and_the_run_goes_on():
    spec = f"{__name__}:grouped_mlp_with_broken_delayed_wgrad"
    result = bench(*FAST, "--impl", f"{spec},refimpl", "--load", "uniform",
                   "--phases", "forward,wgrad-accumulate,step", "--format", "json")  # fmt: skip
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    status = {(r["impl"], r["phase"]): r for r in doc["results"]}
    assert status[(spec, "forward")]["status"] == "ok"
    assert status[(spec, "step")]["status"] == "ok"
    broken = status[(spec, "wgrad-accumulate")]
    assert broken["status"] == "error"
    assert "RuntimeError: wgrad kernel launch failed" in broken["reason"]
    assert all(status[("refimpl", p)]["status"] == "ok" for p in ("forward", "step"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--shape", "nope"], "'nope' is not one of"),
        (["--tokens", "0"], "0 is not in the range x>=1"),
        (["--tokens", "-4"], "-4 is not in the range x>=1"),
        (["--phases", "forward,backward"], "got 'backward'"),
        (["--impl", "magic"], "got 'magic'"),
        (["--impl", "no_such_package.no_module:factory"], "cannot import module"),
        (["--impl", "tests.bench.test_cli:missing"], "has no attribute 'missing'"),
        (["--load", "zipf"], "'zipf' is not one of"),
        (["--weights", "all"], "'all' is not one of"),
        (["--device", "cpu", "--shape", "mixtral"], "runs on CUDA only"),
        (["--device", "cpu", "--shape", "all"], "runs on CUDA only"),
        (["--warmup", "0"], "0 is not in the range x>=1"),
    ],
)
def test_usage_errors_exit_2_with_a_message(args, message, tmp_path):
    output = tmp_path / "bench.json"
    result = bench(*args, "--output", str(output), "--no-progress")
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not output.exists()


def test_output_in_a_missing_directory_is_refused_before_running(tmp_path):
    result = bench(*FAST, "--output", str(tmp_path / "missing" / "bench.json"))
    assert result.exit_code == 2
    assert "does not exist" in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_device_cuda_without_a_gpu_is_an_environment_error(tmp_path):
    output = tmp_path / "bench.json"
    result = bench("--device", "cuda", "--output", str(output))
    assert result.exit_code == 2
    assert "--device cuda: no CUDA GPU is available" in result.output
    assert not output.exists()
