"""Bad input to the durable commands is one line and exit code 2, before anything runs:
``--database-url`` on ``batch``, ``worker``, ``runs`` and ``run --durable`` (its form, and
that the database opens or the server answers within ``$AGENTFSM_DATABASE_TIMEOUT``),
``"max_turns": true`` in a task file, an uncreatable session folder, an empty prompt.
Real ``agentfsm`` processes."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentfsm.cli import main
from agentfsm.cli._database_url import check_database_url
from agentfsm.cli._errors import UsageError
from tests.pg_server import PostgresServer, postgres_bin

from .conftest import sandbox_options


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word (a server that hangs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    listener.close()


def bad_urls(folder: Path, silent: int) -> list[str]:
    """Forty URLs no durable command can use, of many kinds."""
    closed = closed_port()
    a_file = folder / "notes.txt"
    a_file.write_text("not a database\n")
    a_folder = folder / "a-folder"
    a_folder.mkdir()
    return [
        "",
        "garbage",
        "://nothing",
        "mysql://user@127.0.0.1/db",
        "http://127.0.0.1/db",
        "file:///tmp/durable.sqlite",
        "redis://localhost:6379/0",
        "SQLITE:///durable.sqlite",
        "sqlite:/durable.sqlite",
        "sqlite://",
        "sqlite://relative.sqlite",
        "sqlite:///:memory:",
        "sqlite:////",
        f"sqlite:///{a_folder}",
        f"sqlite:///{a_file}",
        f"sqlite:///{a_file}/inside.sqlite",
        "sqlite:////proc/agentfsm-durable.sqlite",
        "sqlite:////proc/no-such-folder/durable.sqlite",
        f"sqlite:///{folder}/durable.sqlite?mode=ro",
        "sqlite:///with space.sqlite",
        "sqlite:///control\x01.sqlite",
        "postgresql://",
        "postgresql:///agentfsm",
        "postgresql://user@/agentfsm",
        f"postgresql://user@127.0.0.1:{closed}",
        f"postgresql://user@127.0.0.1:{closed}/agentfsm",
        f"postgres://user@127.0.0.1:{closed}/agentfsm",
        f"postgresql+psycopg://user:secret@127.0.0.1:{closed}/agentfsm",
        f"postgresql://user@localhost:{closed}/agentfsm",
        "postgresql+asyncpg://user@127.0.0.1/agentfsm",
        "postgresql://user@127.0.0.1:99999/agentfsm",
        "postgresql://user@127.0.0.1:0/agentfsm",
        "postgresql://user@127.0.0.1:port/agentfsm",
        "postgresql://user@[::1:5432/agentfsm",
        "postgresql://user@no-such-host.invalid/agentfsm",
        f"postgresql://user@127.0.0.1:{closed}/agentfsm?no_such_option=1",
        f"postgresql://user@127.0.0.1:{closed}/agentfsm?sslmode=sometimes",
        f"postgresql://user@127.0.0.1:{silent}/agentfsm",
        "postgresql://user@10.255.255.1:5432/agentfsm",
        "postgresql://user@255.255.255.255:5432/agentfsm",
    ]


def commands(folder: Path, url: str) -> list[list[str]]:
    """The four durable commands, each given ``url``."""
    workspace = folder / "work"
    provider = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", *sandbox_options()]
    return [
        ["batch", str(folder / "tasks.jsonl"), "--workspace", str(workspace), *provider],
        ["worker"],
        ["runs", "list"],
        ["run", "hello", "--durable", "--workspace", str(workspace), *provider],
        ["runs", "resume", "some-run"],
        ["runs", "retry", "some-run"],
    ]


def _agentfsm(folder: Path, arguments: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "XDG_STATE_HOME": str(folder / "state")}
    env["AGENTFSM_DATABASE_TIMEOUT"] = "1"
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    return subprocess.Popen(
        [sys.executable, "-m", "agentfsm", *arguments],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=folder,
    )


def test_forty_bad_database_urls_are_one_line_and_exit_2(tmp_path: Path, silent_port: int) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "tasks.jsonl").write_text('{"id": "a", "prompt": "task a"}\n')
    urls = bad_urls(tmp_path, silent_port)
    assert len(urls) == 40
    cases = [
        (url, [*commands(tmp_path, url)[n % 6], "--database-url", url])
        for n, url in enumerate(urls)
    ]
    good: list[str] = []
    bad: list[str] = []
    told: list[str] = []
    slowest = 0.0
    for start in range(0, len(cases), 4):  # four processes at a time
        batch = [
            (url, arguments, _agentfsm(tmp_path, arguments), time.monotonic())
            for url, arguments in cases[start : start + 4]
        ]
        for url, arguments, proc, began in batch:
            out, err = proc.communicate(timeout=60)
            slowest = max(slowest, time.monotonic() - began)
            lines = err.decode(errors="replace").splitlines()
            one_line = proc.returncode == 2 and len(lines) == 1 and not out
            one_line = one_line and "--database-url" in lines[0] and "Traceback" not in lines[0]
            (good if one_line else bad).append(f"{arguments[0]} {url!r}: {proc.returncode} {lines}")
            told.extend(lines)
    print(
        f"bad --database-url: {len(good)} of {len(urls)} one line + exit 2; slowest {slowest:.1f} s"
    )
    assert bad == []
    assert slowest < 60  # the wait is 1 s; the rest is starting Python on a busy machine
    assert "secret" not in "\n".join(told)  # a password is never printed
    assert not (tmp_path / "state" / "agentfsm" / "durable.sqlite").exists()


def test_the_sqlite_check_never_removes_a_database_another_process_is_making(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two durable commands starting at once on a new SQLite file: while one checks the
    URL, the other's DBOS creates the database and enqueues its tasks. The check left no
    file behind by removing the path it had opened, the other's database with it: its
    writes then failed (``attempt to write a readonly database``) and its tasks were lost.
    Now the check opens a database of its own and the other's stays, with its tasks."""
    path = tmp_path / "queue.sqlite"
    real_connect = sqlite3.connect

    def connect_while_another_makes_it(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection: sqlite3.Connection = real_connect(*args, **kwargs)
        other = real_connect(path)  # the other command's DBOS, at the same moment
        other.execute("CREATE TABLE IF NOT EXISTS tasks (id TEXT)")
        other.execute("INSERT INTO tasks VALUES ('one-0')")
        other.commit()
        other.close()
        return connection

    monkeypatch.setattr(sqlite3, "connect", connect_while_another_makes_it)
    check_database_url(f"sqlite:///{path}")
    monkeypatch.undo()
    with contextlib.closing(sqlite3.connect(path)) as database:
        assert database.execute("SELECT id FROM tasks").fetchall() == [("one-0",)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["queue.sqlite"]  # nothing else left


def test_the_sqlite_check_of_a_new_database_leaves_no_file(tmp_path: Path) -> None:
    check_database_url(f"sqlite:///{tmp_path / 'new' / 'queue.sqlite'}")
    assert list((tmp_path / "new").iterdir()) == []


def test_the_sqlite_check_of_a_long_name_or_a_symlink_checks_where_dbos_will_write(
    tmp_path: Path,
) -> None:
    """The check's own database has a short name of its own (a 247-character file name
    SQLite can make is accepted), beside where a symlink points (a dangling one into a
    missing folder is refused in one line and left as it was; into a folder, accepted)."""
    check_database_url(f"sqlite:///{tmp_path / ('d' * 240 + '.sqlite')}")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "nowhere").symlink_to(tmp_path / "missing" / "t.sqlite")
    with pytest.raises(
        UsageError, match=r"^--database-url .*: cannot open the SQLite database: No such"
    ):
        check_database_url(f"sqlite:///{tmp_path / 'nowhere'}")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere" / "t.sqlite")
    check_database_url(f"sqlite:///{tmp_path / 'link'}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "link", "nowhere"]
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_good_sqlite_url_in_a_new_folder_is_accepted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new' / 'folder' / 'durable.sqlite'}"
    proc = _agentfsm(tmp_path, ["runs", "list", "--all", "--database-url", url])
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.decode().strip() == "no durable runs"


@pytest.mark.postgres
def test_a_reachable_postgres_is_accepted_and_an_unknown_role_is_one_line() -> None:
    if postgres_bin() is None:
        pytest.fail("PostgreSQL is not installed (make test-postgres needs it)")
    folder = Path(tempfile.mkdtemp(prefix="agentfsm-pg-"))
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, folder, ignore_errors=True)
        server = cleanup.enter_context(PostgresServer(folder))
        missing_db = server.url.rsplit("/", 1)[0] + "/not_created_yet"  # DBOS creates it
        proc = _agentfsm(folder, ["runs", "list", "--all", "--database-url", missing_db])
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.decode().strip() == "no durable runs"
        stranger = server.url.replace("agentfsm@", "nobody@")
        proc = _agentfsm(folder, ["runs", "list", "--database-url", stranger])
        _, err = proc.communicate(timeout=60)
        lines = err.decode().splitlines()
        assert proc.returncode == 2
        assert len(lines) == 1
        assert "nobody" in lines[0]


def test_max_turns_true_in_a_task_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "work").mkdir()
    tasks = tmp_path / "tasks.jsonl"
    for value in ("true", "false", "1.5", '"3"'):
        tasks.write_text(f'{{"id": "a", "prompt": "x", "max_turns": {value}}}\n')
        code = main(
            [
                "batch",
                str(tasks),
                "--workspace",
                str(tmp_path / "work"),
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--model",
                "m",
                "--database-url",
                f"sqlite:///{tmp_path / 'queue.sqlite'}",
                *sandbox_options(),
            ]
        )
        err = capsys.readouterr().err
        assert code == 2, (value, err)
        assert err.count("\n") == 1
        assert "max_turns must be between 1 and" in err


