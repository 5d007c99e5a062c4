"""Our launcher, with tiny fake workers (python -c ...) instead of gmlp-check ranks."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gmlp_check.engines.launcher import describe_exit, launch


def worker(code: str) -> list[str]:
    """A worker command running ``code`` (os, sys, time, json and Path imported; rank = RANK)."""
    prelude = (
        "import os, sys, time, json; from pathlib import Path; rank = int(os.environ['RANK'])\n"
    )
    return [sys.executable, "-c", prelude + code]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); its state in /proc says it has exited.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def test_workers_get_torchruns_environment_with_multicast_off_by_default(tmp_path):
    code = (
        "keys = ['RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', "
        "'MASTER_PORT', 'NCCL_NVLS_ENABLE', 'TORCH_SYMM_MEM_DISABLE_MULTICAST']\n"
        f"Path({str(tmp_path)!r}, f'env{{rank}}.json').write_text("
        "json.dumps({k: os.environ.get(k) for k in keys}))"
    )
    switches = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")
    unset = {k: v for k, v in os.environ.items() if k not in switches}
    assert launch(worker(code), 3, env=unset) == 0
    envs = [json.loads((tmp_path / f"env{r}.json").read_text()) for r in range(3)]
    for rank, env in enumerate(envs):
        assert env["RANK"] == env["LOCAL_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "3"
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["NCCL_NVLS_ENABLE"] == "0" and env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    ports = {env["MASTER_PORT"] for env in envs}
    assert len(ports) == 1 and ports.pop().isdigit()


def test_the_callers_own_communication_settings_are_kept(tmp_path):
    code = (
        f"Path({str(tmp_path)!r}, 'env').write_text(os.environ['NCCL_NVLS_ENABLE'] + ' ' + "
        "os.environ['TORCH_SYMM_MEM_DISABLE_MULTICAST'])"
    )
    env = {**os.environ, "NCCL_NVLS_ENABLE": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "0"}
    assert launch(worker(code), 1, env=env) == 0
    assert (tmp_path / "env").read_text() == "1 0"


def test_output_is_forwarded_and_the_worst_normal_exit_code_wins(capfd):
    # Staggered: the ranks share the captured file, and two writes at one instant could race
    # for its offset; forwarding, not that race, is under test.
    code = (
        "time.sleep(0.3 * rank); print(f'hello from rank {rank}', flush=True); sys.exit(rank % 2)"
    )
    assert launch(worker(code), 3) == 1
    out = capfd.readouterr().out
    assert sorted(out.split("\n")[:-1]) == [f"hello from rank {r}" for r in range(3)]
    assert launch(worker("sys.exit(0)"), 2) == 0


def test_a_crashed_worker_stops_the_others_and_exits_2_with_one_line(tmp_path, capfd):
    code = (
        f"Path({str(tmp_path)!r}, f'pid{{rank}}').write_text(str(os.getpid()))\n"
        "if rank == 1:\n    time.sleep(0.5); sys.exit(3)\n"
        "time.sleep(120)"
    )
    start = time.monotonic()
    assert launch(worker(code), 2, grace_s=2) == 2
    assert time.monotonic() - start < 60
    err = capfd.readouterr().err
    assert (
        err.strip()
        == "gmlp-check: worker rank 1 of 2 exited with code 3; stopped the other workers"
    )
    assert not alive(int((tmp_path / "pid0").read_text()))


def test_a_worker_killed_by_a_signal_is_named_as_such(capfd):
    code = "if rank == 0:\n    os.kill(os.getpid(), 9)\ntime.sleep(120)"
    assert launch(worker(code), 2, grace_s=2) == 2
    assert "worker rank 0 of 2 was killed by SIGKILL" in capfd.readouterr().err
    assert (
        describe_exit(-15) == "was killed by SIGTERM" and describe_exit(4) == "exited with code 4"
    )


def test_a_worker_that_cannot_start_is_one_line_and_exit_2(capfd):
    assert launch(["/nonexistent/python-for-gmlp-check"], 2) == 2
    assert capfd.readouterr().err.startswith("gmlp-check: cannot start a worker:")


def _written(path: Path) -> bool:
    return path.exists() and path.read_text().strip() != ""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_stops_every_worker_and_exits_2(tmp_path, sig):
    code = f"Path({str(tmp_path)!r}, f'pid{{rank}}').write_text(str(os.getpid())); time.sleep(120)"
    # Ctrl-C as a terminal delivers it: a parent that ignores SIGINT (a shell's background
    # job, as CI may run us) hands that on, and Python would then never raise KeyboardInterrupt.
    script = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from gmlp_check.engines.launcher import launch\n"
        f"sys.exit(launch({worker(code)!r}, 2, grace_s=2))"
    )
    launcher = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    # A pid file exists as soon as it is opened: wait for its content (a signal sent between
    # the open and the write leaves it empty).
    while not all(_written(tmp_path / f"pid{r}") for r in range(2)):
        assert time.monotonic() < deadline, "the workers never started"
        time.sleep(0.05)
    launcher.send_signal(sig)
    _, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 2
    assert err.strip() == "gmlp-check: interrupted; stopped 2 workers"
    for r in range(2):
        assert not alive(int((tmp_path / f"pid{r}").read_text()))
