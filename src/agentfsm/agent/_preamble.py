"""The session preamble: dynamic facts rendered once per session and reused byte for byte.

Prompt caches match on an exact prefix. Re-rendering a file tree or a clock on every turn
would invalidate the whole conversation, so a preamble provider is asked once per session;
its text becomes the conversation's first user message and is replayed unchanged on every
later turn and run (resume included, since it is stored in the session file).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import re2

from agentfsm.adapters.tools import (
    PathRefused,
    Permissions,
    SafeRoot,
    SettingsError,
    load_settings,
    open_regular,
    open_subdir,
    read_capped,
    segment_regex,
)
from agentfsm.engine import Message, UserMessage
from agentfsm.sandbox import PROTECTED_DIR

__all__ = [
    "PREAMBLE_CLOSE",
    "PREAMBLE_OPEN",
    "PreambleProvider",
    "WorkspacePreamble",
    "is_preamble_message",
    "preamble_message",
]

PREAMBLE_OPEN = "<session-context>"
"""Opens the preamble message (the tag the model sees; kept so stored sessions resume)."""
PREAMBLE_CLOSE = "</session-context>"
"""Closes the preamble message."""

SKIPPED_DIRS = frozenset(
    {
        PROTECTED_DIR,  # the agent's own folder (sessions, settings), in any project
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        "dist",
        "build",
        ".idea",
        ".vscode",
    }
)


class PreambleProvider(Protocol):
    """Renders the session preamble (sync or async)."""

    def render(self) -> str | Awaitable[str]:
        """The preamble text."""
        ...


def preamble_message(text: str) -> UserMessage:
    """The first user message, carrying the frozen preamble."""
    return UserMessage(f"{PREAMBLE_OPEN}\n{text}\n{PREAMBLE_CLOSE}")


def is_preamble_message(message: Message) -> bool:
    """Whether ``message`` is a preamble message."""
    return isinstance(message, UserMessage) and message.content.startswith(PREAMBLE_OPEN)


MAX_HEAD_BYTES = 4096
MAX_PACKED_REFS_BYTES = 1_000_000
_HEX = frozenset("0123456789abcdef")


class _Refused(Exception):
    """A git file that is there but is not read: a symlink, a hard link, a special file,
    a protected path or one the ``read_file`` rules deny."""


def _read_git(
    root: SafeRoot, parts: Sequence[str], limit: int, readable: Callable[[str], bool]
) -> str | None:
    """The file at ``parts`` beneath the root, capped, or ``None`` when it is missing.

    No symlink is followed, not even one inside the root (each component is opened with
    ``O_NOFOLLOW``); the file must be a regular file with one link, not protected and not
    denied to ``read_file``; otherwise :class:`_Refused`.
    """
    rel = "/".join(parts)
    if root.is_protected(parts) or not readable(rel):
        raise _Refused(rel)
    fds: list[int] = []
    try:
        try:
            for name in parts[:-1]:
                fds.append(open_subdir(fds[-1] if fds else root.fd, name))
            fd, _ = open_regular(fds[-1] if fds else root.fd, parts[-1], rel)
        except FileNotFoundError:
            return None
        except (OSError, PathRefused) as error:
            raise _Refused(rel) from error
    finally:
        for folder in fds:
            os.close(folder)
    try:
        return read_capped(fd, limit).decode("utf-8", errors="replace")
    except OSError as error:
        raise _Refused(rel) from error
    finally:
        os.close(fd)


def _valid_ref(ref: str) -> bool:
    parts = ref.split("/")
    return (
        ref.startswith("refs/")
        and len(ref) < 1024
        and ref.isprintable()
        and all(part not in ("", ".", "..") and not part.startswith(".") for part in parts)
    )


def _is_sha(text: str) -> bool:
    """Whether ``text`` is a full object name (SHA-1 or SHA-256, lowercase hex)."""
    return len(text) in (40, 64) and set(text) <= _HEX


def _head(root: SafeRoot, readable: Callable[[str], bool]) -> str:
    """``sha (branch)`` of the repository at the root, or why it is not shown.

    Read as the tools would read (see :func:`_read_git`: no symlink, no protected or
    read-denied file, every read capped), and only text that looks like a ref name or an
    object name is shown: nothing else of a planted file reaches the model.
    """
    try:
        head = _read_git(root, (".git", "HEAD"), MAX_HEAD_BYTES, readable)
    except _Refused:
        return "unknown"
    if head is None:
        return "not a git repository"
    head = head.split("\n", 1)[0].strip()
    if not head.startswith("ref: "):
        return head if _is_sha(head) else "unknown"
    ref = head[5:].strip()
    if not _valid_ref(ref):
        return "unknown"
    branch = ref.removeprefix("refs/heads/")
    try:
        loose = _read_git(root, (".git", *ref.split("/")), MAX_HEAD_BYTES, readable)
        if loose is not None:
            sha = loose.split("\n", 1)[0].strip()
            return f"{sha[:12]} ({branch})" if _is_sha(sha) else f"unknown ({branch})"
        packed = _read_git(root, (".git", "packed-refs"), MAX_PACKED_REFS_BYTES, readable)
    except _Refused:
        return f"unknown ({branch})"
    for line in (packed or "").split("\n"):  # git's lines end at \n only
        sha, _, name = line.rstrip("\r").partition(" ")
        if name == ref and _is_sha(sha):
            return f"{sha[:12]} ({branch})"
    return f"(no commits on {branch})"


MAX_GITIGNORE_BYTES = 64 * 1024
"""How much of each ``.gitignore`` is read (the rest is ignored)."""
MAX_GITIGNORE_RULES = 1_000
"""How many rules of each ``.gitignore`` are used."""


def _gitignore_rule(line: str) -> tuple[bool, bool, str] | None:
    """``(negated, folders_only, regex)`` of one ``.gitignore`` line; ``None`` for blank
    lines and comments. The regex matches a path relative to the file's folder."""
    line = line.rstrip("\r")
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated or line.startswith(("\\!", "\\#")):
        line = line[1:]
    folders_only = line.endswith("/")
    line = line.rstrip("/")
    anchored = "/" in line
    segments = [s for s in line.split("/") if s]
    if not segments:
        return None
    pieces = [] if anchored else ["(?:.*/)?"]
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            pieces.append(".+" if last else "(?:.*/)?")
        else:
            pieces.append(segment_regex(segment, escapes=True) + ("" if last else "/"))
    return negated, folders_only, "".join(pieces)


