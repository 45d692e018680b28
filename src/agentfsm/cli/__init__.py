"""The ``agentfsm`` command: run agents, read sessions, draw the machine.

``agentfsm run PROMPT`` · ``agentfsm sessions list|show ID`` · ``agentfsm trace ID`` ·
``agentfsm diagram`` · ``agentfsm conformance``. ``python -m agentfsm`` is the same command,
but imports ``./agentfsm/`` first when run in a workspace: prefer the console script.
"""

from .app import main

__all__ = ["main"]
