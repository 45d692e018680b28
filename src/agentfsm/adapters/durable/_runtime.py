"""The DBOS lifecycle of a process: one system database, launched once, destroyed at the end.

DBOS is a process-wide singleton with a global registry of workflow functions. The
workflow of a durable run is registered when :mod:`agentfsm.adapters.durable` is imported;
:class:`DurableRuntime` configures DBOS, launches it (which also re-enqueues the unfinished
runs of this executor) and destroys it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import TracebackType

from dbos import DBOS, DBOSConfig

from agentfsm.adapters.sessions import state_home

__all__ = ["DurableRuntime", "default_database_url"]

DEFAULT_APP_NAME = "agentfsm"


def default_database_url() -> str:
    """``sqlite:///<state folder>/agentfsm/durable.sqlite`` (``$XDG_STATE_HOME``, else
    ``~/.local/state``): the embedded system database of ``agentfsm run --durable``."""
    return f"sqlite:///{state_home() / 'agentfsm' / 'durable.sqlite'}"


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

    Only one runtime can be launched per process at a time (DBOS is a singleton).
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
    ) -> None:
        self.database_url = database_url or default_database_url()
        self.name = name
        self.executor_id = executor_id
        self.polling_interval = polling_interval
        self.application_version = application_version
        self.log_level = log_level
        self.launched = False

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
        return config

    def launch(self) -> DurableRuntime:
        """Configure and launch DBOS (creating a SQLite database's folder first)."""
        if self.launched:
            return self
        if self.database_url.startswith("sqlite:///"):
            Path(self.database_url.removeprefix("sqlite:///")).parent.mkdir(
                parents=True, exist_ok=True
            )
        DBOS(config=self.config())
        try:
            DBOS.launch()
        except BaseException:
            DBOS.destroy()
            raise
        self.launched = True
        return self

    def destroy(self) -> None:
        """Shut DBOS down; the registered workflow stays registered for a later launch.
        Runs still in flight in this process stay unfinished (``PENDING``) and resumable."""
        if not self.launched:
            return
        self.launched = False
        DBOS.destroy()
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