@pytest.mark.parametrize("durable", [False, True], ids=["run", "run --durable"])
def test_an_uncreatable_session_dir_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], durable: bool
) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    extra = ["--durable", "--database-url", f"sqlite:///{tmp_path / 'd.sqlite'}"] if durable else []
    for folder in (a_file / "sessions", Path("/proc/agentfsm-sessions")):
        code = main(
            [
                "run",
                "hello",
                "--workspace",
                str(workspace),
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--model",
                "m",
                "--session-dir",
                str(folder),
                *sandbox_options(),
                *extra,
            ]
        )
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if "--no-sandbox" not in line]
        assert code == 2, err
        assert len(lines) == 1, err
        assert "--session-dir" in lines[0]
        assert "cannot be created or written" in lines[0]


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t"])
def test_an_empty_prompt_is_refused_like_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], prompt: str
) -> None:
    for extra in ([], ["--durable", "--database-url", f"sqlite:///{tmp_path / 'd.sqlite'}"]):
        code = main(
            ["run", prompt, "--workspace", str(tmp_path), "--base-url", "http://x/v1", *extra]
        )
        err = capsys.readouterr().err
        assert code == 2, err
        assert err.count("\n") == 1
        assert "prompt must be a non-empty string" in err


def secret_urls(closed: int) -> dict[str, str]:
    """A database URL, or connection string, with its password in each form: the password
    as typed."""
    where = f"127.0.0.1:{closed}"
    return {
        f"postgresql://user@{where}/agentfsm?password=Pw-query-7Kd": "Pw-query-7Kd",
        f"postgresql://user@{where}/agentfsm?sslmode=disable&password=Pw-amp-3Jx": "Pw-amp-3Jx",
        f"postgresql://user@{where}/agentfsm?%70assword=Pw-pct-key-9Qa": "Pw-pct-key-9Qa",
        f"postgresql://user:Pw%2Dpct%2Dvalue@{where}/agentfsm": "Pw%2Dpct%2Dvalue",
        f"postgresql://user:Pw@at-5Lm@{where}/agentfsm": "Pw@at-5Lm",
        f"host=127.0.0.1 port={closed} password=Pw-libpq-2Zz dbname=x": "Pw-libpq-2Zz",
        "host=127.0.0.1 password = 'Pw libpq quoted' dbname=x": "Pw libpq quoted",
        f"postgresql://user@{where}/agentfsm?PassWord=Pw-case-8Rt": "Pw-case-8Rt",
    }


