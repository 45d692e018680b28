"""The `make demo` job: a real agent run on the embedded local model.

Makes a small sample project in a temporary folder, runs `agentfsm run` on a task in it with
the coding-agent preset and a bounded turn budget, then prints `agentfsm trace` of the
session. The model (SmolLM2-135M-Instruct, running on this machine) is tiny: the point is
the machine at work (turns, tool calls, policies, the OS sandbox, the session), not the
quality of its answers.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The console script, not `python -m agentfsm` (which imports ./agentfsm/ from the cwd first).
AGENTFSM = str(Path(sys.executable).with_name("agentfsm"))
if not Path(AGENTFSM).exists():
    AGENTFSM = shutil.which("agentfsm") or "agentfsm"

TASK = "List the files in this project, then read notes.txt and tell me what it says."


def make_workspace(root: Path) -> None:
    (root / "notes.txt").write_text(
        "Meeting notes: ship the release on Friday. Alice writes the changelog.\n", "utf-8"
    )
    (root / "app.py").write_text('def greet(name):\n    return f"Hello, {name}!"\n', "utf-8")
    (root / "README.md").write_text("# sample\nA tiny project for the agentfsm demo.\n", "utf-8")


def main() -> int:
    with (
        tempfile.TemporaryDirectory(prefix="agentfsm-demo-") as folder,
        tempfile.TemporaryDirectory(prefix="agentfsm-demo-sessions-") as state,
    ):
        workspace = Path(folder)
        make_workspace(workspace)
        sessions = Path(state)  # outside the workspace, where the model cannot reach
        print(f"workspace: {workspace}\ntask: {TASK}\n", flush=True)
        run = subprocess.run(
            [
                AGENTFSM,
                "run",
                TASK,
                "--provider",
                "local",
                "--workspace",
                str(workspace),
                "--preset",
                "coding-agent",
                "--max-turns",
                "6",
                "--temperature",
                "0",
                "--session-dir",
                str(sessions),
            ],
            check=False,
        )
        print("\n$ agentfsm trace latest", flush=True)
        subprocess.run(
            [AGENTFSM, "trace", "latest", "--session-dir", str(sessions)],
            check=False,
        )
        if run.returncode in (0, 3):
            print(
                f"\ndemo finished (agentfsm run exited with {run.returncode}: "
                f"{'final answer' if run.returncode == 0 else 'turn budget or policy stop'})"
            )
            return 0
        print(f"\ndemo failed: agentfsm run exited with {run.returncode}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
