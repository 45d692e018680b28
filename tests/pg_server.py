"""A real PostgreSQL server for tests: Debian's binaries, a throwaway cluster on 127.0.0.1.

``initdb`` into a temporary folder, ``pg_ctl start`` on a free loopback port, ``pg_ctl stop``
at the end. PostgreSQL refuses to run as root, so as root the cluster belongs to the
``postgres`` system user (created by Debian's package) and is started through ``runuser``;
then ``folder``'s parents must let that user through (a ``tempfile.mkdtemp()`` folder in
``/tmp`` does; pytest's ``tmp_path``, under a root-only folder, does not).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
from pathlib import Path

__all__ = ["PostgresServer", "postgres_bin"]

DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"


def postgres_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: on PATH, or Debian's versioned one."""
    found = shutil.which("initdb")
    if found is not None and shutil.which("pg_ctl") is not None:
        return Path(found).resolve().parent
    for folder in sorted(glob.glob(DEBIAN_BIN_GLOB), reverse=True):
        if Path(folder, "initdb").is_file() and Path(folder, "pg_ctl").is_file():
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PostgresServer:
    """One throwaway cluster; ``url`` is a superuser URL (``CREATEDB`` included)."""

    def __init__(self, folder: Path, *, user: str = "agentfsm") -> None:
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise FileNotFoundError("PostgreSQL is not installed (apt-get install postgresql)")
        self.bin = bin_dir
        self.folder = folder
        self.data = folder / "data"
        self.sockets = folder / "sockets"
        self.user = user
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            self._as = ["runuser", "-u", "postgres", "--"]
            for path in (folder, self.sockets):
                path.mkdir(parents=True, exist_ok=True)
                os.chown(path, owner.pw_uid, owner.pw_gid)
        else:
            self.sockets.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        """``postgresql://user@127.0.0.1:port/postgres``."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 60) -> None:
        subprocess.run(
            [*self._as, *args],
            check=True,
            capture_output=True,
            timeout=timeout,
            cwd=self.folder,
        )

    def start(self) -> PostgresServer:
        """``initdb`` (trust on loopback only) and ``pg_ctl start``; waits until it accepts."""
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            self.user,
            "-A",
            "trust",
            "--no-sync",
        )
        options = (
            f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c max_connections=200"
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.folder / "server.log"),
            "-w",
            "start",
        )
        return self

    def stop(self) -> None:
        """``pg_ctl stop -m fast`` (nothing if it never started)."""
        if (self.data / "postmaster.pid").exists():
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
