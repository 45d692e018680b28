"""``python -m agentfsm.testing.serve``: the same command as ``agentfsm fake-server``."""

from __future__ import annotations

import sys

from ._serve import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main(prog="python -m agentfsm.testing.serve"))
