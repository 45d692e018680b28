"""The user's toolchains, read-only inside the sandbox; never a home.

The sandbox shows the system and the workspace; a Python from pyenv, a Node from nvm, cargo
from rustup live in the home folder, which the sandbox does not show. :func:`toolchain_view`
finds, without settings, exactly the folders those programs need to run:

- every ``PATH`` entry and its real path (a folder named ``bin`` brings its install prefix,
  the folder above it when that has ``lib`` or ``libexec``, so ``python`` finds
  ``lib/python3.X``; else the ``bin`` folder alone); a ``shims`` folder brings the tool's
  root (pyenv, rbenv, asdf shims run the tool, which reads its ``versions``);
- what the commands in those folders resolve to: the targets of their symlinks (pipx, uv,
  ``update-alternatives``) and the absolute ``#!`` interpreters of their scripts. Outside
  a home, the folder that holds one (or its install prefix); in a home, the install prefix
  of the ``bin`` folder that holds it when there is one (``~/.pyenv/versions/3.12``),
  else the one file and nothing beside it;
- the base interpreter of every Python virtual environment found in the workspace (``.venv``,
  ``venv``, any ``pyvenv.cfg`` at most two folders deep), on ``PATH`` or in ``VIRTUAL_ENV``:
  the install prefix named by its ``home =`` key, accepted only when it holds a Python
  standard library (``lib/python3.*/os.py``), so a ``pyvenv.cfg`` the model writes can show
  no other folder;
- cargo's ``bin``, ``registry`` and ``git`` and rustup's ``toolchains`` and
  ``settings.toml`` when cargo's ``bin`` is on ``PATH``; asdf's data folder and
  ``~/.tool-versions`` when its shims are; the Pythons uv installs
  (``~/.local/share/uv/python``); ``GOROOT`` when set.

A folder is never shown when it is ``/``, a home folder, an XDG base folder (``~/.config``,
``~/.local``, ``~/.local/share``, ``~/.local/state``, ``~/.cache``), the workspace, a write
path or a folder above one of them, or when it is, contains or lies in one of the home's
secret folders; no secret file is shown. Folders are compared by where they really are
(:mod:`~agentfsm.sandbox._places`), so a bind mount of the home is the home. A
``pyvenv.cfg`` or a script is read only when it is a regular file, without blocking. The
hidden list of :mod:`~agentfsm.sandbox._hidden` is the second layer: the sandbox hides each
secret that lies beneath anything it shows.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from attrs import frozen

from ._hidden import home_hidden, homes, xdg_folders
from ._places import Place, Places, within

__all__ = ["TOOLCHAIN_ENV", "ToolchainView", "toolchain_view", "venv_signature"]

TOOLCHAIN_ENV = (
    "PYENV_ROOT",
    "PYENV_VERSION",
    "ASDF_DIR",
    "ASDF_DATA_DIR",
    "NVM_DIR",
    "NVM_BIN",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOROOT",
    "VIRTUAL_ENV",
    "UV_PYTHON_INSTALL_DIR",
)
"""Variables naming where a toolchain lives (never a secret): sandboxed commands get them
when this process has them."""
FOLDER_ENTRIES_LIMIT = 4096
"""At most this many entries of each ``PATH`` folder are looked at."""
SCRIPT_HEAD = 256
"""Bytes read from a script on ``PATH`` to find its ``#!`` interpreter."""
SYMLINK_HOPS = 40
"""More symlinks than this on one path: it is not resolved (a loop)."""
CARGO_PARTS = ("bin", "registry", "git")
"""What cargo needs of ``CARGO_HOME`` (not its credentials, nor a ``config.toml`` that may
hold a registry token)."""
RUSTUP_PARTS = ("toolchains", "settings.toml")
"""What rustup's proxies need of ``RUSTUP_HOME``."""
_STDLIB = re.compile(r"python3\.\d+")


@frozen
class ToolchainView:
    """What the sandbox shows of the user's toolchains."""

    read: tuple[Path, ...]
    """Folders (and files, like ``~/.tool-versions``) mounted read-only."""
    env: tuple[tuple[str, str], ...]
    """Variables the commands get, as (name, value)."""


