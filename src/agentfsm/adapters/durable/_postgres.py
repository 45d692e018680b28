"""A PostgreSQL system database engine whose every wait is bounded.

DBOS's own engine waits on the database as long as the operating system lets it: a
connection whose traffic has gone silent (a dead NAT entry, a database host that froze,
a proxy that stopped forwarding) blocks the thread that uses it forever. The engine of
:func:`system_engine` bounds each wait instead:

- **connecting**: ``connect_timeout`` (:data:`CONNECT_TIMEOUT` seconds per attempt);
- **each reply**: a statement, commit or ping that gets no answer within
  :func:`answer_timeout` seconds (``$AGENTFSM_DATABASE_ANSWER_TIMEOUT``, default 30) has its
  connection closed and fails as a lost connection, which DBOS retries on a new one;
  waiting for notifications (``LISTEN``) is not bounded: silence is normal there;
- **a broken socket**: a wait that fails without an answer from the server while the
  statement is still in flight (psycopg's "connection socket closed", when the kernel
  reports a reset before libpq reads it) closes the connection too, so it fails as a lost
  connection DBOS retries instead of leaving a connection that looks alive in the pool;
- **the network**: TCP keepalives (idle 10 s, then 3 probes 5 s apart) and
  ``tcp_user_timeout`` (30 s) let the kernel drop a connection whose peer is gone;
- **the server**: ``idle_in_transaction_session_timeout`` (60 s) ends a session left in an
  open transaction by a client that froze, releasing its locks.

``hold`` (for the engine of a process that runs tasks) retries a refused or failed
connection every second for that many seconds before the error reaches DBOS, whose own
retries wait longer and longer between attempts (up to 90 s): a database that comes back
is then noticed within about a second, and an outage costs one warning in the log per
``hold`` seconds instead of one per attempt.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections.abc import Generator
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.abc import PQGen
from psycopg.errors import _WaitTimeout
from psycopg.pq import TransactionStatus
from sqlalchemy.engine import make_url

__all__ = [
    "ANSWER_TIMEOUT_ENV",
    "CONNECT_TIMEOUT",
    "answer_timeout",
    "is_postgres",
    "migrate",
    "release",
    "system_engine",
]

ANSWER_TIMEOUT_ENV = "AGENTFSM_DATABASE_ANSWER_TIMEOUT"
"""Seconds the database has to answer a statement before its connection is closed."""
DEFAULT_ANSWER_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10
"""Seconds each connection attempt may take."""
IDLE_IN_TRANSACTION_MS = 60_000
_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}
_POSTGRES = ("postgresql", "postgres", "cockroachdb")


def is_postgres(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL database (any driver suffix)."""
    return url.partition("://")[0].split("+")[0] in _POSTGRES


def answer_timeout() -> float:
    """``$AGENTFSM_DATABASE_ANSWER_TIMEOUT`` when it is a positive number, else 30."""
    try:
        value = float(os.environ.get(ANSWER_TIMEOUT_ENV, ""))
    except ValueError:
        return DEFAULT_ANSWER_TIMEOUT
    return value if math.isfinite(value) and value > 0 else DEFAULT_ANSWER_TIMEOUT


class BoundedConnection(psycopg.Connection[Any]):
    """A psycopg connection whose waits for a reply end after :attr:`answer_timeout`
    seconds, and which is closed when a wait fails without an answer from the server while
    libpq counts the statement as in flight: either way the wait fails as a lost
    connection, the pool drops the connection and DBOS retries the operation on a new one."""

    answer_timeout: float | None = None
    _listening = False

    def wait(self, gen: PQGen[Any], interval: float = 0.1, timeout: float | None = None) -> Any:
        """psycopg's wait, bounded by :attr:`answer_timeout` unless the caller gave a
        timeout of its own or the connection is waiting for notifications; the connection
        is closed when the wait runs out or its socket fails mid-statement."""
        limit = self.answer_timeout
        bounded = timeout is None and limit is not None and not self._listening
        try:
            return super().wait(gen, interval, limit if bounded else timeout)
        except _WaitTimeout:
            if not bounded:
                raise
            # The reply may still come: the connection is unusable.
            self.pgconn.finish()
            raise psycopg.OperationalError(
                f"the database did not answer within {limit:g} s "
                f"(${ANSWER_TIMEOUT_ENV}); connection closed"
            ) from None
        except psycopg.OperationalError as error:
            in_flight = self.pgconn.transaction_status == TransactionStatus.ACTIVE
            if error.sqlstate is None and in_flight:
                # Not the server's answer but the socket's failure, which psycopg raises
                # ("connection socket closed") when the kernel reports a reset before libpq
                # has read it. libpq still counts the statement as running, so the
                # connection looks alive: the error would not read as a lost connection,
                # and the next statement on it would fail ("another command is already in
                # progress", or a programming error in the pool's ping), none of which
                # DBOS retries.
                self.pgconn.finish()
            raise

    def notifies(
        self, *, timeout: float | None = None, stop_after: int | None = None
    ) -> Generator[psycopg.Notify]:
        """psycopg's notifies; its wait is not bounded (silence is normal there)."""
        self._listening = True
        try:
            yield from super().notifies(timeout=timeout, stop_after=stop_after)
        finally:
            self._listening = False