def test_a_database_password_in_any_form_is_never_printed(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "tasks.jsonl").write_text('{"id": "a", "prompt": "task a"}\n')
    urls = secret_urls(closed_port())
    leaks: list[str] = []
    tried = 0
    for n, (url, password) in enumerate(urls.items()):
        arguments = [*commands(tmp_path, url)[n % 6], "--database-url", url]
        proc = _agentfsm(tmp_path, arguments)
        out, err = proc.communicate(timeout=60)
        tried += 1
        told = (out + err).decode(errors="replace")
        lines = err.decode(errors="replace").splitlines()
        if password in told or proc.returncode != 2 or len(lines) != 1 or "***" not in told:
            leaks.append(f"{arguments[0]} {n}: {proc.returncode} {lines}")
    logs = tmp_path / "state" / "agentfsm" / "logs"
    logged = "".join(p.read_text() for p in logs.iterdir()) if logs.is_dir() else ""
    print(f"database passwords: {tried} forms tried, {len(leaks)} shown")
    assert leaks == []
    assert not any(password in logged for password in urls.values())


def test_a_base_url_with_credentials_is_not_stored(tmp_path: Path) -> None:
    """The options of a durable run are stored in the database: a --base-url holding
    credentials is refused before anything is written there."""
    (tmp_path / "work").mkdir()
    (tmp_path / "tasks.jsonl").write_text('{"id": "a", "prompt": "task a"}\n')
    database = tmp_path / "queue.sqlite"
    for base_url in (
        "http://user:Bu-pass-4Wq@127.0.0.1:9/v1",
        "http://Bu-token-6Pp@127.0.0.1:9/v1",
    ):
        for arguments in commands(tmp_path, "")[0:4:3]:  # batch, run --durable
            arguments = [
                *arguments,
                "--base-url",
                base_url,
                "--database-url",
                f"sqlite:///{database}",
            ]
            proc = _agentfsm(tmp_path, arguments)
            out, err = proc.communicate(timeout=60)
            lines = err.decode().splitlines()
            assert proc.returncode == 2, lines
            assert len(lines) == 1, lines
            assert "--base-url holds credentials" in lines[0], lines
            assert "Bu-" not in (out + err).decode()
    assert not database.exists() or b"Bu-" not in database.read_bytes()


