"""--megatron, --nproc and --engine-configs on the command line: parsing, the one-line usage
errors (exit 2), what a worker is started with, and the emulated default without a GPU."""

import json

import click
import pytest
import torch
from click.testing import CliRunner

from gmlp_check.cli import main, worker_command
from gmlp_check.options import DIFF, RunOptions, click_options, to_argv

ONE_CASE = (
    "mode=accumulate-ddp,delay=0,zero=0,single=0,bias=0,act=swiglu,dtype=fp32,"
    "splits=ragged-empty,mb=2"
)
REFIMPL = "gmlp_check.refimpl:GroupedMLP"


def invoke(*args):
    return CliRunner().invoke(main, ["diff", *args])


def error_line(result) -> str:
    lines = [ln for ln in result.output.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, result.output
    return lines[0]


def test_real_engines_without_cuda_are_a_usage_error_saying_so():
    result = invoke("--device", "cpu", "--megatron", "real", "--list")
    assert result.exit_code == 2
    assert error_line(result).startswith("Error: --megatron real: CUDA is needed")


def test_several_ranks_need_the_real_engines():
    result = invoke("--device", "cpu", "--nproc", "2", "--list")
    assert result.exit_code == 2
    assert error_line(result).startswith("Error: --nproc 2: several ranks need the real engines")


def test_nproc_below_one_is_refused():
    result = invoke("--device", "cpu", "--nproc", "0", "--list")
    assert result.exit_code == 2
    assert error_line(result) == "Error: --nproc: expected an int >= 1, got 0"


def test_engine_configs_need_the_real_engines_and_known_names():
    result = invoke("--device", "cpu", "--engine-configs", "ddp", "--list")
    assert result.exit_code == 2
    assert "--engine-configs: selects configurations of the real engines" in error_line(result)
    unknown = invoke("--device", "cpu", "--engine-configs", "nope", "--list")
    assert unknown.exit_code == 2 and "nope" in error_line(unknown)


def test_inside_a_launch_nproc_must_match_world_size(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    result = invoke("--device", "cpu", "--nproc", "3", "--list")
    assert result.exit_code == 2
    assert "--nproc 3: this process is one of WORLD_SIZE=2 workers" in error_line(result)
    emulated = invoke("--device", "cpu", "--list")  # two ranks, but no real engines here
    assert emulated.exit_code == 2
    assert "--nproc 2: several ranks need the real engines" in error_line(emulated)


def test_auto_without_cuda_runs_the_emulation_and_says_so():
    result = invoke("--device", "cpu", "--fused", REFIMPL, "-k", ONE_CASE, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["engine"] == {"megatron": "emulated", "ranks": 1, "configs": None}
    rerun = doc["cases"][0]["rerun"]
    assert "--megatron emulated" in rerun and "--nproc" not in rerun


def parse(argv: list[str]) -> dict:
    """What click makes of ``argv`` with the diff options."""
    seen = {}

    @click.command()
    @click_options(DIFF)
    def command(**values):
        seen.update(values)

    CliRunner().invoke(command, argv, catch_exceptions=False, standalone_mode=False)
    return seen


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--megatron", "real", "--nproc", "2", "--engine-configs", "ddp", "--engine-configs",
         "fsdp-optim"],
        ["--fused", "x.y:z", "-k", "mode=off and delay=1", "--dtype", "bf16", "--dtype", "fp32",
         "--experts", "3", "--seed", "7", "--inject", "no-dummy-grad"],
    ],
)  # fmt: skip
def test_workers_parse_exactly_what_the_user_gave(argv):
    values = parse(argv)
    again = parse(to_argv(DIFF, values))
    assert RunOptions.from_values(again) == RunOptions.from_values(values)


def test_a_worker_runs_this_diff_command_with_the_same_options_and_report():
    values = parse(["--megatron", "real", "--nproc", "2", "-k", "mode=off"])
    command = worker_command(values, "json", "out.xml")
    assert command[1:4] == ["-m", "gmlp_check.cli", "diff"]
    assert command[-4:] == ["--format", "json", "--junit-xml", "out.xml"]
    assert command[command.index("--nproc") + 1] == "2"
    assert command[command.index("-k") + 1] == "mode=off"


def test_more_ranks_than_gpus_or_no_launcher_are_refused(monkeypatch):
    from gmlp_check.session import _ranks

    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    cuda = torch.device("cuda")
    with pytest.raises(ValueError, match=r"^--nproc 3: one process per GPU, and there are 2 here$"):
        _ranks(RunOptions(nproc=3), cuda, "real", can_launch=True)
    with pytest.raises(ValueError, match=r"^--nproc 2: start the ranks with torchrun"):
        _ranks(RunOptions(nproc=2), cuda, "real", can_launch=False)
    assert _ranks(RunOptions(nproc=2), cuda, "real", can_launch=True) == 2
    assert _ranks(RunOptions(), cuda, "real", can_launch=False) == 1
