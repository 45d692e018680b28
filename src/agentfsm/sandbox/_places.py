"""Where a path really is, whatever its name: the file system it lies on and its path there.

A folder has many names: the path as written, its real path past symlinks, a bind mount
(``mount --bind ~ /mnt/h``), the same file system mounted twice. Paths compared as written
see only the first two; device and inode numbers see only what exists, and not what a
mount below a folder brings into it. :class:`Places` reads the mount table once and gives
every path its *place*: the device of the file system it lies on and its path within that
file system, the same for every name of it, whether it exists yet or not. "Lies in" and
"holds" are then prefix tests on places, and the mount points below a folder are its other
ways in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

__all__ = ["Place", "Places", "within"]

Place = tuple[str, PurePosixPath]
"""A file system's device (``major:minor``) and a path within that file system."""
_ESCAPE = re.compile(r"\\([0-7]{3})")


def within(place: Place, folder: Place) -> PurePosixPath | None:
    """``place`` relative to ``folder`` (``.`` when they are one) when it lies in it."""
    if place[0] != folder[0] or not place[1].is_relative_to(folder[1]):
        return None
    return place[1].relative_to(folder[1])


def _mount_table() -> list[tuple[str, Place]]:
    """The visible mounts as (mount point, place of its root), the top one of each point."""
    try:
        lines = Path("/proc/self/mountinfo").read_text("utf-8", "surrogateescape").splitlines()
    except OSError:
        return []
    top: dict[str, Place] = {}
    for line in lines:
        fields = line.split(" - ", 1)[0].split()
        if len(fields) >= 5:
            root, point = (_ESCAPE.sub(lambda m: chr(int(m[1], 8)), f) for f in fields[3:5])
            top.pop(point, None)  # a later mount on the same point covers the earlier one
            top[point] = (fields[2], PurePosixPath(root))
    return list(top.items())


class Places:
    """The places of paths, from the mount table as it is when this is made."""

    def __init__(self) -> None:
        table = _mount_table()
        # Deepest mount point first: the first one a path lies in is where it is.
        self._mounts = sorted(table, key=lambda m: -len(PurePosixPath(m[0]).parts))
        self._cache: dict[tuple[str, bool], Place] = {}

    def place(self, path: str | Path, *, follow: bool = True) -> Place:
        """Where ``path`` really is (``follow=False``: the entry itself, a symlink not
        followed)."""
        key = (str(path), follow)
        found = self._cache.get(key)
        if found is None:
            if follow:
                real = os.path.realpath(path)
            else:
                normal = os.path.normpath(path)
                real = os.path.join(os.path.realpath(os.path.dirname(normal)), Path(normal).name)
            found = self._cache[key] = self._locate(real)
        return found

    def _locate(self, real: str) -> Place:
        for point, (device, root) in self._mounts:
            if real == point or real.startswith(point.rstrip("/") + "/"):
                return device, root / os.path.relpath(real, point)
        return "", PurePosixPath(real)

    def names(self, folder: str | Path) -> list[tuple[Path, Place]]:
        """``folder`` and the mount points below it (each a way into other folders), as
        paths beneath ``folder`` with their places."""
        real = os.path.realpath(folder)
        found = [(Path(folder), self.place(folder))]
        for point, place in self._mounts:
            if point != real and point.startswith(real.rstrip("/") + "/"):
                found.append((Path(folder) / os.path.relpath(point, real), place))
        return found

    def holds(self, folder: str | Path, targets: Iterable[Place]) -> list[Path]:
        """Where, beneath ``folder`` (through it or a mount below it), each of ``targets``
        lies: the paths it has there."""
        names = self.names(folder)
        found = []
        for target in targets:
            for path, place in names:
                rel = within(target, place)
                if rel is not None:
                    found.append(path / rel)
        return found

    def inside(self, folder: str | Path, target: Place) -> list[Path]:
        """The names of ``folder`` (it, or a mount below it) that lie in ``target``."""
        return [path for path, place in self.names(folder) if within(place, target) is not None]
