"""Durable file writes and careful JSON reads, shared by checkpoints, the token store, tokenizers and run records.

`atomic_write` is write-to-temporary, fsync, rename: a reader (or a crash) sees the old file or the new one, never
half of one. `fsync_dir` makes the rename itself durable. `check_output` proves at start that an output can be
written; `OutputLock` keeps a second litebert process out of a run or store directory; `disk_error` finds the
OSError behind a failed write even where a writer reported it as something else. `read_json` / `parse_json` are the
one JSON reading ladder (open, decode, parse, type check), each failure an error naming the file and line. No torch
here, so the tokenizer can use it too.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, BinaryIO
from collections.abc import Callable

from litebert.errors import CheckpointError, OutputError, where

# What a write failure means to the user, by errno (the rest use the system's strerror).
REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EFBIG: "the file is too large for the file system",
}
# A full or read-only file system: a write failed for want of space or permission to write anywhere there.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})
# The errnos of a full, read-only or refusing file system: the CLI reports these as exit-2 errors wherever they
# surface, because they are the user's disk, not a bug.
OUTPUT_ERRNOS = frozenset(REASONS) | {errno.ENOTDIR, errno.EISDIR, errno.EEXIST}

_RUST_ERRNO = re.compile(r"\(os error (\d+)\)")  # safetensors' writer (a Rust std::io::Error in the message)
_STRERROR = re.compile(r"strerror: ([^\n]+)")  # torch's zip writer ("open file failed with strerror: ...")


def reason(err: OSError) -> str:
    return REASONS.get(err.errno, err.strerror or type(err).__name__)


def disk_error(exc: BaseException | None) -> OSError | None:
    """The OSError behind a failed write, or None when there is none.

    safetensors raises SafetensorError and torch's zip writer a RuntimeError on a full or read-only disk; both
    keep the errno only in their message ("(os error 28)", "strerror: Read-only file system"). The exception's
    causes and contexts are searched too.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno is not None:
            return exc
        text = str(exc)
        if match := _RUST_ERRNO.search(text):
            code = int(match.group(1))
            return OSError(code, os.strerror(code), getattr(exc, "filename", None))
        if match := _STRERROR.search(text):
            named = match.group(1).strip()
            code = next((c for c in OUTPUT_ERRNOS if os.strerror(c) == named), None)
            if code is not None:
                return OSError(code, named)
        exc = exc.__cause__ or exc.__context__
    return None


def write_through(path: Path, save: Callable[[BinaryIO], None]) -> None:
    """save(f) into a new file at `path`, re-raising the OSError of a failed write.

    torch.save turns an ENOSPC from its own file writes into "RuntimeError: unexpected pos"; given a file object
    instead of a path, it writes through our `write`, which keeps the real error.
    """
    with open(path, "wb") as f:
        recorder = _Recorder(f)
        try:
            save(recorder)
        except Exception:
            if recorder.error is not None:
                raise recorder.error from None
            raise


class _Recorder:
    """A write-only file that remembers the OSError its writes raised (the caller may have swallowed it)."""

    def __init__(self, f: BinaryIO):
        self.f, self.error = f, None

    def write(self, data) -> int:
        try:
            return self.f.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def flush(self) -> None:
        self.f.flush()


