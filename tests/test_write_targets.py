"""Where the harness's atomic writes go (harness.report.atomic.write_target): a symbolic link is followed and
stays a link, a device or a named pipe is written directly and stays what it is, a folder or a file in
place of a folder is refused naming it; and what a failed write is reported as."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from harness.report.atomic import atomic_write_bytes, write_all, write_target


def test_a_link_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "target.json").write_text("old")
    (tmp_path / "link.json").symlink_to("target.json")
    (tmp_path / "dangling.json").symlink_to("made.json")
    assert write_target(tmp_path / "link.json") == (tmp_path / "target.json", False)
    write_all({tmp_path / "link.json": b"new", tmp_path / "dangling.json": b"made"}, kept="")
    atomic_write_bytes(tmp_path / "link.json", b"newer")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "dangling.json").is_symlink()
    assert (tmp_path / "target.json").read_bytes() == b"newer" and (tmp_path / "made.json").read_bytes() == b"made"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.json", "link.json", "made.json", "target.json"]


def test_a_device_is_written_directly_and_stays_a_device() -> None:
    null = Path(os.devnull)
    assert write_target(null) == (null, True)
    assert write_all({null: b"x" * 10_000}, kept="") == [null]
    atomic_write_bytes(null, b"y")
    assert null.is_char_device()


def test_a_named_pipe_is_written_directly_and_stays_a_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_all({fifo: b'{"rows": []}', tmp_path / "plain.json": b"{}"}, kept="")
    reader.join(timeout=30)
    assert got == [b'{"rows": []}']
    assert fifo.is_fifo() and (tmp_path / "plain.json").read_bytes() == b"{}"


def test_a_folder_or_a_file_above_the_target_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    with pytest.raises(IsADirectoryError) as err:
        write_all({tmp_path / "plain.json": b"{}", tmp_path: b"{}"}, kept="")
    assert (err.value.filename, err.value.strerror) == (str(tmp_path), "is a folder; give a file's path")
    with pytest.raises(NotADirectoryError) as not_dir:
        atomic_write_bytes(tmp_path / "afile" / "x.json", b"{}")
    assert (not_dir.value.filename, not_dir.value.strerror) == (str(tmp_path / "afile" / "x.json"),
                                                                f"{tmp_path / 'afile'} is a file, not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing written, no temp file left


def test_a_failed_temp_file_is_reported_as_the_file_asked_for(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    os.chmod(folder, 0o500)
    try:
        if os.access(folder, os.W_OK):  # root writes anyway: a folder that cannot hold files instead
            pytest.skip("this user writes into a read-only folder")
        with pytest.raises(PermissionError) as err:
            write_all({folder / "x.json": b"{}"}, kept="")
        assert err.value.filename == str(folder / "x.json") and err.value.filename2 is None
    finally:
        os.chmod(folder, 0o700)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_temp_file_that_cannot_be_made_names_the_file_asked_for() -> None:
    # /proc takes no new files, for root too
    with pytest.raises(OSError) as err:
        write_all({Path("/proc/harness-write-check.json"): b"{}"}, kept="")
    assert err.value.filename == "/proc/harness-write-check.json" and err.value.filename2 is None


def test_an_open_stream_is_written_where_it_stands_never_reopened(tmp_path: Path) -> None:
    # '>> run.log': /dev/stdout leads to run.log; reopening it would truncate it, replacing it would unlink it
    import subprocess
    import sys

    log = tmp_path / "run.log"
    log.write_text("line1\nline2\n")
    inode = log.stat().st_ino
    code = ("from pathlib import Path; from harness.report.atomic import write_all, atomic_write_bytes; "
            "print('table', flush=False); write_all({Path('/dev/stdout'): b'{\"rows\": []}\\n'}, kept=''); "
            "atomic_write_bytes(Path('/dev/fd/1'), b'more\\n')")
    with log.open("a") as out:
        subprocess.run([sys.executable, "-c", code], stdout=out, check=True)
    assert log.read_text() == 'line1\nline2\ntable\n{"rows": []}\nmore\n'  # in order, appended, the same file
    assert log.stat().st_ino == inode


def test_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "target.json"
    target.write_text("old")
    target.chmod(0o640)
    (tmp_path / "link.json").symlink_to("target.json")
    write_all({tmp_path / "link.json": b"new"}, kept="")
    atomic_write_bytes(target, b"newer")
    assert target.read_bytes() == b"newer" and (target.stat().st_mode & 0o777) == 0o640
    atomic_write_bytes(tmp_path / "fresh.json", b"{}")
    assert (tmp_path / "fresh.json").stat().st_mode & 0o777 == 0o644