class _Finder:
    """Collects the folders one view shows.

    Every path is resolved by :meth:`resolve`, which refuses a symlink lying in a writable
    folder (the model may have made it), and ``PATH`` folders that are writable are not
    looked into: nothing the model writes chooses what is shown, but a ``pyvenv.cfg``,
    whose interpreter must then hold a standard library.
    """

    def __init__(
        self,
        writable: tuple[Path, ...],
        visible: tuple[Path, ...],
        environ: Mapping[str, str],
    ) -> None:
        self.writable = writable
        self.visible = visible
        self.environ = environ
        self.homes = homes(environ)
        # Compared by place (every name of a folder, existing or not: a bind mount of the
        # home is the home), never by the path as written.
        self.places = Places()
        place = self.places.place
        self.home_places = [place(h) for h in self.homes]
        hidden = home_hidden(environ)
        self.secret_dirs = [place(p) for p, folder in hidden if folder]
        self.secret_files = {place(p) for p, folder in hidden if not folder}
        self.held = [*self.home_places, *map(place, (*xdg_folders(environ), *writable))]
        self.writable_places = [place(w) for w in writable]
        self.prefixes = tuple(str(f) for f in (*visible, *writable))
        self.found: dict[Path, None] = {}
        self.prefixed: set[Path] = set()
        self.env: dict[str, str] = {}

    def resolve(self, path: str | Path) -> Path | None:
        """``path`` (absolute) with every symlink resolved; ``None`` when a symlink on the
        way lies in a writable folder, loops or cannot be read, or a folder on the way is
        one this user may not enter."""
        pending = list(Path(os.path.normpath(path)).parts[1:])
        current, hops = Path("/"), 0
        while pending:
            part = pending.pop(0)
            if part == "..":
                current = current.parent
                continue
            step = current / part
            try:
                link = step.is_symlink()
            except OSError:  # a folder on the way this user may not enter
                return None
            if not link:
                current = step
                continue
            hops += 1
            if hops > SYMLINK_HOPS or self.writable_path(step):
                return None
            try:
                target = os.readlink(step)
            except OSError:
                return None
            if os.path.isabs(target):
                current = Path("/")
            pending = [p for p in Path(target).parts if p not in ("/", ".")] + pending
        return current

    def writable_path(self, path: Path) -> bool:
        """Whether ``path`` (a symlink not followed) lies in a writable folder, by any name."""
        return _inside(self.places.place(path, follow=False), self.writable_places)

    def refused(self, path: Path) -> bool:
        """``/``, a home, an XDG base folder, the workspace or a write path or a folder
        holding one of them, a secret folder, inside one or holding one, or a secret file:
        through any name of ``path`` or a mount below it."""
        if path.parent == path or self.places.place(path) in self.secret_files:
            return True
        if self.places.holds(path, [*self.held, *self.secret_dirs]):
            return True
        return any(self.places.inside(path, secret) for secret in self.secret_dirs)

    def in_home(self, path: Path) -> bool:
        return _inside(self.places.place(path), self.home_places)

    def shown(self, path: Path) -> bool:
        return any(path.is_relative_to(folder) for folder in (*self.visible, *self.writable))

    def shown_text(self, path: str) -> bool:
        """:meth:`shown` on a resolved path as text (fast, for many folder entries)."""
        return any(path == f or path.startswith(f.rstrip("/") + "/") for f in self.prefixes)

    def add(self, path: Path) -> Path | None:
        """Show ``path`` (resolved) unless refused; where it really is when it is (or
        already was) shown."""
        real = self.resolve(path)
        if real is None or not real.exists() or self.refused(real):
            return None
        if not self.shown(real):
            self.found[real] = None
        return real

    def add_prefix(self, folder: Path) -> None:
        """Show ``folder``; for a ``bin`` folder its install prefix instead, when allowed;
        and a virtual environment's base interpreter."""
        real = self.resolve(folder)
        if real is None or real in self.prefixed:
            return
        self.prefixed.add(real)
        prefix = real.parent if real.name == "bin" and _install_prefix(real.parent) else real
        shown = prefix != real and self.add(prefix) is not None
        if not shown and self.add(real) is None:
            return
        if not self.writable_path(prefix):
            self.add_venv_base(prefix / "pyvenv.cfg")

    def add_command(self, command: Path) -> None:
        """Show what a command of ``PATH`` resolves to (``command``, resolved): outside a
        home, its folder (:meth:`add_prefix`); in a home, the install prefix of the ``bin``
        folder holding it, else the file alone (never the folder around it)."""
        folder = command.parent
        if not self.in_home(command):
            self.add_prefix(folder)
        elif (
            folder.name == "bin"
            and _install_prefix(folder.parent)
            and self.add(folder.parent) is not None
        ):
            if not self.writable_path(folder):
                self.add_venv_base(folder.parent / "pyvenv.cfg")
        elif command.is_file():
            self.add(command)

    def add_venv_base(self, config: Path) -> None:
        """Show the install prefix of the interpreter a ``pyvenv.cfg`` names (``home``,
        ``executable``), when it holds a Python standard library."""
        text = _head(config, SCRIPT_HEAD * 16).decode("utf-8", "replace")
        for line in text.splitlines():
            key, _, value = line.partition("=")
            key, value = key.strip().lower(), value.strip()
            if key not in ("home", "executable") or not os.path.isabs(value):
                continue
            real = self.resolve(value)
            if real is None:
                continue
            folder = real if key == "home" else real.parent
            for interpreter in (folder, *self._interpreters(folder)):
                prefix = interpreter.parent if interpreter.name == "bin" else interpreter
                if _python_prefix(prefix):
                    self.add(prefix)

    def _interpreters(self, folder: Path) -> list[Path]:
        """Where the ``python3``/``python`` commands of ``folder`` really live."""
        found = []
        for name in ("python3", "python"):
            command = self.resolve(folder / name)
            if command is not None:
                found.append(command.parent)
        return found

    def scan(self, folder: Path) -> None:
        """Show what the commands in a ``PATH`` folder (not a writable one) resolve to: the
        targets of symlinks and, outside the system, the interpreters of ``#!`` lines."""
        if self.writable_path(folder):
            return
        try:
            entries = list(os.scandir(folder))[:FOLDER_ENTRIES_LIMIT]
        except OSError:
            return
        # Shims are scripts that run their tool (its root is shown): no #! to follow.
        scripts = not self.shown(folder) and folder.name != "shims"
        for entry in entries:
            try:
                if entry.is_symlink():
                    if self.shown_text(_link_target(entry.path)):
                        continue  # the common case, decided without resolving by hand
                    target = self.resolve(entry.path)
                    if target is not None and not self.shown(target) and target.exists():
                        self.add_command(target)
                elif scripts and entry.is_file():
                    interpreter = _shebang(entry.path)
                    real = None if interpreter is None else self.resolve(interpreter)
                    if real is not None and real.name != "env" and not self.shown(real):
                        self.add_command(real)
            except OSError:
                continue

    def path_entries(self) -> list[Path]:
        entries = []
        for entry in self.environ.get("PATH", "").split(os.pathsep):
            if os.path.isabs(entry):
                entries.append(Path(os.path.normpath(entry)))
        return list(dict.fromkeys(entries))

    def tool_home(self, variable: str, default: str) -> Path | None:
        value = self.environ.get(variable, "")
        if os.path.isabs(value):
            return Path(os.path.normpath(value))
        return self.homes[0] / default if self.homes else None

    def tools(self, path: list[Path]) -> None:
        """rustup and cargo, asdf, uv's Pythons, ``GOROOT``."""
        on_path = set(path) | {real for p in path if (real := self.resolve(p)) is not None}
        cargo = self.tool_home("CARGO_HOME", ".cargo")
        if cargo is not None and cargo / "bin" in on_path:
            rustup = self.tool_home("RUSTUP_HOME", ".rustup")
            for name, folder, parts in (
                ("CARGO_HOME", cargo, CARGO_PARTS),
                ("RUSTUP_HOME", rustup, RUSTUP_PARTS),
            ):
                real = None if folder is None else self.resolve(folder)
                if real is not None and real.is_dir() and not self.refused(real):
                    self.env[name] = str(real)
                    for part in parts:
                        self.add(real / part)
        asdf = self.tool_home("ASDF_DATA_DIR", ".asdf")
        asdf_real = self.add(asdf) if asdf is not None and asdf / "shims" in on_path else None
        if asdf_real is not None:
            self.env["ASDF_DATA_DIR"] = str(asdf_real)
            for home in self.homes:
                versions = self.resolve(home / ".tool-versions")
                if versions is not None and versions.is_file() and not self.refused(versions):
                    self.found[versions] = None
        data = self.environ.get("XDG_DATA_HOME", "")
        uv = self.environ.get("UV_PYTHON_INSTALL_DIR", "")
        if os.path.isabs(uv):
            self.add(Path(uv))
        elif os.path.isabs(data):
            self.add(Path(data) / "uv" / "python")
        elif self.homes:
            self.add(self.homes[0] / ".local/share/uv/python")
        goroot = self.environ.get("GOROOT", "")
        if os.path.isabs(goroot):
            self.add(Path(goroot))

    def venvs(self) -> None:
        """The base interpreters of the workspace's virtual environments."""
        root = self.writable[0]
        configs = [root / ".venv" / "pyvenv.cfg", root / "venv" / "pyvenv.cfg"]
        configs += _configs_below(root, depth=2)
        virtual_env = self.environ.get("VIRTUAL_ENV", "")
        if os.path.isabs(virtual_env):
            self.add(Path(virtual_env))
            configs.append(Path(virtual_env) / "pyvenv.cfg")
        for config in dict.fromkeys(configs):
            self.add_venv_base(config)


