"""Reading a small file that may have been planted: regular files only, bounded, no blocking.

A FIFO named like a settings file would block a plain ``read_text()`` forever and a sparse
file could claim gigabytes; this opens without blocking, checks the descriptor it opened,
and reads at most ``limit`` bytes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["read_small_file"]


def read_small_file(path: str | Path, limit: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises:
        FileNotFoundError: nothing is there.
        OSError: it cannot be opened (a symlink, with ``follow_symlinks=False``).
        ValueError: ``"not a regular file"`` (a FIFO, a device, a folder…) or
            ``"larger than <limit> bytes"``.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags if follow_symlinks else flags | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_size > limit:
            raise ValueError(f"larger than {limit} bytes")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data
