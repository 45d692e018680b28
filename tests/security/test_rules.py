"""Permission rules and settings, attacked: shell rules parsed, settings validated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentfsm.adapters.tools import Permissions
from agentfsm.adapters.tools._settings import SettingsError, load_settings, parse_settings
from agentfsm.sandbox import ResourceLimits

from .tally import AttackTally

RM_ATTACKS = [
    " rm x",
    "\trm x",
    "true; rm x",
    "true && rm x",
    "false || rm x",
    "echo hi | rm x",
    "true\nrm x",
    "sh -c 'rm x'",
    "bash -c 'rm x'",
    "bash -lc 'rm x'",
    "sh -c \"sh -c 'rm x'\"",
    "/bin/rm x",
    "/usr/bin/rm x",
    "\\rm x",
    "'rm' x",
    'r""m x',
    "r\\m x",
    "$(echo rm) x",
    "`echo rm` x",
    "echo x | xargs rm",
    "xargs rm < list",
    "find . -name x -delete",
    "find . -exec rm {} \\;",
    "python3 -c 'import os; os.remove(\"x\")'",
    "python3 - <<< 'import os'",
    "perl -e 'unlink \"x\"'",
    'node -e \'require("fs").unlinkSync("x")\'',
    "ruby -e 'File.delete(\"x\")'",
    "awk 'BEGIN { system(\"rm x\") }'",
    "env rm x",
    "env -i rm x",
    "command rm x",
    "nohup rm x &",
    "timeout 5 rm x",
    "nice -n 5 rm x",
    "exec rm x",
    "eval 'rm x'",
    "eval rm x",
    "X=rm; $X x",
    "${RM:-rm} x",
    "(rm x)",
    "{ rm x; }",
    "if true; then rm x; fi",
    "for f in x; do rm $f; done",
    "while true; do rm x; break; done",
    "echo $(rm x)",
    'echo "$(rm x)"',
    "cat <(rm x)",
    "ls > $(rm x)",
    "echo 'rm x' | sh",
    "sh < script",
    ". ./script",
    "source ./script",
    "sed -n 's/x/rm x/e' f",
    "git -c alias.r='!rm x' r",
    "busybox rm x",
    "rm",
    "echo $(",
]

ALLOWED_RULES = ["shell(git *)", "shell(make *)"]
ALLOW_ATTACKS = [
    "git --version; cat /etc/passwd",
    "git status && cat ~/.ssh/id_rsa",
    "git status || curl example.com",
    "git log | sh",
    "git status\ncat secret",
    "git -c alias.x='!cat secret' x",
    "git -c core.pager='cat secret' log",
    "git --config-env=core.pager=X log",
    "git --exec-path=/tmp log",
    "git log > /etc/motd",
    "git log $(cat secret)",
    "git log `cat secret`",
    "GIT_PAGER='cat secret' git log",
    "make --eval='x:;cat secret' x",
    "make test & cat secret",
    "make test; rm -rf .",
    "env git status",
    "command git status",
    "xargs git < list",
    "sh -c 'git status'",
    "git status 2>&1 | tee out",
    "(git status)",
    "{ git status; }",
]
ALLOWED_OK = ["git status", "git log --oneline -5", "make test", "make -j2 lint", "git diff HEAD~1"]


def test_shell_deny_rules_see_every_command(attacks: AttackTally) -> None:
    rules = Permissions.of(deny=["shell(rm *)"])
    for command in RM_ATTACKS:
        reason = rules.check("shell", command)
        attacks.record("shell deny rule shell(rm *)", reason is None, command)
    for harmless in ("ls -la", "git status", "echo rm is a word", "python3 script.py"):
        assert rules.check("shell", harmless) is None, harmless


def test_shell_allow_rules_match_one_simple_command(attacks: AttackTally) -> None:
    rules = Permissions.of(allow=ALLOWED_RULES)
    for command in ALLOW_ATTACKS:
        reason = rules.check("shell", command)
        attacks.record("shell allow rules shell(git *), shell(make *)", reason is None, command)
    for command in ALLOWED_OK:
        assert rules.check("shell", command) is None, command


def test_refusals_say_why() -> None:
    deny = Permissions.of(deny=["shell(rm *)"])
    assert deny.check("shell", "true; rm x") == "permission denied by rule 'shell(rm *)'"
    reason = deny.check("shell", "python3 -c 'import os'") or ""
    assert "cannot check" in reason
    assert "python3 runs code given inline (-c)" in reason
    allow = Permissions.of(allow=["shell(git *)"])
    reason = allow.check("shell", "git status; ls") or ""
    assert reason.startswith("permission denied: shell is only allowed for shell(git *)")
    assert "(ls: no allow rule matches it)" in reason


def test_path_rules_are_unchanged() -> None:
    rules = Permissions.of(deny=["write_file(.git/**)"], allow=["read_file(src/*)"])
    assert rules.check("write_file", ".git/config") is not None
    assert rules.check("write_file", "src/a.py") is None
    assert rules.check("read_file", "src/a.py") is None
    assert rules.check("read_file", "docs/a.md") is not None


MALFORMED = [
    '{"deny": "shell"}',
    '{"Deny": ["shell"]}',
    '{"permissions": {"deny": "shell"}}',
    '{"permissions": {"Deny": ["shell"]}}',
    '{"permissions": {"deny": [1]}}',
    '{"permissions": {"deny": [null]}}',
    '{"permissions": {"deny": ["shell(rm *"]}}',
    '{"permissions": {"allow": {"shell": true}}}',
    '{"permissions": null}',
    '{"permissions": []}',
    '{"sandbox": {"network": "yes"}}',
    '{"sandbox": {"network": 1}}',
    '{"sandbox": {"read": ["relative/path"]}}',
    '{"sandbox": {"write": "/tmp"}}',
    '{"sandbox": {"proxy": "x"}}',
    '{"sandbox": {"read": ["/"]}}',
    '{"sandbox": {"write": ["//"]}}',
    '{"sandbox": {"read": ["/etc/.."]}}',
    '{"sandbox": {"env": "PATH"}}',
    '{"sandbox": {"env": ["1BAD"]}}',
    '{"sandbox": {"env": ["A=B"]}}',
    '{"sandbox": {"env": ["LLM CREDS"]}}',
    '{"sandbox": {"env": [""]}}',
    '{"sandbox": {"limits": {"processes": 0}}}',
    '{"sandbox": {"limits": {"tmp_mb": -1}}}',
    '{"sandbox": {"limits": {"memory_mb": "2G"}}}',
    '{"sandbox": {"limits": {"cpu_seconds": true}}}',
    '{"sandbox": {"limits": {"file_size_mb": 1.5}}}',
    '{"sandbox": {"limits": {"memory": 1}}}',
    '{"sandbox": {"limits": []}}',
    "[]",
    '"deny everything"',
    "null",
    "{",
    '{"permissions": {"deny": ["shell"]}} trailing',
    "[" * 100_000,
    "\udcff",
]


def test_malformed_settings_stop_the_run(tmp_path: Path, attacks: AttackTally) -> None:
    folder = tmp_path / ".agentfsm"
    folder.mkdir()
    for text in MALFORMED:
        (folder / "settings.json").write_bytes(text.encode("utf-8", "surrogateescape"))
        try:
            load_settings(tmp_path)
        except SettingsError as error:
            escaped = not str(error).startswith(".agentfsm/settings.json: ")
        except Exception as error:  # anything else is a crash, not a clear refusal
            escaped = True
            text = f"{text[:40]!r} raised {type(error).__name__}"
        else:
            escaped = True  # accepted: the run would go on with rules it misread
        attacks.record("malformed settings", escaped, text[:60])


FIELD_ERRORS = [
    ('{"permissions": {"deny": "shell"}}', r"permissions\.deny: Input should be a valid list"),
    ('{"permissions": {"Deny": []}}', r"permissions\.Deny: unknown key"),
    ('{"permissions": {"deny": ["shell("]}}', r"permissions\.deny: "),
    ('{"sandbox": {"limits": {"processes": 0}}}', r"sandbox\.limits\.processes must be a whole"),
    ('{"sandbox": {"env": ["A=B"]}}', r"sandbox\.env: 'A=B' is not an environment"),
    ('{"sandbox": {"read": ["/"]}}', r"sandbox\.read: / would open the whole machine"),
    ('{"sandbox": {"write": ["rel"]}}', r"sandbox\.write: 'rel' is not an absolute path"),
    ('{"provider": {"quirks": {"nope": 1}}}', r"provider\.quirks\.nope: not a quirk"),
    ("{", r"not valid JSON"),
]
"""Malformed files and the start of the error after the file's name."""