def atomic_write(file: Path, write: Callable[[Path], None]) -> None:
    """write(tmp) then rename over `file`. A disk error (full, read-only; also one that safetensors or torch
    reported as their own exception) becomes a CheckpointError naming the file, and the temporary is removed."""
    file = Path(file)
    tmp = file.with_name(f".{file.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        fsync_file(tmp)
        os.replace(tmp, file)
    except Exception as exc:
        err = disk_error(exc)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if err is None:
            raise
        raise CheckpointError(f"{file}: cannot write ({reason(err)}: {err.strerror or err})") from None


def check_output(path: str | os.PathLike, flag: str = "--out", kind: str = "dir", shown: str | None = None) -> Path:
    """Prove at start that an output can be written, or raise OutputError naming the flag, the path and why.

    kind "dir": `path` is a directory that is created if needed (with its parents) and must take a file.
    kind "file": `path` is a file to be written; it must not be a directory, and its directory must take a file.
    A probe file is written, fsynced and removed, so a full disk or a read-only file system shows up now.
    `shown`: the path to name in the message, when it is not `path` (a store checks the folder it will be in).
    """
    path = Path(path)
    directory = path if kind == "dir" else path.parent
    try:
        if kind == "file" and path.is_dir():
            raise IsADirectoryError(errno.EISDIR, f"{os.strerror(errno.EISDIR)}: a file is to be written there")
        if directory.exists() and not directory.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{os.strerror(errno.ENOTDIR)}: {directory} is an existing file")
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".litebert-write-test-{os.getpid()}"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, b"litebert")
                os.fsync(fd)
            finally:
                os.close(fd)
        finally:
            with contextlib.suppress(OSError):
                probe.unlink()
    except OSError as e:
        raise OutputError(f"{flag} {shown or path}: cannot write there ({e.strerror or e}); choose a writable "
                          f"{'directory' if kind == 'dir' else 'file'} with free space") from None
    return path


