"""bubblewrap's mount options: what the namespace of each sandboxed command holds.

The order is the policy. ``/proc``; ``/dev`` read-only but for its devices and a sized
``/dev/shm``; a sized private ``/tmp`` holding ``HOME``; the system folders and what is
shown read-only (the interpreter, toolchains, read paths); the workspace and the write
paths; the folders above the agent's own code and the protected paths in them bound over
themselves (a mount point cannot be renamed away); that code read-only again; the
protected paths, then what is hidden, last, so that nothing above uncovers them; and a
read-only ``/``.
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
    read-only, ``root`` and ``write`` writable, ``own_code`` read-only again, ``protected``
    paths (in ``root``) and ``hidden`` entries (path, is a folder) hidden."""
    size = str(tmp_mb << 20)
    args = ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm"]
    args += ["--remount-ro", "/dev", "--size", size, "--tmpfs", SANDBOX_TMP]
    args += ["--dir", SANDBOX_HOME]
    for folder in SYSTEM_DIRS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    for path in _outermost(read):  # one mount where another already shows it
        args += ["--ro-bind-try", str(path), str(path)]
    resolv = Path("/etc/resolv.conf")
    if network and resolv.is_symlink():
        target = resolv.resolve()
        if not inside(target, SYSTEM_DIRS):
            args += ["--ro-bind-try", str(target), str(target)]
    args += ["--bind", str(root), str(root)]
    for path in write:
        args += ["--bind-try", str(path), str(path)]
    own, covered = _outermost(own_code), _outermost(protected)
    for pin in _pins((root, *write), (*own, *covered)):
        args += ["--bind", str(pin), str(pin)]
    for path in own:
        args += ["--ro-bind-try", str(path), str(path)]
    for path in covered:
        if path.exists() and not path.is_dir():
            args += ["--ro-bind", "/dev/null", str(path)]
        else:  # a folder, or nothing yet: an empty read-only tmpfs (bubblewrap creates it)
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
    # Last, so that nothing mounted above (a pin, a read or write path) uncovers them.
    for secret, is_folder in hidden:
        if is_folder:
            args += ["--tmpfs", secret, "--remount-ro", secret]
        else:
            args += ["--ro-bind", "/dev/null", secret]
    return [*args, "--remount-ro", "/"]


def _outermost(paths: Sequence[Path]) -> list[Path]:
    """``paths`` without duplicates and without those inside another of them."""
    unique = list(dict.fromkeys(paths))
    return [p for p in unique if not any(p != o and p.is_relative_to(o) for o in unique)]


def _pins(writable: Sequence[Path], paths: Sequence[Path]) -> list[Path]:
    """The folders between a writable folder and each of ``paths``, parents first: bound
    over themselves they become mount points, which cannot be renamed or removed, so the
    paths below them (the agent's own code, a protected folder) cannot be moved away from
    the mounts that guard them, nor made again elsewhere under their names."""
    found: dict[Path, None] = {}
    for path in paths:
        for folder in reversed(path.parents):
            pinned = folder not in writable and inside(folder, writable)
            if pinned and folder.is_dir() and not folder.is_symlink():
                found[folder] = None
    return sorted(found, key=lambda f: len(f.parts))
