"""``--database-url``, checked before a durable command touches DBOS.

``batch``, ``worker``, ``runs`` and ``run --durable`` call :func:`check_database_url`
first: a URL that is not ``sqlite:///PATH`` or ``postgresql://…``, that does not parse, or
whose database cannot be opened or reached within :func:`connect_timeout` seconds is a
usage error (one line, exit code 2) instead of a traceback from DBOS or a long hang.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

from ._errors import UsageError

__all__ = [
    "POSTGRES_SCHEMES",
    "TIMEOUT_ENV",
    "check_database_url",
    "connect_timeout",
    "hide_secrets",
]

POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
"""The schemes of a PostgreSQL system database (DBOS connects with psycopg 3)."""
TIMEOUT_ENV = "AGENTFSM_DATABASE_TIMEOUT"
"""Seconds to wait for the database to answer the check (default 5)."""
DEFAULT_TIMEOUT = 5.0
_FORMS = "sqlite:///PATH or postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE"


class DatabaseUrlError(UsageError):
    """A ``--database-url`` no durable command can use."""


def connect_timeout() -> float:
    """``$AGENTFSM_DATABASE_TIMEOUT`` when it is a positive number of seconds, else 5."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV, ""))
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if math.isfinite(value) and value > 0 else DEFAULT_TIMEOUT


_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*:)[^\s@]*@")
"""The password of a URL's ``user:password@``."""
_PAIR = re.compile(r"(?:^|(?<=[?&;\s,(]))([^=&#\s?;,()]+)(\s*=\s*)('(?:[^'\\]|\\.)*'|[^&#\s;,)]*)")
"""A ``name=value`` pair of a query string or of a libpq connection string."""
_SECRET_NAME = re.compile(r"pass|pwd|secret|token|key", re.I)


def _hide_pair(match: re.Match[str]) -> str:
    name, equals, value = match.groups()
    if not value or not _SECRET_NAME.search(unquote(name)):
        return match.group(0)
    return f"{name}{equals}***"


def hide_secrets(text: str) -> str:
    """``text`` (a URL, a libpq ``key=value`` string, a message quoting one) with every
    password of a ``user:password@``, and the value of every parameter named like a secret
    (``password=``, ``?sslpassword=``, ``%70assword=``), as ``***``."""
    return _PAIR.sub(_hide_pair, _USERINFO.sub(r"\1***@", text))


