"""Policies: plain objects implementing the engine's hook protocols.

A policy implements any subset of :class:`agentfsm.engine.TurnGate` and
:class:`agentfsm.engine.FinalGate`; pass it in ``policies=`` to ``run_conversation``.
"""

__all__: list[str] = []
