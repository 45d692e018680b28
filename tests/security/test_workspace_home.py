"""A workspace is never the home, and the path tools hide what the sandbox hides.

A fake home in a temporary folder (``HOME`` and the ``XDG_*`` variables of this process
point into it; the real home is not touched) holds keys, credentials, the agent's own
user-level settings, its trust record and session folder. The CLI, the path tools and the
sandbox refuse a workspace that is the home, holds it, is ``/``, lies in a hidden folder or
holds one (``test_hidden_escapes.py``); in workspaces beside the agent's configuration and
the home's secret folders (``~/.config/nvim``, a project), every path tool is turned against
them: ``..``, symlinks made inside the workspace, other cases, absolute paths, searches. An
attack got through when a canary shows in a result, or a file of the agent changed or
appeared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentfsm import Agent, ToolCall, ToolMessage, ToolResult
from agentfsm.adapters.tools import ToolBox, workspace_tools
from agentfsm.cli import main
from agentfsm.sandbox import BubblewrapSandbox, hidden_beneath
from agentfsm.sandbox._hidden import hidden_in
from agentfsm.testing import ScriptedChat, tool_reply

from .homes import CANARY, FakeHome, use_home
from .tally import AttackTally

pytestmark = pytest.mark.usefixtures("bubblewrap")


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHome:
    return use_home(FakeHome(tmp_path), monkeypatch)


def test_the_cli_refuses_the_home_as_workspace(
    fake: FakeHome, tmp_path: Path, capsys: pytest.CaptureFixture[str], attacks: AttackTally
) -> None:
    """``--workspace ~``, a folder holding the home, ``/``, the agent's own state folder and a
    secret folder: exit code 2 and one line saying what to use instead; no run starts."""
    sessions = ["--session-dir", str(tmp_path / "sessions")]
    for workspace in (
        fake.home,
        fake.home.parent,
        Path("/"),
        fake.home / ".local" / "state" / "agentfsm",
        fake.session.parent,
        fake.home / ".ssh",
        fake.home / ".config" / "agentfsm",
    ):
        chat = ScriptedChat([tool_reply(("read_file", {"path": ".ssh/id_rsa"})), "done"])
        for extra in ([], ["--no-sandbox"]):
            code = main(["run", "go", "--workspace", str(workspace), *sessions, *extra], chat=chat)
            err = capsys.readouterr().err.strip()
            refused = code == 2 and len(err.splitlines()) == 1 and "project folder" in err
            attacks.record(
                "workspace: home, / or hidden folder", not refused, f"{workspace}: {err}"
            )
        assert chat.requests == []
    assert fake.untouched()


def test_the_library_refuses_the_home_as_workspace(fake: FakeHome, attacks: AttackTally) -> None:
    for workspace in (fake.home, fake.home.parent, fake.home / ".aws", fake.home / ".gnupg"):
        for make in (
            lambda w: workspace_tools(w),
            lambda w: BubblewrapSandbox(w),
        ):
            try:
                make(workspace)
            except ValueError as error:
                attacks.record("workspace: home, / or hidden folder", False, str(error))
            else:
                attacks.record("workspace: home, / or hidden folder", True, str(workspace))
    # A project inside the home is what a workspace should be.
    assert workspace_tools(fake.project) is not None


def _attempts(root: Path, targets: list[str]) -> list[tuple[str, dict[str, object]]]:
    """Path tool calls against ``targets`` (paths relative to ``root``)."""
    calls: list[tuple[str, dict[str, object]]] = []
    for index, target in enumerate(targets):
        first, _, rest = target.partition("/")
        spellings = [
            target,
            f"./{target}",
            f"src/../{target}",
            str(root / target),
            f"{first.upper()}/{rest}" if rest else target.upper(),
            f"links/{index}/{rest}",
        ]
        for path in spellings:
            calls += [
                ("read_file", {"path": path}),
                ("edit_file", {"path": path, "old": "canary", "new": "changed"}),
                ("write_file", {"path": path, "content": "planted"}),
                ("list_dir", {"path": path.rpartition("/")[0] or "."}),
            ]
        calls += [
            ("grep", {"pattern": "canary", "path": first}),
            ("glob", {"pattern": f"{first}/**/*"}),
        ]
    calls += [("grep", {"pattern": CANARY, "path": "."}), ("glob", {"pattern": "**/*"})]
    return calls


async def _turn_against(
    box: ToolBox, root: Path, targets: list[str], fake: FakeHome, attacks: AttackTally, kind: str
) -> None:
    (root / "src").mkdir(exist_ok=True)
    (root / "links").mkdir(exist_ok=True)
    for index, target in enumerate(targets):
        first, _, _ = target.partition("/")
        link = root / "links" / str(index)
        if not link.exists():
            link.symlink_to(root / first)  # a symlink inside the root: followed, then refused
    before = set(root.rglob("*"))
    for tool, arguments in _attempts(root, targets):
        result: ToolResult = await box.run(ToolCall("c", tool, arguments))
        text = f"{result.output}\n{result.error or ''}"
        # A failed result may echo the path it was given; a result that succeeded names none.
        names = [target.rpartition("/")[2] for target in targets]
        leaked = CANARY in text or (result.ok and any(name in text for name in names))
        attacks.record(kind, leaked or not fake.untouched(), f"{tool} {arguments}: {text[:200]}")
    created = set(root.rglob("*")) - before
    attacks.record(kind, bool(created), f"created {sorted(map(str, created))[:5]}")


async def test_path_tools_beside_the_agents_files_and_the_homes_secrets(
    fake: FakeHome, attacks: AttackTally
) -> None:
    """Workspaces next to the agent's configuration (``~/.config/nvim``) and a project in
    the home: every path tool and the shell turned against the agent's settings, trust
    record and sessions and the home's secrets (``..``, absolute paths, symlinks made in the
    workspace, other cases, searches). Workspaces that hold them are refused (below)."""
    nvim = fake.home / ".config" / "nvim"
    nvim.mkdir()
    targets = [
        "../agentfsm/settings.json",
        "../gh/key",
        "../git/credentials",
        "../../.local/state/agentfsm/trusted-settings.json",
        "../../.local/state/agentfsm/sessions/p-1/s.jsonl",
        "../../.ssh/key",
    ]
    home = [f"../../.config/{t.removeprefix('../')}" for t in targets[:3]] + targets[3:]
    for root, goals in ((nvim, targets), (fake.project, home)):
        box = workspace_tools(root, sandbox=BubblewrapSandbox(root))
        await _turn_against(box, root, goals, fake, attacks, "path tools: hidden file")
        for target in goals:  # the shell sees none of it either
            result = await box.run(ToolCall("c", "shell", {"command": f"cat {target}"}))
            attacks.record("path tools: hidden file", CANARY in result.output, target)


def test_one_hidden_list_for_the_sandbox_and_the_path_tools(fake: FakeHome) -> None:
    """Every secret planted beneath a folder (an independent list) is hidden there by the
    path tools' list and, for a read path, by the sandbox's mounts."""
    for folder in (fake.home / ".config", fake.home / ".local", fake.home / ".m2"):
        hidden = [folder / p for p in hidden_beneath(folder)]
        mounted = [p for p, _ in BubblewrapSandbox(fake.project, read_paths=[folder]).home_secrets]
        planted = [p for p in fake.secrets if p.is_relative_to(folder)]
        assert planted
        for secret in planted:
            assert any(secret.is_relative_to(h) for h in hidden), secret
            assert any(secret.is_relative_to(m) for m in mounted), secret
        assert set(hidden_in([folder], {"HOME": str(fake.home)})) <= set(hidden)


async def test_an_agents_session_folder_in_the_workspace_is_out_of_reach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attacks: AttackTally
) -> None:
    """In the library: an ``Agent`` whose session folder lies inside the workspace, with
    path tools built without being told of it; the model reads, lists and rewrites it."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "ws"
    root.mkdir()
    sessions = root / "runs"
    earlier = sessions / "earlier.jsonl"
    earlier.parent.mkdir()
    earlier.write_text(json.dumps({"canary": CANARY}) + "\n", "utf-8")
    calls = [
        ("read_file", {"path": "runs/earlier.jsonl"}),
        ("list_dir", {"path": "runs"}),
        ("grep", {"pattern": "canary", "path": "."}),
        ("glob", {"pattern": "runs/*"}),
        ("write_file", {"path": "runs/earlier.jsonl", "content": "forged"}),
        ("edit_file", {"path": "runs/earlier.jsonl", "old": "canary", "new": "x"}),
    ]
    chat = ScriptedChat([*(tool_reply(ToolCall(f"t{i}", *c)) for i, c in enumerate(calls)), "ok"])
    outcome = await Agent(chat, workspace_tools(root), session_dir=sessions).run("look")
    results = {m.tool_call_id: m.content for m in outcome.messages if isinstance(m, ToolMessage)}
    for i, (tool, _) in enumerate(calls):
        text = results[f"t{i}"]
        failed = text.startswith('{"ok":false')  # a failed result echoes the path it was given
        leaked = CANARY in text or (not failed and "earlier.jsonl" in text)
        attacks.record("path tools: the run's session folder", leaked, f"{tool}: {text[:200]}")
    assert CANARY in earlier.read_text("utf-8")
