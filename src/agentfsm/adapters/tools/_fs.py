"""Race-free paths beneath a root: every lookup walks file descriptors, never strings.

:class:`SafeRoot` holds a descriptor of the root folder, opened once. A path is resolved
one component at a time from that descriptor with ``O_NOFOLLOW`` opens, so the kernel never
follows a symlink on our behalf: a symlink met on the way is read (``readlinkat``) and its
relative target spliced into the rest of the path; absolute targets, ``..`` above the root
and symlink loops are refused. What the tools then act on is the descriptor that was
checked, so swapping a folder for a symlink between a check and a use leads nowhere.

The resolved components are returned too: permission rules and the protected folders are
checked on where a path really leads, not on how it was spelled. Every folder the walk
opens is also compared by identity (device and inode) with the hidden entries and the
read-only folders, so another name for one of them (a bind mount, a folder renamed since)
leads into it no more than its own.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import unicodedata
import weakref
from collections.abc import Sequence
from pathlib import Path

from agentfsm.sandbox import hidden_beneath, hidden_identities

from ._workspace import PROTECTED_DIR, OutsideWorkspace

__all__ = [
    "MAX_SYMLINK_HOPS",
    "PERMISSION_BITS",
    "PathRefused",
    "Resolved",
    "SafeRoot",
    "check_regular",
    "open_regular",
    "open_subdir",
    "read_capped",
    "replace_file",
    "within",
]

MAX_SYMLINK_HOPS = 40
"""Symlinks followed while resolving one path, as Linux does."""

_RETRIES = 8
"""Times a component is looked at again when it changes between two system calls."""

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC


class PathRefused(Exception):
    """A path inside the workspace that the tools will not touch; the message says why."""


_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def _kind(mode: int) -> str:
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def check_regular(st: os.stat_result, rel: str) -> None:
    """Refuse anything but a regular file with one link (a hard link may share its
    content with a file outside the workspace)."""
    if not stat.S_ISREG(st.st_mode):
        raise PathRefused(f"{rel!r} is {_kind(st.st_mode)}; only regular files are used")
    if st.st_nlink > 1:
        raise PathRefused(
            f"{rel!r} has {st.st_nlink} hard links; a hard-linked file may be shared with a "
            "file outside the workspace, so it is not used"
        )


def read_capped(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes from ``fd``."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def open_regular(dir_fd: int, name: str, rel: str) -> tuple[int, os.stat_result]:
    """Open file ``name`` of ``dir_fd`` for reading without following a symlink or blocking
    (a FIFO opens at once); ``(fd, fstat)``, refused unless a regular file with one link."""
    fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        check_regular(st, rel)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_subdir(dir_fd: int, name: str) -> int:
    """Open folder ``name`` of ``dir_fd`` without following a symlink (``OSError`` if it
    is not a real folder now)."""
    return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


PERMISSION_BITS = 0o777
"""The mode bits a written file keeps: read, write and execute. Set-user-ID, set-group-ID
and sticky are always dropped, so no tool write makes or keeps a setuid program."""


def replace_file(dir_fd: int, name: str, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to a new file in ``dir_fd`` and rename it over ``name``.

    The rename replaces whatever ``name`` is (a symlink is replaced, never followed), and a
    reader sees the old content or the new one, never half of it. The new file gets
    ``mode`` (the file it replaces, say) or, when ``None``, the usual ``0o666`` less the
    umask, in both cases only its :data:`PERMISSION_BITS`: the mode is set with ``fchmod``
    on the new descriptor, so a setuid or setgid bit is never kept nor gained.
    """
    tmp = f".tmp-write-{secrets.token_hex(8)}"
    fd = os.open(tmp, _CREATE_FLAGS, 0o666, dir_fd=dir_fd)
    try:
        try:
            if mode is None:
                mode = stat.S_IMODE(os.fstat(fd).st_mode)
            os.fchmod(fd, mode & PERMISSION_BITS)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino


def _fold(part: str) -> str:
    """How a name compares for the protected check (case and width folded, so that
    case-insensitive file systems and look-alike spellings cannot get around it)."""
    return unicodedata.normalize("NFKC", part).casefold()


def within(parts: Sequence[str], paths: tuple[tuple[str, ...], ...]) -> bool:
    """Whether ``parts`` are, or are inside, one of ``paths`` (folded components)."""
    folded = tuple(_fold(p) for p in parts[: max(map(len, paths), default=0)])
    return any(folded[: len(item)] == item for item in paths)


