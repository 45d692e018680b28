"""What neither a sandboxed command nor a path tool ever sees: one list for both.

- The home's secrets: :data:`HOME_SECRET_DIRS` and :data:`HOME_SECRET_FILES` (keys,
  credentials, shell histories, the agent's own configuration and state) under every home
  of this process (``HOME`` and the password database, as written and resolved) and under
  the XDG folders (``$XDG_CONFIG_HOME/agentfsm``…), and the file ``HISTFILE`` names.
- The machine's: the entries of ``/etc`` others may not read and :data:`SYSTEM_SECRETS`.

A hidden entry has many names (symlinks, bind mounts, the folders above it renamed) and
may not exist yet, so a list of paths checked by name loses wherever the model can write:
it renames the folder above a secret, or creates the agent's own settings folder before the
next run reads it. So the model never writes where anything hidden is:
:func:`check_workspace` (and the sandbox, for its write paths) refuses a folder that is
``/``, a home or holds one, or that holds or lies in a hidden entry, compared by where
things really are (:mod:`~agentfsm.sandbox._places`: the same for every name, existing or
not). What is shown read-only may hold secrets (a toolchain folder, a read path): the
sandbox hides each one that exists there after every other mount (:func:`hidden_in`,
:func:`hidden_system`) and looks again when one appears. The path tools refuse every path
leading into one by name, existing or not (:func:`hidden_beneath`), and by identity
(:func:`hidden_identities`). No closed list of names wins alone: the sandbox shows no home
(only toolchain folders in it, :mod:`~agentfsm.sandbox._toolchains`); the list is the
second layer.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import pwd
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from ._places import Place, Places

__all__ = [
    "HOME_SECRET_DIRS",
    "HOME_SECRET_FILES",
    "SYSTEM_SECRETS",
    "check_workspace",
    "hidden_beneath",
    "hidden_identities",
    "hidden_in",
    "hidden_system",
    "home_hidden",
    "homes",
    "reach",
    "readable_without_capabilities",
    "xdg_folders",
]

HOME_SECRET_DIRS = (
    ".ssh",
    ".aws",
    ".azure",
    ".oci",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".config/github-copilot",
    ".config/rclone",
    ".config/doctl",
    ".config/op",
    ".terraform.d",
    ".docker",
    ".kube",
    ".gnupg",
    ".password-store",
    ".local/share/keyrings",
    ".zsh_sessions",
    ".bash_sessions",
    ".config/agentfsm",
    ".local/state/agentfsm",
)
"""Folders of a home that no sandboxed command and no path tool sees (the agent's own
configuration and state among them)."""
HOME_SECRET_FILES = (
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".pgpass",
    ".pypirc",
    ".pip/pip.conf",
    ".config/pip/pip.conf",
    ".npmrc",
    ".yarnrc.yml",
    ".vault-token",
    ".s3cfg",
    ".boto",
    ".terraformrc",
    ".gem/credentials",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/containers/auth.json",
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".histfile",
    ".sh_history",
    ".ksh_history",
    ".ash_history",
    ".mksh_history",
    ".history",
    ".local/share/fish/fish_history",
    ".config/fish/fish_history",
    ".config/nushell/history.txt",
    ".config/nushell/history.sqlite3",
    ".python_history",
    ".node_repl_history",
    ".irb_history",
    ".pry_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".rediscli_history",
    ".dbshell",
    ".lesshst",
    ".viminfo",
)
"""Files of a home that no sandboxed command and no path tool sees: credentials, shell and
interpreter histories."""
SYSTEM_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh/ssh_host_*_key",
    "/etc/ssl/private",
)
"""Hidden inside ``/etc`` whatever their mode: a sandbox started by root owns root's files."""
ETC_WALK_LIMIT = 50_000
"""At most this many entries of ``/etc`` are looked at for root-only ones (once per process)."""
_XDG = {
    ".config": "XDG_CONFIG_HOME",
    ".local/share": "XDG_DATA_HOME",
    ".local/state": "XDG_STATE_HOME",
    ".cache": "XDG_CACHE_HOME",
}


def homes(environ: Mapping[str, str]) -> tuple[Path, ...]:
    """The home folders of this process: ``HOME`` and the user's entry in the password
    database, as written and resolved."""
    found: dict[Path, None] = {}
    candidates = [environ.get("HOME", "")]
    with contextlib.suppress(KeyError):
        candidates.append(pwd.getpwuid(os.getuid()).pw_dir)
    for home in candidates:
        if home and os.path.isabs(home):
            found[Path(os.path.normpath(home))] = None
            found[Path(os.path.realpath(home))] = None
    return tuple(found)