class OutputLock:
    """An exclusive lock on a run or store directory, held by one process until `release` (or its death).

    flock(2) on `lock_file`, opened read-only: the kernel drops the lock when the last descriptor of it closes, so
    a holder killed by SIGKILL leaves no stale lock, and a file system can still be remounted read-only under a
    running trainer. The file holds the holder's pid for the refusal message; it is left in place (removing a lock
    file races with the next taker). Processes the holder forks (DataLoader workers) share the lock until they
    exit; a taker that finds the lock held although its recorded holder is dead waits `orphan_wait` seconds for
    them. On systems without fcntl (Windows) this does nothing.

    A lock file can be deleted under its holder (a tmp cleaner, a hand clean-up); a taker would then create and
    lock a new one and run alongside. So a run directory's lock (`directory`) is also a flock on the directory
    itself, which cannot be unlinked while it holds the run; and a taker checks that the file it locked is still
    the one at the path (it may have been replaced between open and flock).
    """

    def __init__(self, lock_file: str | os.PathLike, what: str, orphan_wait: float = 15.0,
                 directory: str | os.PathLike | None = None):
        self.lock_file, self.what, self.orphan_wait, self.fd = Path(lock_file), what, orphan_wait, None
        self.directory, self.dir_fd = (Path(directory) if directory is not None else None), None

    def acquire(self) -> OutputLock:
        try:
            import fcntl
        except ImportError:
            return self
        import time

        deadline = time.monotonic() + self.orphan_wait
        fd = None
        while True:
            if fd is None:
                try:
                    fd = os.open(self.lock_file, os.O_RDONLY | os.O_CREAT, 0o644)
                except OSError as e:
                    raise OutputError(f"{self.lock_file}: cannot create the lock file ({e.strerror or e})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if self._is_current(fd):
                    break
                # The lock file was deleted (a tmp cleaner, a hand clean-up) or replaced after we opened it: our
                # lock is on a file nobody else will open, and a holder of the old one may be running. Lock the
                # file that is at the path now.
                os.close(fd)
                fd = None
            except BlockingIOError:
                holder = self._holder()
                if not (holder.isdigit() and not pid_alive(int(holder)) and time.monotonic() < deadline):
                    os.close(fd)
                    raise self._in_use(holder, self.lock_file) from None
                time.sleep(0.2)  # the holder died; the children it forked still hold the lock for a moment
        if self.directory is not None:
            try:
                self.dir_fd = hold_dir(self.directory)
            except BlockingIOError:  # held by a process whose lock file was deleted
                os.close(fd)
                raise self._in_use("", self.directory) from None
        self.fd = fd
        try:
            with open(self.lock_file, "w", encoding="ascii") as f:
                f.write(f"{os.getpid()}\n")
        except OSError:
            pass  # the pid is only for messages
        return self

    def _in_use(self, holder: str, held: Path) -> OutputError:
        if not holder.isdigit():  # the lock file that names it was deleted or never written: ask the kernel
            pids = flock_holders(held)
            holder = (", ".join(map(str, pids)) if pids else
                      f"unknown: {self.lock_file}, where the holder writes its pid, "
                      + ("is gone" if not self.lock_file.exists() else "names none")
                      + ", and /proc/locks, where the kernel lists who holds a lock, does not say")
        return OutputError(f"{self.what}: in use by another litebert process (pid {holder}, which holds {held}); "
                           "wait for it to finish or choose another output")

    def _is_current(self, fd: int) -> bool:
        """Whether the descriptor `fd` is still the file at `lock_file` (same device and inode)."""
        try:
            at_path = os.stat(self.lock_file)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (mine.st_dev, mine.st_ino) == (at_path.st_dev, at_path.st_ino)

    def _holder(self) -> str:
        try:
            return self.lock_file.read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            return ""

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the lock
            self.fd = None
        if self.dir_fd is not None:
            os.close(self.dir_fd)
            self.dir_fd = None

    def __enter__(self) -> OutputLock:
        return self if self.fd is not None else self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True



def flock_holders(path: str | os.PathLike) -> list[int]:
    """The pids that hold a flock(2) on `path`, from the kernel's table of locks (Linux /proc/locks: "ID: FLOCK
    ADVISORY WRITE PID MAJOR:MINOR:INODE START END", device numbers in hex); [] where there is no such table or a
    holder is not visible from here (another pid namespace shows pid 0 or -1)."""
    try:
        st = os.stat(path)
        table = Path("/proc/locks").read_text()
    except OSError:
        return []
    me = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for line in table.splitlines():
        fields = line.split()
        if "->" in fields:  # a process waiting for the lock, not holding it
            continue
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == me and fields[4].isdigit() and int(fields[4]):
            pids.append(int(fields[4]))
    return sorted(set(pids))


def hold_dir(directory: str | os.PathLike) -> int | None:
    """An exclusive flock(2) on the directory itself, for as long as the returned descriptor is open (close it to
    let go; the kernel drops it when the holder dies). A directory holding the work cannot be deleted without
    deleting the work, so this lock, unlike a lock file's, cannot vanish under its holder. BlockingIOError when
    another process holds it; None where there is no flock (Windows)."""
    try:
        import fcntl
    except ImportError:
        return None
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def dir_is_held(directory: str | os.PathLike) -> bool:
    """Whether another process holds `hold_dir(directory)` now (a directory that is gone is not held)."""
    try:
        fd = hold_dir(directory)
    except BlockingIOError:
        return True
    except OSError:
        return False
    if fd is not None:
        os.close(fd)
    return False


def lock_dir(directory: str | os.PathLike, what: str | None = None) -> OutputLock:
    """Take the lock of a run directory (DIR/.lock, and DIR itself); raise OutputError naming the holder's pid if it
    is taken."""
    directory = Path(directory)
    return OutputLock(directory / ".lock", what or str(directory), directory=directory).acquire()


def move_into_place(tmp: Path, final: Path) -> Path | None:
    """Rename the finished temporary directory `tmp` to `final`. An existing `final` is first renamed aside; return
    that path (the caller removes it, or puts it back after a crash).

    Between the two renames `final` does not exist. If the second rename fails, the aside copy is put back at once.
    """
    import shutil

    if not final.exists():
        os.rename(tmp, final)
        return None
    aside = final.parent / f".old-{final.name}-{os.getpid()}"
    if aside.exists():
        shutil.rmtree(aside)
    os.rename(final, aside)
    try:
        os.rename(tmp, final)
    except BaseException:
        os.rename(aside, final)
        raise
    return aside


def atomic_write_bytes(file: Path, data: bytes) -> None:
    atomic_write(file, lambda tmp: tmp.write_bytes(data))


def fsync_file(file: Path) -> None:
    fd = os.open(file, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make renames and new entries in `path` durable. Windows cannot open directories; there is nothing to do."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:  # some network file systems refuse fsync on directories
        if e.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------------ reading JSON


def parse_json(text: str, source: str | os.PathLike, error: type[Exception], line: int | None = None,
               hint: str = "") -> Any:
    """json.loads(text); bad JSON raises `error` naming `source` and the line at fault.

    `line`: the line of `source` that `text` is (one JSONL record); None when `text` is the whole file.
    `hint`: what the user can do about it, appended to the message.
    """
    tail = f"; {hint}" if hint else ""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        at = where(source, e.lineno if line is None else line + e.lineno - 1)
        raise error(f"{at}: not valid JSON ({e.msg} at column {e.colno}){tail}") from None
    except RecursionError:
        raise error(f"{where(source, line)}: JSON nested too deeply to read{tail}") from None


# The largest JSON or YAML file read whole (SQuAD 2.0's training set, the largest we read, is 40 MiB). Past it,
# or from something that is not a regular file (/dev/zero, a FIFO), a read would exhaust memory or never end.
MAX_TEXT_BYTES = 256 * 2 ** 20


def read_small_text(path: str | os.PathLike, limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of the regular file `path`, read whole, at most `limit` bytes.

    Raises OSError (FileNotFoundError, ...) as open() does, UnicodeDecodeError for bad UTF-8, and ValueError
    naming the file for what is not a regular file or is larger than `limit`. The file is opened non-blocking,
    so a FIFO with no writer is refused at once instead of hanging the reader.
    """
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(info.st_mode) else "a device" if stat.S_ISCHR(info.st_mode)
                    or stat.S_ISBLK(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode) else "a directory"
                    if stat.S_ISDIR(info.st_mode) else "not a regular file")
            raise ValueError(f"{path}: not a regular file ({kind}); give a file")
        data = f.read(limit + 1)  # a file that grew since fstat is still cut at the limit
        if info.st_size > limit or len(data) > limit:
            raise ValueError(f"{path}: {max(info.st_size, len(data)):,} bytes is over the {limit:,}-byte limit for "
                             f"a file read whole")
    return data.decode("utf-8")


def read_text_checked(path: str | os.PathLike, error: type[Exception], missing: str = "not found", hint: str = "",
                      limit: int = MAX_TEXT_BYTES, prefix: str = "") -> str:
    """`read_small_text` with each failure raised as `error` naming the file (after `prefix`, e.g. "--config "):
    missing, unreadable, not UTF-8, not a regular file or larger than `limit`; `hint` ends every message but
    the missing file's."""
    tail = f"; {hint}" if hint else ""
    try:
        return read_small_text(path, limit)
    except FileNotFoundError:
        raise error(f"{prefix}{path}: {missing}") from None
    except UnicodeDecodeError as e:
        raise error(f"{prefix}{path}: invalid UTF-8 ({e.reason} at byte {e.start}){tail}") from None
    except OSError as e:
        raise error(f"{prefix}{path}: cannot read ({reason(e)}){tail}") from None
    except ValueError as e:  # not a regular file, or too large: the message names the file
        raise error(f"{prefix}{e}{tail}") from None


def read_json(path: str | os.PathLike, error: type[Exception], missing: str = "not found",
              expect: type | None = None, what: str = "a JSON object", hint: str = "") -> Any:
    """The parsed JSON of the file `path`: open, decode UTF-8, parse, and check the top-level type.

    Each step's failure raises `error` naming the file (and the line, for bad JSON): a missing file says
    "{path}: {missing}"; `expect` (dict, list) is the type the top level must have, described by `what`;
    `hint` (what to do about it) ends every message but the missing file's.
    """
    path = Path(path)
    tail = f"; {hint}" if hint else ""
    data = parse_json(read_text_checked(path, error, missing, hint), path, error, hint=hint)
    if expect is not None and not isinstance(data, expect):
        raise error(f"{path}: expected {what}, got {type(data).__name__}{tail}")
    return data