class Resolved:
    """Where a path leads: the folder that holds it (an open descriptor) and its name there.

    ``name`` is ``None`` when the path is that folder itself. ``pending`` names folders
    that do not exist yet between ``dir_fd`` and ``name`` (only with ``missing_ok``);
    ``parts`` are all components from the root; ``readonly`` says that a folder on the way
    is one of the root's read-only folders by identity. Close it (or use ``with``) when done.
    """

    def __init__(
        self,
        dir_fd: int,
        name: str | None,
        parts: tuple[str, ...],
        *,
        pending: tuple[str, ...] = (),
        must_be_dir: bool = False,
        owned: bool = True,
        readonly: bool = False,
    ) -> None:
        self.dir_fd = dir_fd
        self.name = name
        self.parts = parts
        self.pending = pending
        self.must_be_dir = must_be_dir
        self.readonly = readonly
        self._owned = owned

    @property
    def rel(self) -> str:
        """The resolved path, relative to the root, POSIX style (``.`` for the root)."""
        return "/".join(self.parts) or "."

    def close(self) -> None:
        if self._owned:
            self._owned = False
            os.close(self.dir_fd)

    def __enter__(self) -> Resolved:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class SafeRoot:
    """A root folder, held by a descriptor, that paths are resolved beneath.

    ``protected`` paths (relative to the root; ``.agentfsm`` by default) and ``hidden``
    ones (by default what the OS sandbox hides that lies beneath the root:
    :func:`~agentfsm.sandbox.hidden_beneath`, the home's secrets and the agent's own
    configuration and state among them) are refused wherever a path leads into them,
    through symlinks too, whether they exist or not, and, by default, wherever a path
    leads into one of the hidden entries that exist by another name
    (:func:`~agentfsm.sandbox.hidden_identities`). ``readonly`` paths (relative to the root
    or absolute; the root itself makes everything read-only) may be read but not changed:
    :meth:`check_writable` refuses where a resolved path leads into one of them, by name or,
    for those that exist, by identity.
    """

    def __init__(
        self,
        root: str | Path,
        protected: Sequence[str] = (PROTECTED_DIR,),
        *,
        readonly: Sequence[str] = (),
        hidden: Sequence[str] | None = None,
    ) -> None:
        given = Path(root).expanduser().absolute()
        self.path = given.resolve()
        self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        self._finalizer = weakref.finalize(self, os.close, self.fd)
        # Absolute paths are accepted under the root as given and under its real path.
        self._prefixes = tuple(dict.fromkeys(str(p).rstrip("/") + "/" for p in (self.path, given)))
        self.protected = tuple(
            tuple(_fold(p) for p in parts)
            for parts in (self._relative(item) for item in protected)
            if parts
        )
        self.hidden = tuple(
            tuple(_fold(p) for p in parts)
            for parts in (
                self._relative(item)
                for item in (hidden_beneath(self.path) if hidden is None else hidden)
            )
            if parts
        )
        self.readonly = tuple(
            dict.fromkeys(
                tuple(_fold(p) for p in parts)
                for parts in (self._relative(str(item)) for item in readonly)
                if parts is not None and ".." not in parts
            )
        )
        self.hidden_ids = hidden_identities() if hidden is None else frozenset()
        self.readonly_ids = frozenset(
            ident for item in readonly if (ident := _identity(self.path / item)) is not None
        )
        self._root_readonly = _identity(self.path) in self.readonly_ids

    def _relative(self, path: str) -> list[str] | None:
        """``path``'s components below the root (``None`` for an absolute path outside)."""
        if path.startswith("/"):
            prefix = next((p for p in self._prefixes if (path + "/").startswith(p)), None)
            if prefix is None:
                return None
            path = path[len(prefix) - 1 :]
        return [p for p in path.split("/") if p not in ("", ".")]

    def close(self) -> None:
        """Close the root's descriptor."""
        self._finalizer()

    def __enter__(self) -> SafeRoot:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- checks ----------------------------------------------------------------------

    def below(self, path: str | Path) -> tuple[str, ...] | None:
        """An absolute, resolved ``path`` as folded components below the root (``()`` for
        the root or a folder above it); ``None`` when it lies elsewhere."""
        path = Path(path)
        if self.path.is_relative_to(path):
            return ()
        if not path.is_relative_to(self.path):
            return None
        return tuple(_fold(p) for p in path.relative_to(self.path).parts)

    def is_protected(self, parts: Sequence[str]) -> bool:
        """Whether ``parts`` (from the root) are, or are inside, a protected or hidden path."""
        return within(parts, self.protected) or within(parts, self.hidden)

    def protected_error(self, parts: Sequence[str]) -> PathRefused:
        rel = "/".join(parts)
        if within(parts, self.protected):
            return PathRefused(
                f"{rel!r} is the agent's own configuration; it is not accessible to tools"
            )
        return PathRefused(
            f"{rel!r} is hidden from the agent (a secret of your home or of the machine, or "
            "the agent's own settings and state); it is not accessible to tools"
        )

    def is_readonly(self, parts: Sequence[str]) -> bool:
        """Whether ``parts`` (from the root) are, or are inside, a read-only path."""
        return within(parts, self.readonly)

    def check_writable(self, resolved: Resolved) -> None:
        """Refuse (:class:`PathRefused`) to change what ``resolved`` names when it is, or is
        inside, a read-only path: the agent's own installation, for the workspace tools.

        ``resolved.parts`` are where the path really leads (symlinks followed beneath the
        root), and the tools act on the descriptor those parts were resolved to.
        """
        if resolved.readonly or self.is_readonly(resolved.parts):
            raise PathRefused(
                f"{resolved.rel!r} is part of the agent's own installation (its interpreter, "
                "site-packages or agentfsm package); the agent does not change it"
            )

    def _split(self, path: str) -> tuple[list[str], bool]:
        if not isinstance(path, str) or not path.strip():
            raise OutsideWorkspace("a path is required; use '.' for the workspace root")
        if "\x00" in path:
            raise OutsideWorkspace(f"{path!r}: a path must not contain NUL bytes")
        if path.startswith("~"):
            raise OutsideWorkspace(
                f"{path!r}: home-relative paths are not allowed; use a path inside the workspace"
            )
        try:
            os.fsencode(path)
        except UnicodeError:
            raise OutsideWorkspace(f"{path!r} is not a valid file name here") from None
        parts = self._relative(path)
        if parts is None:
            raise self._outside(path, via_symlink=False)
        return parts, path.endswith(("/", "/."))

    @staticmethod
    def _outside(path: str, *, via_symlink: bool) -> OutsideWorkspace:
        how = (
            "leaves the workspace through a symlink" if via_symlink else "is outside the workspace"
        )
        return OutsideWorkspace(f"{path!r} {how}; paths must stay inside the workspace root")

    # -- resolving -------------------------------------------------------------------

    @staticmethod
    def _link(name: str, dir_fd: int) -> str | None:
        """The target if ``name`` is a symlink now, else ``None`` (missing or not a link)."""
        try:
            return os.readlink(name, dir_fd=dir_fd)
        except OSError as error:
            if error.errno in (errno.EINVAL, errno.ENOENT):
                return None
            raise

    def resolve(self, path: str, *, missing_ok: bool = False) -> Resolved:
        """Resolve ``path`` beneath the root (see the module docs).

        Raises :class:`OutsideWorkspace` for paths that leave the root, :class:`PathRefused`
        for protected paths and symlink loops, ``OSError`` for missing folders (unless
        ``missing_ok``: then they are returned in ``Resolved.pending``) and non-folders.
        """
        parts, must_be_dir = self._split(path)
        todo = list(reversed(parts))
        names: list[str] = []
        fds: list[int] = []
        idents: list[tuple[int, int]] = []
        pending: list[str] = []
        hops = retries = 0
        via_symlink = False
        final: str | None = None
        try:
            while todo:
                name = todo.pop()
                if name == "..":
                    if pending:
                        pending.pop()
                    elif names:
                        names.pop()
                        idents.pop()
                        os.close(fds.pop())
                    else:
                        raise self._outside(path, via_symlink=via_symlink)
                    continue
                if pending:
                    if not todo:
                        final = name
                        break
                    pending.append(name)
                    continue
                current = fds[-1] if fds else self.fd
                if not todo:
                    target = self._link(name, current)
                    if target is None:
                        final = name
                        break
                else:
                    try:
                        fd = os.open(name, _DIR_FLAGS, dir_fd=current)
                    except FileNotFoundError:
                        if not missing_ok:
                            raise
                        pending.append(name)
                        continue
                    except OSError as error:
                        if error.errno not in (errno.ENOTDIR, errno.ELOOP):
                            raise
                        target = self._link(name, current)
                        if target is None:
                            retries += 1
                            if retries > _RETRIES:
                                raise
                            todo.append(name)  # changed under us, or not a folder: look again
                            continue
                    else:
                        names.append(name)
                        fds.append(fd)
                        info = os.fstat(fd)
                        idents.append((info.st_dev, info.st_ino))
                        if self.is_protected(names) or idents[-1] in self.hidden_ids:
                            raise self.protected_error([*names, *reversed(todo)])
                        continue
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise PathRefused(f"{path!r}: too many levels of symbolic links")
                via_symlink = True
                if target.startswith("/") or "\x00" in target:
                    raise self._outside(path, via_symlink=True)
                if not todo and target.endswith(("/", "/.", "/..")):
                    must_be_dir = True
                todo.extend(reversed([p for p in target.split("/") if p not in ("", ".")]))
            if final is None and pending:
                final, must_be_dir = pending.pop(), True
            full = (*names, *pending, *((final,) if final is not None else ()))
            if self.is_protected(full):
                raise self.protected_error(full)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        for fd in fds[:-1]:
            os.close(fd)
        readonly = self._root_readonly or any(i in self.readonly_ids for i in idents)
        return Resolved(
            fds[-1] if fds else self.fd,
            final,
            full,
            pending=tuple(pending),
            must_be_dir=must_be_dir,
            owned=bool(fds),
            readonly=readonly,
        )

    # -- opening ---------------------------------------------------------------------

    def open_file(self, resolved: Resolved) -> tuple[int, os.stat_result]:
        """Open the regular file ``resolved`` names, for reading; ``(fd, fstat)``.

        Special files are refused before they are opened, and the opened descriptor is
        checked again (a regular file with one link, the same one that was looked at).
        """
        rel = resolved.rel
        if resolved.pending:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), rel)
        if resolved.name is None:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), rel)
        seen = os.stat(resolved.name, dir_fd=resolved.dir_fd, follow_symlinks=False)
        if stat.S_ISDIR(seen.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), rel)
        if resolved.must_be_dir:
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), rel)
        if stat.S_ISLNK(seen.st_mode):
            raise PathRefused(f"{rel!r} changed while it was being opened; try again")
        if self.is_hidden(seen):
            raise self.protected_error(resolved.parts)
        check_regular(seen, rel)
        fd, st = open_regular(resolved.dir_fd, resolved.name, rel)
        if (st.st_dev, st.st_ino) != (seen.st_dev, seen.st_ino):
            os.close(fd)
            raise PathRefused(f"{rel!r} changed while it was being opened; try again")
        return fd, st

    def open_dir(self, resolved: Resolved) -> int:
        """Open the folder ``resolved`` names (a new descriptor; close it)."""
        if resolved.pending:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), resolved.rel)
        fd = open_subdir(resolved.dir_fd, resolved.name or ".")
        if not self.shows_dir(fd):
            os.close(fd)
            raise self.protected_error(resolved.parts)
        return fd

    def is_hidden(self, info: os.stat_result) -> bool:
        """Whether ``info`` is one of the hidden entries, by identity."""
        return (info.st_dev, info.st_ino) in self.hidden_ids

    def shows_dir(self, fd: int) -> bool:
        """Whether the open folder ``fd`` is not one of the hidden entries, by identity."""
        return not self.hidden_ids or not self.is_hidden(os.fstat(fd))

    def create_parents(self, resolved: Resolved) -> None:
        """Create the ``pending`` folders of ``resolved``; ``dir_fd`` then holds ``name``."""
        for name in resolved.pending:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=resolved.dir_fd)
            try:
                fd = open_subdir(resolved.dir_fd, name)
            except OSError as error:
                if error.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise PathRefused(
                        f"{resolved.rel!r} changed while its folders were created; try again"
                    ) from error
                raise
            resolved.close()
            resolved.dir_fd, resolved._owned = fd, True
        resolved.pending = ()

    def read_bytes(self, path: str, limit: int) -> bytes:
        """At most ``limit`` bytes of the regular file ``path`` (resolved as above)."""
        with self.resolve(path) as resolved:
            fd, _ = self.open_file(resolved)
        try:
            return read_capped(fd, limit)
        finally:
            os.close(fd)
