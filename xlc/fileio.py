"""Small file helpers shared across layers (artifacts, CLI outputs, the compile cache,
run-time libraries).

`write_file_atomic` (and `write_bytes_atomic`) write exactly the path named, with these rules:
* a regular file (new or existing) is written through a temp file in the same directory,
  flushed and fsync'ed, then renamed over the path: readers never see a partial file, a failed
  write (a full disk) leaves the old file untouched and no temp file behind, and concurrent
  writers of one path are safe. An existing file keeps its permission bits; a new one gets
  the usual `0o666 & ~umask`;
* a symlink is followed: the file it points to is replaced as above and the link stays (as a
  shell's `>` would write through it); a dangling link creates its target;
* an existing device, FIFO or socket (`/dev/null`, `/dev/stdout`, a named pipe) is written
  through, never replaced;
* a directory is refused (IsADirectoryError).
Every failure is an OSError whose `filename` is the path as given.
"""
from __future__ import annotations

import errno
import io
import logging
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger("xlc.fileio")


def _umask() -> int:
    """The process's umask, read without changing it where /proc allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_through(target: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write into an existing non-regular file (a device, FIFO or socket) in place. The bytes
    are produced in memory first: writers such as zipfile seek and tell, which a device or
    pipe does not support."""
    buf = io.BytesIO()
    write(buf)
    with open(target, "wb") as f:
        f.write(buf.getbuffer())
        f.flush()


def _write_replacing(target: Path, write: Callable[[BinaryIO], object], mode: int,
                     durable: bool) -> None:
    """Write a temp file next to `target`, fsync it (when `durable`), rename it over."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_file_atomic(path: str | os.PathLike[str], write: Callable[[BinaryIO], object],
                      durable: bool = True) -> None:
    """Call `write(f)` with a binary file object whose bytes end up at `path` (see the module
    docstring for regular files, symlinks, devices and directories). `durable=False` skips
    the fsync (for caches that can be rebuilt). Creates missing parent directories."""
    given = Path(path)
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    if target != given:
        log.info("%s is a symlink: writing %s", given, target)
    try:
        try:
            st: os.stat_result | None = os.stat(target)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(given))
        if st is not None and not stat.S_ISREG(st.st_mode):
            _write_through(target, write)
            return
        mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
        _write_replacing(target, write, mode, durable)
    except OSError as e:
        if e.filename != str(given):  # name the path the user gave
            raise type(e)(e.errno, e.strerror or str(e), str(given)) from e
        raise


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, durable: bool = True) -> None:
    """Write `data` to `path` (see `write_file_atomic`)."""
    write_file_atomic(path, lambda f: f.write(data), durable)


__all__ = ["write_bytes_atomic", "write_file_atomic"]
