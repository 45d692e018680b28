"""What neither a sandboxed command nor a path tool ever sees: one list for both.

- The home's secrets: :data:`HOME_SECRET_DIRS` and :data:`HOME_SECRET_FILES` (keys,
  credentials, shell histories, the agent's own configuration and state) under every home
  of this process (``HOME`` and the password database, as written and resolved) and under
  the XDG folders (``$XDG_CONFIG_HOME/agentfsm``…), and the file ``HISTFILE`` names.
- The machine's: the entries of ``/etc`` others may not read and :data:`SYSTEM_SECRETS`.

The sandbox hides each one that exists beneath what it mounts, after every other mount
(:func:`home_secrets`, :func:`hidden_system`); the path tools refuse every path leading into
one, existing or not (:func:`hidden_beneath`). No closed list of names wins alone: the
sandbox shows no home (only toolchain folders in it, :mod:`~agentfsm.sandbox._toolchains`)
and :func:`check_workspace` refuses a workspace that is ``/``, a home, holds a home or lies
in a hidden folder; the list is the second layer.
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

__all__ = [
    "HOME_SECRET_DIRS",
    "HOME_SECRET_FILES",
    "SYSTEM_SECRETS",
    "check_workspace",
    "hidden_beneath",
    "hidden_system",
    "home_secrets",
    "homes",
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
                Path(base) / n.removeprefix(folder + "/")
                for n in names
                if n.startswith(folder + "/")
            ]
    history = environ.get("HISTFILE", "")
    if os.path.isabs(history):
        paths.append(Path(os.path.normpath(history)))
    return paths


def home_secrets(environ: Mapping[str, str]) -> tuple[tuple[Path, bool], ...]:
    """The home's secrets that exist, where they really are, as (path, is a folder)."""
    found: dict[Path, bool] = {}
    for path in secret_paths(environ, HOME_SECRET_DIRS + HOME_SECRET_FILES):
        if os.path.lexists(path):
            real = Path(os.path.realpath(path))
            if real.exists():
                found[real] = real.is_dir()
    return tuple(sorted(found.items()))


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
    as written and where it really is, whether it exists or not, and the hidden entries of
    the machine."""
    source = os.environ if environ is None else environ
    base = Path(os.path.realpath(root))
    paths = secret_paths(source, HOME_SECRET_DIRS + HOME_SECRET_FILES)
    paths += [Path(os.path.realpath(p)) for p in paths if os.path.lexists(p)]
    paths += [Path(p) for p, _ in hidden_system()]
    found = (_below(Path(os.path.normpath(p)), base) for p in paths)
    return tuple(dict.fromkeys(p for p in found if p is not None))


def _same(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one folder: the same path, or the same folder by another
    path (a bind mount, another spelling on a case-insensitive file system)."""
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_workspace(root: str | Path, environ: Mapping[str, str] | None = None) -> Path:
    """``root`` resolved, when it may be a workspace.

    Raises:
        ValueError: (one line, with what to do) ``root`` is ``/``, a home folder or a
            folder holding one, or it is or lies in a hidden folder (a home secret, the
            agent's own configuration or state): the agent's tools would reach it all.
    """
    source = os.environ if environ is None else environ
    path = Path(os.path.realpath(root))
    use = "use a project folder (say ~/src/project) as the workspace"
    if path.parent == path:
        raise ValueError(
            f"the workspace cannot be {path}: the agent would reach the whole machine; {use}"
        )
    for home in homes(source):
        if _same(home, path):
            raise ValueError(
                f"the workspace cannot be your home folder {path}: the agent would reach "
                f"your keys, credentials and its own settings; {use}"
            )
        if any(_same(above, path) for above in home.parents):
            raise ValueError(
                f"the workspace cannot be {path}: it holds the home folder {home}, and the "
                f"agent would reach your keys, credentials and its own settings; {use}"
            )
    for secret in secret_paths(source, HOME_SECRET_DIRS):
        for where in dict.fromkeys((secret, Path(os.path.realpath(secret)))):
            if path.is_relative_to(where):
                raise ValueError(
                    f"the workspace cannot be {path}: it lies in {where}, which the agent "
                    f"never reads (secrets, or its own settings and state); {use}"
                )
    return path