def xdg_folders(environ: Mapping[str, str]) -> tuple[Path, ...]:
    """The XDG base folders (configuration, data, state, cache) of every home and of the
    ``XDG_*_HOME`` variables, and ``~/.local``: folders of many programs, never a
    toolchain's."""
    found = [home / name for home in homes(environ) for name in (*_XDG, ".local")]
    found += [
        Path(os.path.normpath(v)) for n in _XDG.values() if os.path.isabs(v := environ.get(n, ""))
    ]
    return tuple(dict.fromkeys(found))


def secret_paths(environ: Mapping[str, str], names: Iterable[str]) -> list[Path]:
    """``names`` (relative to a home) under every home and, for those in an XDG folder,
    under its ``XDG_*_HOME``, as written."""
    names = tuple(names)
    paths = [home / name for home in homes(environ) for name in names]
    for folder, variable in _XDG.items():
        base = environ.get(variable, "")
        if os.path.isabs(base):
            paths += [
                Path(os.path.normpath(base)) / n.removeprefix(folder + "/")
                for n in names
                if n.startswith(folder + "/")
            ]
    return paths


def home_hidden(environ: Mapping[str, str]) -> tuple[tuple[Path, bool], ...]:
    """Where the home's secrets are or would be, as written, existing or not: (path, listed
    as a folder); the file ``HISTFILE`` names among them."""
    found = dict.fromkeys(secret_paths(environ, HOME_SECRET_DIRS), True)
    found.update(dict.fromkeys(secret_paths(environ, HOME_SECRET_FILES), False))
    history = environ.get("HISTFILE", "")
    if os.path.isabs(history):
        found.setdefault(Path(os.path.normpath(history)), False)
    return tuple(found.items())


def hidden_in(
    folders: Iterable[str | Path],
    environ: Mapping[str, str],
    places: Places | None = None,
) -> list[Path]:
    """The home's secrets, existing or not, beneath ``folders``: the paths they have there,
    through each folder or a mount below it (other names of a secret folder too), but not
    a folder that is named itself (a read path naming a secret shows it), nor what lies in
    another of them."""
    places = Places() if places is None else places
    hidden = [(places.place(path), folder) for path, folder in home_hidden(environ)]
    found: dict[Path, None] = {}
    for given in folders:
        top = Path(given)
        for path in places.holds(top, [place for place, _ in hidden]):
            found[path] = None
        for place, folder in hidden:
            found.update(dict.fromkeys(places.inside(top, place) if folder else ()))
        found.pop(top, None)
    return [p for p in found if not any(p != o and p.is_relative_to(o) for o in found)]


@functools.lru_cache(maxsize=1)
def _etc_hidden() -> tuple[tuple[str, bool], ...]:
    """The entries of ``/etc`` that others may not read (``mode & 0o004 == 0``), files and
    folders (a hidden folder is not looked into), as (path, is a folder); symlinks are
    skipped (their targets are looked at where they are)."""
    found: list[tuple[str, bool]] = []
    folders, seen = ["/etc"], 0
    while folders and seen < ETC_WALK_LIMIT:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                continue
            folder = stat.S_ISDIR(info.st_mode)
            if not info.st_mode & stat.S_IROTH:
                found.append((entry.path, folder))
            elif folder:
                folders.append(entry.path)
    return tuple(sorted(found))


def hidden_system() -> list[tuple[str, bool]]:
    """What is hidden of the machine: the root-only ``/etc`` entries (found once per
    process) and :data:`SYSTEM_SECRETS`, without those beneath another hidden folder, as
    (path, is a folder)."""
    entries = dict(_etc_hidden())
    for pattern in SYSTEM_SECRETS:
        for secret in glob.glob(pattern):
            entries.setdefault(secret, os.path.isdir(secret))
    folders = [Path(p) for p, folder in entries.items() if folder]
    return [
        (path, folder)
        for path, folder in sorted(entries.items())
        if not any(Path(path) != f and Path(path).is_relative_to(f) for f in folders)
    ]