def _compile_alternatives(regexes: list[str]) -> Any:
    if not regexes:
        return None
    options = re2.Options()
    options.log_errors = False
    options.encoding = re2.Options.Encoding.LATIN1  # bytes, as git matches them
    pattern = "(?s)(?:" + "|".join(f"(?:{r})" for r in regexes) + ")"
    try:
        return re2.compile(pattern.encode("latin-1"), options)
    except re2.error:
        return None


class GitIgnore:
    """The rules of one ``.gitignore`` file, for the paths below its folder.

    Supported as git does: blank lines and ``#`` comments, ``!`` negation (the last
    matching rule wins), a trailing ``/`` for folders only, a ``/`` at the start or in the
    middle anchoring the rule to this folder (otherwise it matches at any depth), ``*``,
    ``?``, ``**`` and ``[...]`` classes, ``\\`` escapes. Matching uses RE2, so no pattern
    takes more than linear time.
    """

    def __init__(self, text: str) -> None:
        """``text``: the file's bytes decoded as Latin-1 (one character per byte)."""
        rules = [r for r in map(_gitignore_rule, text.splitlines()) if r is not None]
        # Runs of rules with the same sign are matched as one alternation; the runs are
        # tried last to first, so the last matching rule decides.
        self._runs: list[tuple[bool, Any, Any]] = []
        run: list[tuple[bool, bool, str]] = []
        for rule in [*rules[:MAX_GITIGNORE_RULES], None]:
            if run and (rule is None or rule[0] != run[0][0]):
                every = _compile_alternatives([r for _, _, r in run])
                files = _compile_alternatives([r for _, only, r in run if not only])
                self._runs.append((run[0][0], every, files))
                run = []
            if rule is not None:
                run.append(rule)

    def __bool__(self) -> bool:
        return bool(self._runs)

    def decide(self, path: str, is_dir: bool) -> bool | None:
        """``True`` if ``path`` (relative to this file's folder) is ignored, ``False`` if a
        ``!`` rule keeps it, ``None`` if no rule matches."""
        encoded = os.fsencode(path)
        for negated, every, files in reversed(self._runs):
            regex = every if is_dir else files
            if regex is not None and regex.fullmatch(encoded) is not None:
                return not negated
        return None


