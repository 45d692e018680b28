"""Writing a file the user named (``--html FILE``): whole or not at all, and only a file.

The text goes to a temporary file beside the target, then is renamed over it, so a full
disk or a crash leaves the old file or none, never a cut one. What the name is decides
where that happens:

* a regular file, or a name not taken yet: replaced (created) that way;
* a symlink: written through, to the file it leads to (the rename happens beside that
  file, so the link stays a link);
* a device, FIFO, socket or folder: refused; renaming over it would replace ``/dev/full``
  with a regular file, or a FIFO a reader waits on.

Every error names the path the user gave, never the temporary file.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

__all__ = ["write_whole"]


def write_whole(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all (see the module's notes).

    Raises:
        OSError: it cannot be written, or ``path`` names something other than a regular
            file (``EINVAL``); ``filename`` is ``path`` as given.
    """
    given = str(path)
    target = Path(os.path.realpath(path))  # a symlink is written through to its target
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise OSError(error.errno, error.strerror, given) from None
    if mode is not None and not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, "not a regular file (a device, FIFO, socket or folder)", given)
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(temporary, flags, 0o666)  # a new file: as the umask says
        try:
            if mode is not None:
                os.fchmod(fd, stat.S_IMODE(mode))  # a replaced file keeps its mode
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    except OSError as error:
        raise OSError(error.errno, error.strerror, given) from None