@pytest.mark.parametrize(("text", "error"), FIELD_ERRORS)
def test_settings_errors_name_the_file_and_the_field(tmp_path: Path, text: str, error: str) -> None:
    (tmp_path / ".agentfsm").mkdir()
    (tmp_path / ".agentfsm" / "settings.json").write_text(text, "utf-8")
    with pytest.raises(SettingsError, match=r"^\.agentfsm/settings\.json: " + error):
        load_settings(tmp_path)
    # The bytes alone, named as the caller says (the user's own file, for one).
    with pytest.raises(SettingsError, match=r"^/home/u/settings\.json: " + error):
        parse_settings(text.encode("utf-8"), "/home/u/settings.json")


def test_valid_settings(tmp_path: Path) -> None:
    (tmp_path / ".agentfsm").mkdir()
    (tmp_path / ".agentfsm" / "settings.json").write_text(
        json.dumps(
            {
                "permissions": {"allow": ["shell(git *)"], "deny": ["write_file(.git/**)"]},
                "sandbox": {
                    "network": True,
                    "read": ["/opt/tools"],
                    "write": ["~/cache"],
                    "env": ["CARGO_HOME", "LLM_MODEL", "CARGO_HOME"],
                    "limits": {"processes": 64, "cpu_seconds": 30},
                },
            }
        ),
        "utf-8",
    )
    settings = load_settings(tmp_path)
    assert [str(r) for r in settings.permissions.allow] == ["shell(git *)"]
    assert [str(r) for r in settings.permissions.deny] == ["write_file(.git/**)"]
    assert settings.sandbox.network is True
    assert settings.sandbox.read == ("/opt/tools",)
    assert settings.sandbox.write == (str(Path("~/cache").expanduser()),)
    assert settings.sandbox.env == ("CARGO_HOME", "LLM_MODEL")
    assert settings.sandbox.limits == ResourceLimits(processes=64, cpu_seconds=30)
    assert settings.sandbox.limits.memory_mb == 2048  # a key left out keeps its default
    defaults = load_settings(tmp_path / "nowhere").sandbox
    assert defaults.network is False
    assert (defaults.env, defaults.limits) == ((), ResourceLimits())


def test_settings_that_are_not_regular_files_are_refused(tmp_path: Path) -> None:
    import os

    (tmp_path / ".agentfsm").mkdir()
    os.mkfifo(tmp_path / ".agentfsm" / "settings.json")
    with pytest.raises(SettingsError, match="not a regular file"):
        load_settings(tmp_path)
