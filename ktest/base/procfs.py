"""What the kernel says about a process (``/proc``) or a directory (``lstat``), and the one
record of "held by a live process" judged by it. Standard library only: the janitor loads it.

A :class:`Holder` is a pid *and* the kernel's start time of that pid, so a reused pid never
passes for the holder. Every record of a holder uses it: the holder file of a directory
(``"<pid> <start time>\\n"``, named ``owner`` on disk), kind cluster records
(``owner_pid``/``owner_start``), ``ktest up`` records (``pid``/``pid_start``) and namespace
annotations (``pid``/``start``, plus :func:`process_namespace`). Those file and field names stay
as older ktest versions wrote them.
"""

from __future__ import annotations

import contextlib  # loaded by the janitor already: no cost
import os
from pathlib import Path
from stat import S_IMODE, S_ISDIR, S_ISVTX

HOLDER_FILE = "owner"


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat``'s fields after the command name (state first); None if no such pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; the fields after ')' are fixed.
    return stat[stat.rindex(")") + 2 :].split()


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None if it does not exist."""
    fields = _stat_fields(pid)
    return None if fields is None else fields[19]


def process_alive(pid: int, start_time: str | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if given, started at ``start_time`` (no pid reuse)."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return start_time is None or fields[19] == start_time


def process_namespace() -> str:
    """Where a :class:`Holder` means something: this boot and this pid namespace
    (``<boot id>/pid:[<inode>]``), "" when unknown.

    A pid and its start time name one process only within one boot of one pid namespace:
    another machine, a container of its own, or this machine before a reboot may have run
    a different process under the same pid and start time. Records kept outside this
    machine (a namespace's annotation in a shared cluster) carry this next to the holder,
    and only records made here are judged.
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        pid_namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return f"{boot}/{pid_namespace}" if boot and pid_namespace else ""


class Holder:
    """A process identified by pid and start time (no confusion with a reused pid).

    ``where`` is the :func:`process_namespace` it was recorded in (a namespace's annotation in a
    shared cluster), None when the record does not say (files on this machine): a holder
    recorded elsewhere, or where it could not be told, is never judged dead here.
    A plain class, not a dataclass: importing ``dataclasses`` would add tens of milliseconds
    to the janitor's start.
    """

    __slots__ = ("pid", "start_time", "where")

    def __init__(self, pid: int, start_time: str, where: str | None = None) -> None:
        self.pid = pid
        self.start_time = start_time
        self.where = where

    def _key(self) -> tuple[int, str, str | None]:
        return (self.pid, self.start_time, self.where)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Holder) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Holder(pid={self.pid}, start_time={self.start_time!r}, where={self.where!r})"

    @classmethod
    def current(cls) -> Holder:
        pid = os.getpid()
        return cls(pid, process_start_time(pid) or "")

    def alive(self) -> bool:
        return process_alive(self.pid, self.start_time)

    def recorded_here(self) -> bool:
        """True unless ``where`` is given and is not this boot and pid namespace."""
        if self.where is None:
            return True
        here = process_namespace()
        return bool(here) and self.where == here

    def certainly_dead(self) -> bool:
        """Recorded here with a start time, and no process runs with that pid and start time."""
        return self.recorded_here() and bool(self.start_time) and not self.alive()

    def to_text(self) -> str:
        return f"{self.pid} {self.start_time}\n"

    @classmethod
    def from_text(cls, text: str) -> Holder | None:
        try:
            pid_text, start_time = text.split()
            return cls(int(pid_text), start_time)
        except ValueError:
            return None


def write_holder(directory: Path, holder: Holder | None = None) -> None:
    """Record ``holder`` (default: this process) in ``directory``'s holder file."""
    write_private_file(directory / HOLDER_FILE, (holder or Holder.current()).to_text())


def read_holder(directory: Path) -> Holder | None:
    """``directory``'s recorded holder; None without a readable holder file."""
    try:
        return Holder.from_text((directory / HOLDER_FILE).read_text())
    except OSError:
        return None


def private_directory(path: Path) -> Path:
    """Create ``path`` and every missing parent 0700 (``mkdir(parents=True)`` would give
    the parents the umask's 0755); an existing directory is left as it is."""
    missing: list[Path] = []
    current = path
    while not os.path.lexists(current) and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            continue
    return path


def private_cache_directory(path: Path) -> Path:
    """:func:`private_directory`, and an existing one of this user's that group or others may
    enter (an older ktest made it with the umask's 0755) made 0700: a cache directory holds
    what only this user should read (etcd data with the cluster's secrets, probed flags)."""
    private_directory(path)
    try:
        stat = os.lstat(path)
        if S_ISDIR(stat.st_mode) and stat.st_uid == os.getuid() and stat.st_mode & 0o077:
            os.chmod(path, 0o700, follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass  # not ours, or gone: what writes there next says why
    return path


def untrusted(path: Path | str, stat: os.stat_result, *, group_may_write: bool = False) -> str:
    """Why a directory with ``stat`` could be taken over by another user ("" when it cannot): it
    belongs to someone other than this user or root, or group or others may write in it
    without the sticky bit (they could rename what this user makes there and put theirs).
    ``group_may_write``: a group-writable one passes (a user-private group's, umask 002)."""
    mode = S_IMODE(stat.st_mode)
    loose = 0o002 if group_may_write else 0o022
    if stat.st_uid not in (os.getuid(), 0):
        problem = f"belongs to {_user_name(stat.st_uid)}"
    elif mode & loose and not mode & S_ISVTX:
        problem = "may be written by " + ("others" if mode & 0o002 else "its group") + " (no sticky bit)"
    else:
        return ""
    return f"{path} (owner {_user_name(stat.st_uid)}, mode {mode:04o}) {problem}"


def _user_name(uid: int) -> str:
    try:
        import pwd  # deferred: the janitor's start needs none of it

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def write_private_file(path: Path, data: bytes | str) -> None:
    """Write ``data`` readable by this user only (0600) into a 0700 directory, atomically:
    a reader never sees half a file, a file rewritten with the same content stays valid, and
    a symlink planted at ``path`` is replaced, never followed.

    The directory is opened and checked by descriptor (this user's or root's, and no one else
    may write in it: :func:`untrusted`), and the partial file is a new one (``O_EXCL``, a
    random name) made through that descriptor: no file of another user is ever written to.
    PermissionError naming the directory, its owner and mode otherwise."""
    private_directory(path.parent)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        problem = untrusted(path.parent, os.fstat(directory))
        if problem:
            raise PermissionError(
                f"refusing to write {path.name} there: {problem}. Private files (keys, kubeconfigs) go "
                "only in a directory of this user's that no one else may write in: use another "
                "directory, or `chmod go-w` / `chown` this one."
            )
        partial = f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.partial"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(partial, flags, 0o600, dir_fd=directory)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data.encode() if isinstance(data, str) else data)
            os.replace(partial, path.name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(partial, dir_fd=directory)
            raise
    finally:
        os.close(directory)


def own_directory(path: Path) -> bool:
    """A real directory (not a symlink) of this user: the only kind a sweep judges.

    Another user's directory is never entered (its 0700 mode would make every check a
    PermissionError; as root, entering it would remove someone else's run).
    """
    try:
        stat = os.lstat(path)
    except OSError:
        return False
    return S_ISDIR(stat.st_mode) and stat.st_uid == os.getuid()