def readable_without_capabilities(path: str) -> bool:
    """Whether this process's user, without capabilities (as in the sandbox, even for
    root), could read ``path`` or enter it, a folder: by its mode bits, or when it has an
    ACL (read as readable)."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        os.getxattr(path, "system.posix_acl_access", follow_symlinks=False)
        return True
    folder = stat.S_ISDIR(info.st_mode)
    if info.st_uid == os.geteuid():
        bits = stat.S_IRUSR | (stat.S_IXUSR if folder else 0)
    elif info.st_gid in {os.getegid(), *os.getgroups()}:
        bits = stat.S_IRGRP | (stat.S_IXGRP if folder else 0)
    else:
        bits = stat.S_IROTH | (stat.S_IXOTH if folder else 0)
    return bool(info.st_mode & bits)


def _below(path: Path, root: Path) -> str | None:
    return path.relative_to(root).as_posix() if path != root and path.is_relative_to(root) else None


def hidden_beneath(root: str | Path, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """What lies hidden beneath ``root`` (resolved), relative to it: every home secret,
    as written and wherever it really is (:func:`hidden_in`), whether it exists or not, and
    the hidden entries of the machine."""
    source = os.environ if environ is None else environ
    base = Path(os.path.realpath(root))
    paths = [*hidden_in([base], source), *(path for path, _ in home_hidden(source))]
    paths += [Path(p) for p, _ in hidden_system()]
    found = (_below(Path(os.path.normpath(p)), base) for p in paths)
    return tuple(dict.fromkeys(p for p in found if p is not None))


def hidden_identities(environ: Mapping[str, str] | None = None) -> frozenset[tuple[int, int]]:
    """The (device, inode) of every hidden entry that exists: a home secret (by any name)
    or a hidden entry of the machine."""
    source = os.environ if environ is None else environ
    found = set()
    paths: list[str | Path] = [p for p, _ in home_hidden(source)]
    for path in [*paths, *(p for p, _ in hidden_system())]:
        with contextlib.suppress(OSError, ValueError):
            info = os.stat(path)
            found.add((info.st_dev, info.st_ino))
    return frozenset(found)


def _spots(places: Places, path: Path) -> list[Place]:
    """Where ``path`` is, and each symlink on its way: whoever may replace one of them
    decides what ``path`` is."""
    spots = [places.place(path)]
    for step in (path, *path.parents[:-1]):
        if step.is_symlink():
            spots.append(places.place(step, follow=False))
    return spots


def reach(path: Path, environ: Mapping[str, str]) -> str | None:
    """Why a folder the agent may change (a workspace, a write path) cannot be ``path``:
    it is or holds a home, or it holds or lies in something hidden (a home secret, the
    agent's own configuration or state, a hidden entry of the machine), by any of its names
    (symlinks, bind mounts, a mount below it) and whether that exists yet or not; ``None``
    when it may be. The model could rename, replace or create anything in it."""
    places = Places()
    mine = places.place(path)
    for home in homes(environ):
        if mine in _spots(places, home):
            return (
                f"your home folder {path}: the agent would reach your keys, credentials and "
                "its own settings"
            )
        if places.holds(path, _spots(places, home)):
            return (
                f"{path}: it holds the home folder {home}, and the agent would reach your "
                "keys, credentials and its own settings"
            )
    hidden = [*home_hidden(environ), *((Path(p), f) for p, f in hidden_system())]
    why = "(secrets, or the agent's own settings and state)"
    for secret, folder in hidden:
        place = places.place(secret)
        inside = places.inside(path, place) if folder else []
        if inside and inside[0] == path:
            return f"{path}: it lies in {secret}, which the agent never reads {why}"
        held = inside + places.holds(path, _spots(places, secret))
        if held:
            return f"{path}: it holds {held[0]}, which the agent never reads or changes {why}"
    return None


def check_workspace(root: str | Path, environ: Mapping[str, str] | None = None) -> Path:
    """``root`` resolved, when it may be a workspace.

    Raises:
        ValueError: (one line, with what to do) ``root`` is ``/``, a home folder or a
            folder holding one, or it holds or lies in a hidden entry (a home secret, the
            agent's own configuration or state, a hidden entry of the machine), by any name
            and whether that exists yet or not (:func:`reach`): the agent's tools would
            reach it, and could rename, replace or create it.
    """
    source = os.environ if environ is None else environ
    path = Path(os.path.realpath(root))
    use = "use a project folder (say ~/src/project) as the workspace"
    if path.parent == path:
        raise ValueError(
            f"the workspace cannot be {path}: the agent would reach the whole machine; {use}"
        )
    why = reach(path, source)
    if why is not None:
        raise ValueError(f"the workspace cannot be {why}; {use}")
    return path