def venv_signature(root: Path, environ: Mapping[str, str]) -> tuple[int, ...]:
    """What the virtual environments a view finds in ``root`` depend on, read cheaply: the
    change times of ``root``, of each folder in it and of its ``pyvenv.cfg``, and of
    ``VIRTUAL_ENV``'s. A venv made, removed, moved or re-pointed there changes it (one made
    in a folder two levels down changes that folder's parent)."""
    paths = [root]
    with contextlib.suppress(OSError):
        for entry in list(os.scandir(root))[:FOLDER_ENTRIES_LIMIT]:
            if entry.is_dir(follow_symlinks=False):
                paths += [Path(entry.path), Path(entry.path) / "pyvenv.cfg"]
    virtual_env = environ.get("VIRTUAL_ENV", "")
    if os.path.isabs(virtual_env):
        paths.append(Path(virtual_env) / "pyvenv.cfg")
    signature = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            signature.append(0)
        else:
            signature += [info.st_ino, info.st_mtime_ns]
    return tuple(signature)


def _inside(place: Place, folders: Iterable[Place]) -> bool:
    return any(within(place, folder) is not None for folder in folders)


def _head(path: str | Path, size: int) -> bytes:
    """The first ``size`` bytes of ``path`` when it is a regular file (opened without
    blocking: a FIFO the model made there neither hangs nor is read); else nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.read(fd, size) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def _configs_below(root: Path, depth: int) -> list[Path]:
    """The ``pyvenv.cfg`` files in the folders at most ``depth`` levels below ``root``."""
    found: list[Path] = []
    level = [root]
    for _ in range(depth):
        below: list[Path] = []
        for folder in level:
            try:
                entries = list(os.scandir(folder))[:FOLDER_ENTRIES_LIMIT]
            except OSError:
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    below.append(Path(entry.path))
                    if os.path.isfile(os.path.join(entry.path, "pyvenv.cfg")):
                        found.append(Path(entry.path) / "pyvenv.cfg")
        level = below
    return found


def _link_target(path: str) -> str:
    """Where a symlink leads, following the links it names but not the symlinked folders on
    the way (:func:`os.path.realpath` is exact and much slower): a first look only."""
    for _ in range(SYMLINK_HOPS):
        try:
            target = os.readlink(path)
        except OSError:
            break
        path = os.path.normpath(os.path.join(os.path.dirname(path), target))
    return path


def _install_prefix(folder: Path) -> bool:
    """Whether the folder above a ``bin`` looks like an install prefix (it has ``lib`` or
    ``libexec``), not a folder that merely holds one (``~/src/bin`` beside projects)."""
    return (folder / "lib").is_dir() or (folder / "libexec").is_dir()


def _python_prefix(prefix: Path) -> bool:
    """Whether ``prefix`` is a Python install: it holds ``lib/python3.X/os.py``."""
    try:
        names = os.listdir(prefix / "lib")
    except OSError:
        return False
    return any(_STDLIB.fullmatch(n) and (prefix / "lib" / n / "os.py").is_file() for n in names)


def _shebang(path: str) -> Path | None:
    """The absolute interpreter a script's ``#!`` line names."""
    head = _head(path, SCRIPT_HEAD)
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].split()
    if not words or not words[0].startswith(b"/"):
        return None
    return Path(os.fsdecode(words[0]))


