"""The shell rules on their corpora: every attack class refused under deny and allow rules,
the literal look-alikes admitted, and the everyday corpus's refusal rates, each refusal of
a kind docs/security.md lists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .shell_corpus import (
    ALLOW_ATTACKS,
    ALLOW_EVERYDAY,
    ATTACKS,
    DENY_ATTACKS,
    DENY_EVERYDAY,
    EVERYDAY,
    INTENDED,
    LOOK_ALIKES,
)
from .tally import NOTES, AttackTally

DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"


@pytest.mark.parametrize("kind", list(ATTACKS))
def test_every_attack_class_is_refused(kind: str, attacks: AttackTally) -> None:
    for line in ATTACKS[kind]:
        attacks.record(f"shell deny rule: {kind}", DENY_ATTACKS.check("shell", line) is None, line)
        attacks.record(
            f"shell allow rule: {kind}", ALLOW_ATTACKS.check("shell", line) is None, line
        )


@pytest.mark.parametrize("line", LOOK_ALIKES)
def test_literal_look_alikes_are_admitted(line: str) -> None:
    assert DENY_ATTACKS.check("shell", line) is None
    if not re.match(r"\w+=", line):
        assert ALLOW_ATTACKS.check("shell", line) is None


def _kind(reason: str) -> str | None:
    return next((kind for kind, pattern in INTENDED.items() if re.search(pattern, reason)), None)


def test_the_everyday_corpus_is_refused_only_for_listed_reasons() -> None:
    assert len(EVERYDAY) >= 150
    docs = DOCS.read_text("utf-8")
    defects: list[str] = []
    rates: list[str] = []
    for name, rules in (("deny list", DENY_EVERYDAY), ("allow list", ALLOW_EVERYDAY)):
        refused = 0
        for line in EVERYDAY:
            reason = rules.check("shell", line)
            if reason is None:
                continue
            refused += 1
            kind = _kind(reason)
            if kind is None or kind not in docs:
                defects.append(f"{name}: {line!r}: {reason}")
        rates.append(f"{name} {refused}/{len(EVERYDAY)} ({100 * refused / len(EVERYDAY):.1f} %)")
    NOTES.append(f"everyday corpus refused under the {', the '.join(rates)}")
    assert not defects, "\n".join(defects)


@pytest.mark.parametrize(
    "line",
    [
        "python3 --version",
        "python3 -V",
        "node --version",
        "npm --version",
        "cargo --version",
        "git config user.name",
        "make",
    ],
)
def test_version_checks_and_bare_make_pass_both_rule_sets(line: str) -> None:
    assert DENY_EVERYDAY.check("shell", line) is None
    assert ALLOW_EVERYDAY.check("shell", line) is None
