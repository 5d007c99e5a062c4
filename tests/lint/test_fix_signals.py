"""A signal that arrives while `gmlp-lint --fix` writes a file never leaves it half-written:
the write finishes (the file is wholly new), then the signal acts as it would have. Checked
with real processes and real signals, sent once the write has begun, on files large enough
that the write takes tens of milliseconds: a hard-linked file (written in place, since a
rename would split the links) and a plain one (a temporary file renamed over it), with CRLF,
lone CR and mixed line endings, which the fixed text keeps byte for byte."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SIZE = 64 * 2**20  # bytes: a write of this size is still under way when the signal comes

# The old file's lines and the fixed text's: shorter, so that a write cut short, or one not
# followed by its truncation, leaves old bytes behind.
ENDINGS = {
    "crlf": (b"x = 1\r\n", b"y=2\r\n"),
    "cr": (b"x = 1\r", b"y=2\r"),
    "mixed": (b"x = 1\r\ny = 2\rz = 3\n", b"a = 1\nb = 2\r\n"),
}

# What `gmlp-lint --fix` does with a file's fixed text (lint/cli.py), in a process of its own.
WRITER = """
import sys
from gmlp_check.lint.writing import write_in_place

path, unit, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = bytes.fromhex(unit).decode() * count
print("writing", flush=True)
write_in_place(path, text, "utf-8")
print("written", flush=True)
"""


def write_started(path: Path, old_head: bytes, process: subprocess.Popen) -> None:
    """Wait until the new text starts to land: in the file itself (in place) or in the
    temporary file next to it (a rename)."""
    deadline = time.monotonic() + 60
    with open(path, "rb") as handle:
        while time.monotonic() < deadline and process.poll() is None:
            if os.pread(handle.fileno(), len(old_head), 0) != old_head:
                return
            if any(p.stat().st_size for p in path.parent.glob(f".{path.name}.*.gmlp-lint")):
                return
    pytest.fail("the write never began")


def _default_dispositions() -> None:
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


def run_and_signal(path: Path, new_unit: bytes, count: int, old_head: bytes, signum: int):
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), new_unit.hex(), str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # Each signal sent acts by default in the writer: a suite started as a shell's
        # background job passes SIGINT on ignored, and one started under nohup SIGHUP.
        preexec_fn=_default_dispositions,
    )
    assert process.stdout.readline() == b"writing\n"
    write_started(path, old_head, process)
    process.send_signal(signum)
    stdout, _ = process.communicate(timeout=60)
    return process.returncode, stdout


SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("ending", list(ENDINGS))
@pytest.mark.parametrize("linked", [True, False], ids=["hard-linked", "plain"])
def test_a_signal_during_the_write_leaves_the_file_wholly_fixed(tmp_path, signum, ending, linked):
    old_unit, new_unit = ENDINGS[ending]
    old = old_unit * (SIZE // len(old_unit))
    count = SIZE // 2 // len(new_unit)
    path = tmp_path / "mlp.py"
    path.write_bytes(old)
    other = tmp_path / "also_mlp.py"
    if linked:
        os.link(path, other)
    returncode, stdout = run_and_signal(path, new_unit, count, old[:4096], signum)
    data = path.read_bytes()
    assert data == new_unit * count, (
        "half-written" if data != old else "left as it was",
        len(data),
        returncode,
    )
    # The signal was held, not lost: it ended the process once the file was written.
    assert returncode == -signum and stdout == b""  # never printed "written"
    if linked:
        assert os.path.samefile(path, other) and other.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["mlp.py", *(["also_mlp.py"] if linked else [])]
    ), "a temporary file was left behind"
