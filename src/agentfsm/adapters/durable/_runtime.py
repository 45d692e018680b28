"""The DBOS lifecycle of a process: one system database, launched once, destroyed at the end.

DBOS is a process-wide singleton with a global registry of workflow functions. The
workflow of a durable run is registered when :mod:`agentfsm.adapters.durable` is imported;
:class:`DurableRuntime` configures DBOS, launches it (which also re-enqueues the unfinished
runs of this executor) and destroys it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import sqlalchemy as sa
from dbos import DBOS, DBOSConfig

from agentfsm.adapters.sessions import state_home

from ._postgres import is_postgres, migrate, release, system_engine

__all__ = ["DurableRuntime", "dbos_threads", "default_database_url", "prepare_database"]

DEFAULT_APP_NAME = "agentfsm"


def default_database_url() -> str:
    """``sqlite:///<state folder>/agentfsm/durable.sqlite`` (``$XDG_STATE_HOME``, else
    ``~/.local/state``): the embedded system database of ``agentfsm run --durable``."""
    return f"sqlite:///{state_home() / 'agentfsm' / 'durable.sqlite'}"


def prepare_database(url: str) -> None:
    """Create or migrate the system database ``url``: a SQLite file (its folder created
    first), or a PostgreSQL database on engines whose every wait is bounded."""
    if is_postgres(url):
        migrate(url)
        return
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    DBOS.migrate(url)


def dbos_threads() -> list[threading.Thread]:
    """DBOS's executor threads still alive: a shut-down DBOS leaves the ones waiting on the
    database running, and the interpreter waits for them at exit."""
    return [
        thread
        for thread in threading.enumerate()
        if thread.name.startswith("dbos-executor-") and thread.is_alive()
    ]


class DurableRuntime:
    """DBOS for this process: ``with DurableRuntime(): ...`` launches it, then destroys it.

    Args:
        database_url: The DBOS system database: ``sqlite:///PATH`` (the default is
            :func:`default_database_url`) or a ``postgresql://`` URL shared by workers.
        name: The DBOS application name.
        executor_id: This process's executor id; DBOS's launch re-enqueues the unfinished
            workflows of this id (DBOS's default, ``local``, when ``None``).
        polling_interval: Seconds between DBOS's notification polls (short in tests).
        application_version: Pins DBOS's application version (default: DBOS's hash of the
            workflow source). Only runs of the same version are recovered.
        log_level: DBOS's own log level (default ``WARNING``: the run's output is ours).
        queues: The DBOS queues this process takes workflows from (``None``: every queue
            of the application, DBOS's default; ``()``: none, for a process that runs only
            the runs it starts or resumes, and would otherwise take tasks of the task
            queue and cut them off when it ends).
        hold: On PostgreSQL, seconds a failed connection attempt is retried (every second)
            before DBOS sees the error (see :mod:`._postgres`); 0 for a process that
            should rather fail.

    On PostgreSQL the runtime gives DBOS an engine whose every wait is bounded
    (:func:`~._postgres.system_engine`). Only one runtime can be launched per process at
    a time (DBOS is a singleton).
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        name: str = DEFAULT_APP_NAME,
        executor_id: str | None = None,
        polling_interval: float | None = None,
        application_version: str | None = None,
        log_level: str = "WARNING",
        queues: Sequence[str] | None = None,
        hold: float = 0.0,
    ) -> None:
        self.database_url = database_url or default_database_url()
        self.name = name
        self.executor_id = executor_id
        self.polling_interval = polling_interval
        self.application_version = application_version
        self.log_level = log_level
        self.queues = tuple(queues) if queues is not None else None
        self.hold = hold
        self.launched = False
        self._engine: sa.Engine | None = None

    def config(self) -> DBOSConfig:
        """The DBOS configuration this runtime launches with."""
        config: DBOSConfig = {
            "name": self.name,
            "system_database_url": self.database_url,
            "log_level": self.log_level,
        }
        if self.executor_id is not None:
            config["executor_id"] = self.executor_id
        if self.polling_interval is not None:
            config["notification_listener_polling_interval_sec"] = self.polling_interval
        if self.application_version is not None:
            config["application_version"] = self.application_version
        if self._engine is not None:
            config["system_database_engine"] = self._engine
        return config

    def launch(self) -> DurableRuntime:
        """Configure and launch DBOS (creating a SQLite database's folder first)."""
        if self.launched:
            return self
        if self.database_url.startswith("sqlite:///"):
            Path(self.database_url.removeprefix("sqlite:///")).parent.mkdir(
                parents=True, exist_ok=True
            )
        elif is_postgres(self.database_url):
            migrate(self.database_url)  # creates the database: DBOS does not on our engine
            self._engine = system_engine(
                self.database_url, pool_size=20, application_name=self.name, hold=self.hold
            )
        DBOS(config=self.config())
        try:
            if self.queues is not None:
                DBOS.listen_queues(list(self.queues))
            DBOS.launch()
        except BaseException:
            self._shut_down()
            raise
        self.launched = True
        return self

    def stop_taking(self) -> None:
        """Stop taking workflows from the queues (and stop recovering this executor's): the
        runs in flight in this process go on. DBOS's own shutdown begins the same way."""
        if not self.launched:
            return
        from dbos._dbos import _get_dbos_instance

        for event in _get_dbos_instance().background_thread_stop_events:
            event.set()

    def destroy(self) -> None:
        """Shut DBOS down; the registered workflow stays registered for a later launch.
        Runs still in flight in this process stay unfinished (``PENDING``) and resumable."""
        if not self.launched:
            return
        self.launched = False
        self._shut_down()

    def _shut_down(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            release(engine)  # a connection retried now gives up
        DBOS.destroy()
        if engine is not None:
            engine.dispose()  # DBOS leaves an engine it was given open
        # DBOS detaches its handlers at shutdown; keep its logger quiet afterwards too.
        logging.getLogger("dbos").setLevel(self.log_level)

    def __enter__(self) -> DurableRuntime:
        return self.launch()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.destroy()
