"""bubblewrap's mount options: what the namespace of each sandboxed command holds.

The order is the policy. ``/proc``; ``/dev`` read-only but for its devices and a sized
``/dev/shm``; a sized private ``/tmp`` holding ``HOME``; the system folders and what is
shown read-only (the interpreter, toolchains, read paths); the workspace and the write
paths; the agent's own code read-only again where they hold it; then what is hidden and the
protected paths, last, so that no read or write path uncovers them; and a read-only ``/``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["SANDBOX_HOME", "SANDBOX_TMP", "SYSTEM_DIRS", "inside", "mount_options"]

SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Read-only in the sandbox (mirrored as symlinks where they are symlinks, merged ``/usr``)."""
SANDBOX_TMP = "/tmp"
SANDBOX_HOME = "/tmp/home"


def inside(path: Path, folders: Iterable[str | Path]) -> bool:
    """Whether ``path`` is one of ``folders`` or lies in one."""
    return any(path == Path(f) or path.is_relative_to(f) for f in folders)


def mount_options(
    *,
    root: Path,
    tmp_mb: int,
    read: Sequence[Path],
    write: Sequence[Path],
    own_code: Sequence[Path],
    hidden: Sequence[tuple[str, bool]],
    protected: Sequence[Path],
    network: bool,
) -> list[str]:
    """The options from ``/proc`` to the read-only ``/``: ``read`` folders and files shown
    read-only, ``root`` and ``write`` writable, ``own_code`` read-only again, ``hidden``
    entries (path, is a folder) and ``protected`` paths (in ``root``) hidden."""
    size = str(tmp_mb << 20)
    args = ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm"]
    args += ["--remount-ro", "/dev", "--size", size, "--tmpfs", SANDBOX_TMP]
    args += ["--dir", SANDBOX_HOME]
    for folder in SYSTEM_DIRS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    for path in dict.fromkeys(read):  # one mount where another already shows it
        if not any(path != other and path.is_relative_to(other) for other in read):
            args += ["--ro-bind-try", str(path), str(path)]
    resolv = Path("/etc/resolv.conf")
    if network and resolv.is_symlink():
        target = resolv.resolve()
        if not inside(target, SYSTEM_DIRS):
            args += ["--ro-bind-try", str(target), str(target)]
    args += ["--bind", str(root), str(root)]
    for path in write:
        args += ["--bind-try", str(path), str(path)]
    for path in own_code:
        args += ["--ro-bind-try", str(path), str(path)]
    for secret, is_folder in hidden:
        if is_folder:
            args += ["--tmpfs", secret, "--remount-ro", secret]
        else:
            args += ["--ro-bind", "/dev/null", secret]
    for path in protected:
        if not any(path.is_relative_to(other) for other in protected if other != path):
            args += _protect(root, path)
    return [*args, "--remount-ro", "/"]


def _protect(root: Path, path: Path) -> list[str]:
    args = []
    # Folders between the root and a protected path become mount points: they cannot be
    # renamed away (and the protected path recreated in their place).
    for ancestor in reversed(path.relative_to(root).parents[:-1]):
        folder = root / ancestor
        if folder.is_dir() and not folder.is_symlink():
            args += ["--bind", str(folder), str(folder)]
    if path.exists() and not path.is_dir():
        return [*args, "--ro-bind", "/dev/null", str(path)]
    # A folder, or nothing yet: an empty read-only tmpfs (bubblewrap creates the folder).
    return [*args, "--tmpfs", str(path), "--remount-ro", str(path)]