def _read_gitignore(dir_fd: int, rel: str) -> GitIgnore | None:
    """The ``.gitignore`` of the folder ``dir_fd`` (a regular file, not followed through a
    symlink, at most ``MAX_GITIGNORE_BYTES`` read); ``None`` when there is none."""
    try:
        fd, _ = open_regular(dir_fd, ".gitignore", rel)
    except (OSError, PathRefused):
        return None
    try:
        data = read_capped(fd, MAX_GITIGNORE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    rules = GitIgnore(data.decode("latin-1"))
    return rules or None


class WorkspacePreamble:
    """The preamble of a project folder: name, path, file tree, git HEAD, clock rounded to the hour.

    The tree leaves out the agent's own folder (``.agentfsm``) and the ``exclude`` paths,
    VCS data, virtualenvs, ``node_modules`` and tool caches (``SKIPPED_DIRS``), what the
    ``.gitignore`` files of the tree ignore (the root's and nested ones, as git reads
    them), so that it does not grow with the agent's own sessions or the project's builds,
    and what the ``list_dir`` rules deny, as the ``list_dir`` tool does.

    The git HEAD is read as the ``read_file`` tool would read it, and stricter: no symlink
    is followed (not even inside the root), ``.agentfsm``, the ``exclude`` paths and what
    the ``read_file`` rules deny are not read, and only a ref name or an object name is
    shown (``unknown`` otherwise), so a planted ``HEAD`` or ref shows nothing of another file.

    Args:
        root: The workspace folder.
        max_entries: How many tree entries to list at most.
        max_depth: How deep to descend.
        clock: Returns "now" (UTC); injectable for tests.
        exclude: More paths never listed nor read, relative to ``root`` or absolute (those
            outside ``root`` are ignored), e.g. the session folder when it is inside the
            workspace.
        permissions: The rules the tree (``list_dir`` rules) and the git reads
            (``read_file`` rules) obey; ``None``: those of the workspace's
            ``.agentfsm/settings.json``, read when the preamble is rendered (if that file
            is malformed, nothing of git is read and the tree obeys no rule).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        max_entries: int = 200,
        max_depth: int = 3,
        clock: Callable[[], datetime] | None = None,
        exclude: Sequence[str | Path] = (),
        permissions: Permissions | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.exclude = tuple(str(path) for path in exclude)
        self.permissions = permissions
        self.max_entries = max_entries
        self.max_depth = max_depth
        self._clock = clock if clock is not None else (lambda: datetime.now(UTC))

    def _rules(self) -> Permissions | None:
        """The permission rules (``None``: the settings file is malformed)."""
        if self.permissions is not None:
            return self.permissions
        try:
            return load_settings(self.root).permissions
        except SettingsError:
            return None

    def _safe_root(self) -> SafeRoot:
        return SafeRoot(self.root, protected=(PROTECTED_DIR, *self.exclude))

    def tree(self) -> list[str]:
        """Sorted, indented entries (folders end with ``/``), skipping caches, VCS data,
        the agent's own folder, the ``exclude`` paths, what ``.gitignore`` files ignore
        and what the ``list_dir`` rules deny. Read through descriptors: no symlink is
        followed."""
        return self._tree(self._rules())

    def _tree(self, permissions: Permissions | None) -> list[str]:
        lines: list[str] = []
        if permissions is None:  # malformed settings: listed as without rules
            permissions = Permissions()
        more = 0
        scan_limit = max(1_000, self.max_entries * 10)

        def ignored(rules: list[tuple[int, GitIgnore]], parts: list[str], is_dir: bool) -> bool:
            for base, gitignore in reversed(rules):  # the deepest file decides first
                decided = gitignore.decide("/".join(parts[base:]), is_dir)
                if decided is not None:
                    return decided
            return False

        def walk(
            root: SafeRoot,
            fd: int,
            parts: list[str],
            rules: list[tuple[int, GitIgnore]],
        ) -> None:
            nonlocal more
            depth = len(parts)
            here = _read_gitignore(fd, "/".join([*parts, ".gitignore"]))
            if here is not None:
                rules = [*rules, (depth, here)]
            rows: list[tuple[bool, str]] = []
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if len(rows) >= scan_limit:
                            more += 1
                            break
                        rows.append((not entry.is_dir(follow_symlinks=False), entry.name))
            except OSError:
                return
            for is_file, name in sorted(rows):
                if not is_file and name in SKIPPED_DIRS:
                    continue
                if root.is_protected([*parts, name]):
                    continue
                if rules and ignored(rules, [*parts, name], not is_file):
                    continue
                if permissions.check("list_dir", "/".join([*parts, name])) is not None:
                    continue
                if len(lines) >= self.max_entries:
                    more += 1
                    continue
                shown = name.encode("utf-8", "backslashreplace").decode("utf-8")
                lines.append("  " * depth + shown + ("" if is_file else "/"))
                if not is_file and depth + 1 < self.max_depth:
                    try:
                        child = open_subdir(fd, name)
                    except OSError:
                        continue
                    try:
                        walk(root, child, [*parts, name], rules)
                    finally:
                        os.close(child)

        try:
            safe = self._safe_root()
        except OSError:
            return lines
        with safe:
            walk(safe, safe.fd, [], [])
        if more:
            lines.append(f"... ({more} more entries not listed)")
        return lines

    def git_head(self) -> str:
        """``sha (branch)`` of the repository at the root (``unknown`` when it cannot be
        read safely, ``not a git repository`` when there is no ``.git`` folder)."""
        return self._git_head(self._rules())

    def _git_head(self, permissions: Permissions | None) -> str:
        if permissions is None:
            return "unknown"
        try:
            safe = self._safe_root()
        except OSError:
            return "unknown"
        with safe:
            return _head(safe, lambda rel: permissions.check("read_file", rel) is None)

    def render(self) -> str:
        hour = self._clock().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        permissions = self._rules()
        parts = [
            f"project: {self.root.name}",
            f"path: {self.root}",
            f"git HEAD: {self._git_head(permissions)}",
            f"time: {hour.strftime('%Y-%m-%dT%H:00Z')} (rounded to the hour)",
            "files:",
            *("  " + line for line in self._tree(permissions)),
        ]
        return "\n".join(parts)
