"""The files one Python command writes (``python3 -m ascendsim tune``/``sweep``), all or none, as the
command line writes its own (sim/outputs.h).

Every destination is checked before anything runs (its directory exists and is writable, it is
not a directory). A regular file (or a new one) is staged in an unnamed file (O_TMPFILE) in the
directory of its real path (symlinks followed), which even a killed process cannot leave behind,
and at commit linked under a hidden name and renamed over it: a symlinked path keeps its link and
its target gets the text (where the file system has no unnamed files, a hidden named one is
staged). At commit, as the command line's: the FIFOs and devices first, written straight through
(``/dev/full`` fails the command with nothing printed); then standard output (``-``), checked: a
report that could not be printed fails the command and no file is put in place; then the renames.
Whatever was staged and not committed is removed (``discard``, or leaving the ``with`` block), on
an error or an interrupt alike.
"""
from __future__ import annotations

import os
import stat
import sys
import tempfile
from typing import List, Optional

from . import InputError


def _reason(e: OSError) -> str:
    return e.strerror or str(e)


def _silence_stdout() -> None:
    """After a write to standard output failed: point its descriptor at /dev/null, so the
    interpreter's last flush at exit neither fails nor prints a traceback."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, AttributeError, ValueError):
        pass


def require_stdout() -> None:
    """Standard output is open: refuse the command before anything runs if it is closed (``>&-``)."""
    closed = sys.stdout is None
    if not closed:
        try:
            os.fstat(sys.stdout.fileno())
        except (OSError, AttributeError, ValueError):
            closed = True
    if closed:
        raise InputError("standard output is closed: the report has nowhere to go; nothing was run — "
                         "redirect it to a file (> FILE)")


def write_stdout(text: str) -> None:
    """Prints ``text`` and flushes it; InputError (the reason, as the command line words it) if it
    could not be written: a full device, a pipe whose reader left, a closed descriptor."""
    try:
        if sys.stdout is None:
            raise OSError(9, os.strerror(9))
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as e:
        _silence_stdout()
        raise InputError(f"standard output: the report could not be written ({_reason(e)}); no file was "
                         "written — print it somewhere with room, or give --json FILE") from None


class _Entry:
    def __init__(self, path: str, option: str, real: str, through: bool) -> None:
        self.path, self.option, self.real, self.through = path, option, real, through
        self.temp: Optional[str] = None  # a staged file's hidden name
        self.fd: Optional[int] = None  # an unnamed staged file, named at commit
        self.text: Optional[str] = None


class Outputs:
    """A command's output files: ``add`` each destination before running, ``stage`` its text
    after, ``commit`` them together (devices, then stdout, then the renames)."""

    def __init__(self) -> None:
        self._entries: List[_Entry] = []
        self._committed = False

    def __enter__(self) -> "Outputs":
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def add(self, path: Optional[str], option: str) -> None:
        """Checks a destination now; InputError naming ``option``, the path and the reason."""
        if not path:
            return
        if path == "-":
            self._entries.append(_Entry(path, option, path, False))
            return
        what = f"{option} {path}: "
        real = os.path.realpath(os.path.abspath(path))  # the file a symlink leads to
        try:
            st: Optional[os.stat_result] = os.stat(real)
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise InputError(what + "cannot write: " + _reason(e)) from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise InputError(what + "is a directory; give a file name")
        through = st is not None and not stat.S_ISREG(st.st_mode)  # a FIFO, a device
        if through:
            if not os.access(real, os.W_OK):
                raise InputError(what + "cannot write: " + os.strerror(13))
        else:
            folder = os.path.dirname(real)
            if not os.path.isdir(folder):
                raise InputError(what + f"directory {folder} does not exist")
            if not os.access(folder, os.W_OK | os.X_OK):
                raise InputError(what + f"cannot write in {folder}: " + os.strerror(13))
        for other in self._entries:
            if other.path != "-" and other.real == real:
                raise InputError(what + f"is also the destination of {other.option}; give each output its own file")
        self._entries.append(_Entry(path, option, real, through))

    def _find(self, path: str) -> _Entry:
        for e in self._entries:
            if e.path == path:
                return e
        raise KeyError(f"{path} was not added")

    def stage(self, path: Optional[str], text: str) -> None:
        """Stages the text for a destination given to add(); InputError if it cannot be written."""
        if not path:
            return
        e = self._find(path)
        if path == "-" or e.through:
            e.text = text
            return
        folder, name = os.path.split(e.real)
        fd = -1
        try:
            fd = os.open(folder, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600)
            e.fd = os.dup(fd)  # kept open until commit names the file
        except (OSError, AttributeError):
            if fd >= 0:
                os.close(fd)
            fd = -1
        try:
            if fd < 0:
                fd, e.temp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
        except OSError as x:
            raise InputError(f"{e.option} {path}: cannot write: {_reason(x)}") from None
        try:
            # A new file gets the usual permissions (mkstemp makes it private); a replaced one keeps its own.
            try:
                mode = stat.S_IMODE(os.stat(e.real).st_mode)
            except OSError:
                mask = os.umask(0)
                os.umask(mask)
                mode = 0o666 & ~mask
            os.fchmod(fd, mode)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                fd = -1
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        except OSError as x:
            if fd >= 0:
                os.close(fd)
            raise InputError(f"{e.option} {path}: cannot write: {_reason(x)}") from None

    def commit(self) -> None:
        """Writes the FIFOs and devices, prints standard output's text and checks it arrived, then
        renames the staged files over their targets. InputError naming the destination if any fails
        (the staged files are then removed by discard())."""
        for e in self._entries:
            if not e.through or e.text is None:
                continue
            try:
                fd = os.open(e.real, os.O_WRONLY | os.O_APPEND)
                try:
                    data = e.text.encode("utf-8")
                    while data:
                        data = data[os.write(fd, data):]
                finally:
                    os.close(fd)
            except OSError as x:
                raise InputError(f"{e.option} {e.path}: cannot write: {_reason(x)}") from None
        for e in self._entries:
            if e.path == "-" and e.text is not None:
                write_stdout(e.text)
        if sys.stdout is not None:
            write_stdout("")  # what was printed before reached its reader
        for e in self._entries:
            if e.fd is None:
                continue
            folder, name = os.path.split(e.real)
            # A directory descriptor makes os.link call linkat(2) with AT_SYMLINK_FOLLOW (plain
            # link(2) would link /proc's symlink itself, across devices).
            dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                for n in range(1000):
                    hidden = f".{name}.{os.getpid()}.{n}"
                    try:
                        os.link(f"/proc/self/fd/{e.fd}", hidden, dst_dir_fd=dfd, follow_symlinks=True)
                        break
                    except FileExistsError:
                        continue
                    except OSError as x:
                        raise InputError(f"{e.option} {e.path}: cannot write: {_reason(x)}") from None
                else:
                    raise InputError(f"{e.option} {e.path}: cannot write: no free hidden name in {folder}")
            finally:
                os.close(dfd)
            e.temp = os.path.join(folder, hidden)
            os.close(e.fd)
            e.fd = None
        for e in self._entries:
            if e.temp is None:
                continue
            try:
                os.replace(e.temp, e.real)
            except OSError as x:
                raise InputError(f"{e.option} {e.path}: cannot replace: {_reason(x)}") from None
            e.temp = None
        self._committed = True

    def discard(self) -> None:
        """Removes whatever was staged and not put in place."""
        for e in self._entries:
            if e.fd is not None:
                os.close(e.fd)  # the unnamed file goes with it
                e.fd = None
            if e.temp is not None:
                try:
                    os.unlink(e.temp)
                except OSError:
                    pass
                e.temp = None