def toolchain_view(
    root: Path,
    visible: Iterable[str | Path],
    environ: Mapping[str, str] | None = None,
    writable: Iterable[str | Path] = (),
) -> ToolchainView:
    """What to show of the user's toolchains (see the module's docstring) for commands run
    in ``root``, where ``visible`` folders are shown already and ``root`` and ``writable``
    ones are writable; read from ``environ`` (default: this process's)."""
    source = os.environ if environ is None else environ
    folders = (Path(root), *(Path(w) for w in writable))
    finder = _Finder(folders, tuple(Path(v) for v in visible), source)
    path = finder.path_entries()
    scanned: set[Path] = set()
    for entry in path:
        real = finder.resolve(entry)
        if real is None:
            continue
        if real.name == "shims" and not finder.shown(real):
            finder.add(real.parent)
        for folder in dict.fromkeys((entry, real)):
            if not finder.shown(folder):
                finder.add_prefix(folder)
        if real not in scanned:
            scanned.add(real)
            finder.scan(real)
    finder.tools(path)
    finder.venvs()
    read = sorted(finder.found)
    kept = [p for p in read if not any(p != o and p.is_relative_to(o) for o in read)]
    env = {name: source[name] for name in TOOLCHAIN_ENV if source.get(name)}
    env.update(finder.env)
    return ToolchainView(tuple(kept), tuple(sorted(env.items())))