def _shown(url: str) -> str:
    """The URL as an error quotes it: secrets hidden (:func:`hide_secrets`), cut at 200
    characters."""
    text = hide_secrets(url)
    return repr(text if len(text) <= 200 else text[:199] + "…")


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _within(seconds: float, check: Callable[[], None]) -> None:
    """``check()`` in a thread; a check still running after ``seconds`` is abandoned."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            check()
        except BaseException as error:  # reported in the caller's thread
            failure.append(error)

    thread = threading.Thread(target=target, name="agentfsm-database-check", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {seconds:g} s")
    if failure:
        raise failure[0]


def _check_sqlite(url: str, rest: str, create: bool) -> None:
    if not rest.startswith("/") or rest in ("/", "/:memory:"):
        raise DatabaseUrlError(
            f"--database-url {_shown(url)}: a SQLite database is sqlite:///PATH "
            "(three slashes, then a file path: sqlite:////abs/path.sqlite for an absolute one)"
        )
    text = rest[1:]
    if "?" in text or "#" in text:
        raise DatabaseUrlError(f"--database-url {_shown(url)}: no ?query or #fragment on SQLite")
    path = Path(text)
    try:
        if path.is_dir():
            raise DatabaseUrlError(f"--database-url {_shown(url)}: {text[:200]!r} is a folder")
        if not create and not path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DatabaseUrlError(
            f"--database-url {_shown(url)}: cannot create its folder: {error.strerror or error}"
        ) from None

    # A database not made yet is DBOS's to create, and another process may be creating it
    # now: the check opens one of its own beside where it will be (a fresh name, made
    # exclusively: never a symlink, never another check's) and removes it, never the real
    # path, which it would remove under that process (what it wrote then is lost).
    probe: Path | None = None
    try:
        if not path.exists():
            where = Path(os.path.realpath(path)).parent  # a symlink's: where DBOS creates it
            handle, name = tempfile.mkstemp(prefix=".agentfsm-", suffix=".check", dir=where)
            os.close(handle)
            probe = Path(name)
        opened = path if probe is None else probe

        def open_it() -> None:
            connection = sqlite3.connect(opened, timeout=connect_timeout())
            try:
                connection.execute("PRAGMA schema_version").fetchone()
                connection.execute("BEGIN IMMEDIATE")
                connection.rollback()
            finally:
                connection.close()

        _within(connect_timeout() + 1, open_it)
    except (sqlite3.Error, OSError) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else None
        raise DatabaseUrlError(
            f"--database-url {_shown(url)}: cannot open the SQLite database: "
            f"{why or _first_line(error)}"
        ) from None
    finally:
        if probe is not None:  # also when the open is still waiting: it is the check's own
            with contextlib.suppress(OSError):
                probe.unlink()


def _check_postgres(url: str) -> None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
        port = parsed.port
        host = parsed.host or parsed.query.get("host")
    except (ArgumentError, ValueError, TypeError) as error:
        raise DatabaseUrlError(
            f"--database-url {_shown(url)} does not parse ({_first_line(error)}); expected {_FORMS}"
        ) from None
    if not host:
        raise DatabaseUrlError(f"--database-url {_shown(url)} names no host; expected {_FORMS}")
    if port is not None and not 1 <= port <= 65535:
        raise DatabaseUrlError(f"--database-url {_shown(url)}: port {port} is out of range")
    if not parsed.database:
        raise DatabaseUrlError(f"--database-url {_shown(url)} names no database; expected {_FORMS}")
    seconds = connect_timeout()
    plain = parsed.set(drivername="postgresql")

    def reach(database: str | None) -> None:
        import psycopg

        target = plain if database is None else plain.set(database=database)
        conninfo = target.render_as_string(hide_password=False)
        connection = psycopg.connect(conninfo, connect_timeout=max(2, math.ceil(seconds)))
        connection.close()

    try:
        try:
            _within(seconds, lambda: reach(None))
        except Exception as error:
            # DBOS creates a missing system database: the server being reachable is enough.
            if "does not exist" not in str(error) or parsed.database == "postgres":
                raise
            _within(seconds, lambda: reach("postgres"))
    except TimeoutError:
        raise DatabaseUrlError(
            f"--database-url {_shown(url)}: the server did not answer within {seconds:g} s "
            f"(${TIMEOUT_ENV} sets the wait)"
        ) from None
    except Exception as error:
        reason = _first_line(error).removeprefix("connection failed: ")
        raise DatabaseUrlError(f"--database-url {_shown(url)}: cannot connect: {reason}") from None


def check_database_url(url: str | None, *, create: bool = True) -> str:
    """The system database URL a durable command uses (``None``: the default SQLite file),
    checked: its form, and that the database opens (SQLite; its folder is created unless
    ``create`` is false) or that the server answers and takes the credentials (PostgreSQL).
    Raises :class:`DatabaseUrlError` (a :class:`UsageError`) with a one-line reason."""
    if url is None:
        from agentfsm.adapters.sessions import state_home

        url = f"sqlite:///{state_home() / 'agentfsm' / 'durable.sqlite'}"
    if not url or len(url) > 4000 or any(c.isspace() or not c.isprintable() for c in url):
        raise DatabaseUrlError(
            f"--database-url {_shown(url)} is not a URL (no spaces or control characters); "
            f"expected {_FORMS}"
        )
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise DatabaseUrlError(f"--database-url {_shown(url)} is not a URL; expected {_FORMS}")
    if scheme == "sqlite":
        _check_sqlite(url, rest, create)
    elif scheme in POSTGRES_SCHEMES:
        _check_postgres(url)
    else:
        raise DatabaseUrlError(
            f"--database-url {_shown(url)}: the scheme must be sqlite or postgresql; "
            f"expected {_FORMS}"
        )
    return url
