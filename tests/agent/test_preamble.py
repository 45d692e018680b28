"""The workspace preamble's file tree: what it leaves out (the agent's own folder, VCS data,
virtualenvs, ``node_modules``, and what ``.gitignore`` files ignore)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfsm.adapters.tools import Permissions
from agentfsm.agent import WorkspacePreamble
from agentfsm.agent._preamble import GitIgnore


def _touch(root: Path, *paths: str) -> None:
    for path in paths:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("x", "utf-8")


def _tree(root: Path, **options: object) -> list[str]:
    return WorkspacePreamble(root, max_depth=6, **options).tree()  # type: ignore[arg-type]


def test_the_agent_folder_vcs_data_and_environments_are_never_listed(tmp_path: Path) -> None:
    _touch(
        tmp_path,
        "app.py",
        ".agentfsm/sessions/2026-01-01-abc.jsonl",
        ".agentfsm/settings.json",
        ".git/HEAD",
        ".git/objects/ab/cdef",
        ".venv/bin/python",
        "node_modules/left-pad/index.js",
        "pkg/node_modules/x/index.js",
        "pkg/.venv/lib/site.py",
        "pkg/.agentfsm/sessions/3.jsonl",
    )
    text = "\n".join(_tree(tmp_path))
    for hidden in (".agentfsm", "sessions", ".jsonl", ".git", ".venv", "node_modules"):
        assert hidden not in text
    assert _tree(tmp_path) == ["pkg/", "app.py"]


def test_a_session_folder_inside_the_root_is_not_listed(tmp_path: Path) -> None:
    _touch(tmp_path, "app.py", "runs/one.jsonl", "state/sessions/two.jsonl", "state/keep.txt")
    assert _tree(tmp_path, exclude=["runs", tmp_path / "state" / "sessions"]) == [
        "state/",
        "  keep.txt",
        "app.py",
    ]
    # A path outside the root changes nothing.
    assert "runs/" in _tree(tmp_path, exclude=[tmp_path.parent / "elsewhere"])


def test_each_gitignore_pattern_kind(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text(
        "\n".join(
            [
                "# a comment, then a blank line",
                "",
                "*.log",  # any depth
                "!keep.log",  # negation: the last matching rule wins
                "build/",  # folders only
                "/top.txt",  # anchored to this folder
                "docs/*.tmp",  # a slash in the middle anchors too
                "a?c.txt",
                "data[0-9].csv",
                "**/generated/**",
                "deep/**/x.bin",
                "trailing.txt   ",  # trailing spaces are not part of the pattern
            ]
        ),
        "utf-8",
    )
    _touch(
        tmp_path,
        "app.log",
        "src/nested/app.log",
        "keep.log",
        "build/out.o",
        "src/build/out.o",
        "build.txt/file",  # a folder named like the dir-only rule's prefix is kept
        "top.txt",
        "src/top.txt",
        "docs/a.tmp",
        "docs/sub/b.tmp",
        "abc.txt",
        "data7.csv",
        "dataX.csv",
        "src/generated/code.py",
        "deep/x.bin",
        "deep/a/b/x.bin",
        "deep/y.bin",
        "trailing.txt",
    )
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "build").write_text("a file, not a folder", "utf-8")
    assert _tree(tmp_path) == [
        "build.txt/",
        "  file",
        "deep/",
        "  a/",
        "    b/",
        "  y.bin",
        "docs/",
        "  sub/",
        "    b.tmp",
        "plain/",
        "  build",
        "src/",
        "  generated/",  # `generated/**` ignores what is inside, not the folder
        "  nested/",
        "  top.txt",
        ".gitignore",
        "dataX.csv",
        "keep.log",
    ]


def test_nested_gitignore_files_apply_below_their_folder(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.tmp\n", "utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("/local.txt\n!wanted.tmp\n", "utf-8")
    _touch(
        tmp_path,
        "local.txt",
        "x.tmp",
        "wanted.tmp",
        "sub/local.txt",
        "sub/wanted.tmp",
        "sub/other.tmp",
        "sub/inner/local.txt",
    )
    assert _tree(tmp_path) == [
        "sub/",
        "  inner/",
        "    local.txt",
        "  .gitignore",
        "  wanted.tmp",
        ".gitignore",
        "local.txt",
    ]


def test_a_gitignore_is_read_safely(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "rules").write_text("*\n", "utf-8")
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".gitignore").symlink_to(outside / "rules")  # a symlink is not followed
    _touch(root, "app.py")
    assert _tree(root) == [".gitignore", "app.py"]
    # A pathological pattern takes linear time (RE2); a huge file is read up to its cap.
    (root / ".gitignore").unlink()
    (root / ".gitignore").write_text(
        "app.py\n" + "*a" * 500 + "b\n" + "#" * 2_000_000 + "\n*.py\n", "utf-8"
    )
    _touch(root, "a" * 200, "other.py")
    assert _tree(root) == [".gitignore", "a" * 200, "other.py"]


@pytest.mark.parametrize(
    ("line", "path", "is_dir", "expected"),
    [
        ("\\#literal", "#literal", False, True),
        ("\\!bang", "!bang", False, True),
        ("[!a]x", "bx", False, True),
        ("[!a]x", "ax", False, None),
        ("*", "a/b", False, True),
        ("**", "a/b", False, True),
        ("a/**", "a", True, None),
        ("a/**", "a/b/c", False, True),
        ("[unclosed", "[unclosed", False, True),
        ("*.txt", "dir.txt/x", False, None),
        ("*.txt", "dir.txt", True, True),
    ],
)
def test_gitignore_rules(line: str, path: str, is_dir: bool, expected: bool | None) -> None:
    assert GitIgnore(line).decide(path, is_dir) is expected


def test_the_tree_obeys_the_list_dir_rules(tmp_path: Path) -> None:
    _touch(tmp_path, "app.py", "private/plan.txt", "private/deep/more.txt", "open/readme.txt")
    deny = Permissions.of(deny=["list_dir(private/**)"])
    assert _tree(tmp_path, permissions=deny) == [
        "open/",
        "  readme.txt",
        "private/",
        "app.py",
    ]
    # From the workspace's settings too.
    (tmp_path / ".agentfsm").mkdir()
    (tmp_path / ".agentfsm" / "settings.json").write_text(
        '{"permissions": {"deny": ["list_dir(open*)"]}}', "utf-8"
    )
    assert "open/" not in _tree(tmp_path)
    assert "  plan.txt" in _tree(tmp_path)