class _Connector:
    """The engine's ``do_connect``: a :class:`BoundedConnection`, the attempts retried
    every second for ``hold`` seconds (until :meth:`release`)."""

    def __init__(self, hold: float, answer: float) -> None:
        self.hold = hold
        self.answer = answer
        self.released = threading.Event()

    def __call__(
        self, dialect: Any, record: Any, cargs: list[Any], cparams: dict[str, Any]
    ) -> BoundedConnection:
        deadline = time.monotonic() + self.hold
        while True:
            try:
                connection = BoundedConnection.connect(*cargs, **cparams)
            except psycopg.OperationalError:
                if time.monotonic() >= deadline or self.released.wait(1.0):
                    raise
                continue
            connection.answer_timeout = self.answer
            return connection

    def release(self) -> None:
        """Stop retrying: the attempts under way fail at their next error."""
        self.released.set()


_connectors: weakref.WeakKeyDictionary[sa.Engine, _Connector] = weakref.WeakKeyDictionary()


def system_engine(
    url: str,
    *,
    pool_size: int,
    application_name: str,
    hold: float = 0.0,
) -> sa.Engine:
    """A SQLAlchemy engine on the PostgreSQL database ``url`` with the bounds above
    (parameters of the URL's own query string win over these defaults). ``hold``:
    seconds a failed connection attempt is retried (every second) before it fails.
    :func:`release` ends those retries, for a process that is stopping."""
    parsed = make_url(url).set(drivername="postgresql+psycopg")
    given = dict(parsed.query)
    connect_args: dict[str, Any] = {
        "application_name": application_name,
        "connect_timeout": CONNECT_TIMEOUT,
        **_KEEPALIVES,
    }
    connect_args = {name: value for name, value in connect_args.items() if name not in given}
    idle = f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
    options = given.get("options")
    if not isinstance(options, str) or "idle_in_transaction_session_timeout" not in options:
        connect_args["options"] = f"{options} {idle}" if isinstance(options, str) else idle
    engine = sa.create_engine(
        parsed,
        pool_size=pool_size,
        max_overflow=0,
        pool_timeout=30,
        pool_pre_ping=True,
        connect_args=connect_args,
    )
    connector = _Connector(hold, answer_timeout())
    sa.event.listen(engine, "do_connect", connector)
    _connectors[engine] = connector
    return engine


def release(engine: sa.Engine) -> None:
    """End the connection retries of ``engine`` (made by :func:`system_engine`)."""
    connector = _connectors.get(engine)
    if connector is not None:
        connector.release()


def _exists(engine: sa.Engine) -> bool:
    """Whether the database of ``engine`` exists (any other failure is raised)."""
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    except sa.exc.OperationalError as error:
        if "does not exist" in str(error.orig):
            return False
        raise
    return True


def migrate(url: str) -> None:
    """Create the system database when it does not exist, then bring DBOS's schema up to
    date, on engines of :func:`system_engine` (``DBOS.migrate`` uses an engine of its own
    that waits on a silent server for as long as the operating system lets it)."""
    from dbos._serialization import DefaultSerializer
    from dbos._sys_db import SystemDatabase
    from dbos._utils import quote_identifier

    parsed = make_url(url)
    # Two: DBOS holds its migration lock on one connection while it migrates on another.
    engine = system_engine(url, pool_size=2, application_name="agentfsm-migrate")
    try:
        if not _exists(engine):
            admin = system_engine(
                parsed.set(database="postgres").render_as_string(hide_password=False),
                pool_size=1,
                application_name="agentfsm-migrate",
            )
            try:
                with admin.connect() as connection:
                    connection = connection.execution_options(isolation_level="AUTOCOMMIT")
                    found = connection.execute(
                        sa.text("SELECT 1 FROM pg_database WHERE datname = :name"),
                        {"name": parsed.database},
                    ).scalar()
                    if not found:
                        name = quote_identifier(str(parsed.database))
                        connection.execute(sa.text(f"CREATE DATABASE {name}"))
            finally:
                admin.dispose()
        system = SystemDatabase.create(
            system_database_url=url,
            engine_kwargs={},
            engine=engine,
            schema="dbos",
            serializer=DefaultSerializer(),
            executor_id=None,
        )
        try:
            system.run_migrations()
        finally:
            system.destroy()
    finally:
        engine.dispose()
