"""Report files: checked before a run, written through links, into devices and FIFOs, or whole
and in place (gmlp_check.files)."""

import os
import stat
import subprocess
import sys
import threading

import pytest

from gmlp_check.files import OutputError, check_output, write_output

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="making device nodes needs root")
NULL, FULL = os.makedev(1, 3), os.makedev(1, 7)  # what /dev/null and /dev/full are


def device(path, number):
    os.mknod(path, stat.S_IFCHR | 0o666, number)
    return path


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    target = tmp_path / "real.xml"
    target.write_text("old")
    link = tmp_path / "link.xml"
    link.symlink_to(target.name)
    check_output("--junit-xml", link)
    write_output("--junit-xml", link, b"new")
    assert link.is_symlink() and target.read_bytes() == b"new"


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.xml"
    link.symlink_to("made.xml")
    check_output("--junit-xml", link)
    write_output("--junit-xml", link, b"data")
    assert link.is_symlink() and (tmp_path / "made.xml").read_bytes() == b"data"


def test_an_existing_file_keeps_its_mode(tmp_path):
    path = tmp_path / "report.xml"
    path.write_text("old")
    path.chmod(0o640)
    write_output("--junit-xml", path, b"new")
    assert path.read_bytes() == b"new" and stat.S_IMODE(path.stat().st_mode) == 0o640


def test_a_fifo_is_written_into_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    try:
        check_output("--junit-xml", fifo)
        write_output("--junit-xml", fifo, b"through the pipe")
        reader.join(timeout=30)
    finally:
        if reader.is_alive():  # a writer that never opened the FIFO: release the reader
            with open(fifo, "wb"):
                pass
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert received == [b"through the pipe"]


@AS_ROOT
def test_a_character_device_is_written_into_not_replaced(tmp_path):
    null = device(tmp_path / "null", NULL)
    check_output("--junit-xml", null)
    write_output("--junit-xml", null, b"discarded")
    assert stat.S_ISCHR(null.stat().st_mode) and null.stat().st_rdev == NULL


def test_dev_null_keeps_working():
    check_output("--junit-xml", "/dev/null")
    write_output("--junit-xml", "/dev/null", b"discarded")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@AS_ROOT
def test_a_failed_write_into_a_device_is_one_error_and_leaves_the_device(tmp_path):
    full = device(tmp_path / "full", FULL)
    with pytest.raises(OutputError, match=r"^--junit-xml '.*full': cannot be written \(No space"):
        write_output("--junit-xml", full, b"x" * 100)
    assert stat.S_ISCHR(full.stat().st_mode)


@pytest.mark.parametrize(
    "path, why",
    [
        ("{tmp}/outdir/", "is a directory, expected a file name"),
        ("{tmp}", "is a directory, expected a file name"),
        ("{tmp}/missing/x.xml", "the directory '{tmp}/missing' does not exist"),
        ("/proc/gmlp-check.xml", "cannot create a file in '/proc'"),
        ("/sys/gmlp-check.xml", "cannot create a file in '/sys'"),
        ("", "expected a file name, got ''"),
    ],
    ids=["trailing-slash", "directory", "no-directory", "proc", "sys", "empty"],
)
def test_unwritable_paths_are_refused_up_front(tmp_path, path, why):
    path, why = path.format(tmp=tmp_path), why.format(tmp=tmp_path)
    with pytest.raises(OutputError) as error:
        check_output("--junit-xml", path)
    assert str(error.value).startswith("--junit-xml") and why in str(error.value)
    assert "\n" not in str(error.value)
    assert not os.path.exists(path.rstrip("/")) or os.path.isdir(path.rstrip("/"))


def test_a_socket_is_refused(tmp_path):
    import socket

    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(OutputError, match="neither a regular file, a character device"):
            check_output("--junit-xml", path)


@pytest.fixture
def immutable_dir(tmp_path):
    directory = tmp_path / "frozen"
    directory.mkdir()
    if subprocess.run(["chattr", "+i", str(directory)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported here")
    yield directory
    subprocess.run(["chattr", "-i", str(directory)], check=True)


def test_an_immutable_directory_is_refused_up_front(immutable_dir):
    with pytest.raises(OutputError, match="cannot create a file in"):
        check_output("--junit-xml", immutable_dir / "x.xml")


def test_a_read_only_existing_file_is_refused(tmp_path):
    path = tmp_path / "x.xml"
    path.write_text("keep")
    if os.geteuid() == 0:  # root writes through permission bits; the immutable flag stops it
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
            pytest.skip("chattr +i is not supported here")
    else:
        path.chmod(0o444)
    try:
        with pytest.raises(OutputError, match="cannot be written"):
            check_output("--junit-xml", path)
    finally:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)
    assert path.read_text() == "keep"


SCRIPT = (
    "import sys; from gmlp_check.files import check_output, write_output\n"
    "print('report', flush=True)\n"
    "check_output('--junit-xml', '/dev/stdout')\n"
    "write_output('--junit-xml', '/dev/stdout', b'<xml/>\\n')\n"
    "print('after', flush=True)\n"
)


def test_dev_stdout_into_a_pipe_is_written_after_the_report():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [b"report", b"<xml/>", b"after"]


def test_dev_stdout_redirected_to_a_file_writes_into_that_open_file(tmp_path):
    out = tmp_path / "out.txt"
    script = (
        "import sys; from gmlp_check.files import check_output, write_output\n"
        "print('report', flush=True)\n"
        "check_output('--junit-xml', '/dev/stdout')\n"
        "write_output('--junit-xml', '/dev/stdout', b'<xml/>\\n')\n"
        "print('after', flush=True)\n"
    )
    with open(out, "w") as handle:
        subprocess.run([sys.executable, "-c", script], stdout=handle, check=True, timeout=60)
    assert out.read_text().split() == ["report", "<xml/>", "after"]