def test_a_signal_during_the_database_check_is_one_line(tmp_path: Path, silent_port: int) -> None:
    """Ctrl-C (SIGINT) or SIGTERM while the URL check waits on a server that never answers:
    one line, exit 130 or 143, no traceback; the same for ``runs retry``."""
    (tmp_path / "work").mkdir()
    (tmp_path / "tasks.jsonl").write_text('{"id": "a", "prompt": "task a"}\n')
    url = f"postgresql://user@127.0.0.1:{silent_port}/agentfsm"
    cases = [
        (commands(tmp_path, url)[0], signal.SIGINT, 130),
        (commands(tmp_path, url)[0], signal.SIGTERM, 143),
        (commands(tmp_path, url)[5], signal.SIGTERM, 143),
        (commands(tmp_path, url)[5], signal.SIGINT, 130),
    ]
    bad: list[str] = []
    for arguments, sig, expected in cases:
        env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
        env["AGENTFSM_DATABASE_TIMEOUT"] = "120"
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentfsm", *arguments, "--database-url", url],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
        )
        time.sleep(3)  # started, and waiting on the silent server
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        lines = [x for x in err.decode().splitlines() if "--no-sandbox" not in x[:40]]
        if proc.returncode != expected or len(lines) != 1 or "Traceback" in err.decode():
            bad.append(f"{arguments[:2]} {sig.name}: {proc.returncode} {lines}")
    print(f"signals during the database check: {len(cases) - len(bad)} of {len(cases)} clean")
    assert bad == []
