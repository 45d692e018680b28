"""Deprecated names and module paths, in one place: each keeps working for one release and warns.

Three kinds of old name resolve here, each access emitting an :class:`AgentfsmDeprecationWarning`
that says what to use instead (CHANGELOG lists them):

- :data:`RENAMED`: a public name that has a new name (``agentfsm.Engine`` is ``agentfsm.Agent``);
- :data:`INTERNAL`: a name a public package exported that is now internal to agentfsm;
- old module paths: implementation modules are private (``agentfsm.engine.machine`` is
  ``agentfsm.engine._machine``); importing an old path gives the private module, with a warning
  pointing at the public package. :data:`MOVED_MODULES` lists the paths that moved elsewhere.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (PEP 781)
if TYPE_CHECKING:
    from collections.abc import Callable
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = [
    "INTERNAL",
    "MOVED_MODULES",
    "RENAMED",
    "AgentfsmDeprecationWarning",
    "install_module_aliases",
    "package_getattr",
    "warn_renamed",
]


class AgentfsmDeprecationWarning(DeprecationWarning):
    """A name that was renamed, moved or made internal is still in use."""


RENAMED: dict[str, str] = {
    "agentfsm.Engine": "agentfsm.Agent",
    "agentfsm.WorkspaceContext": "agentfsm.WorkspacePreamble",
    "agentfsm.agent.Engine": "agentfsm.agent.Agent",
    "agentfsm.agent.ContextProvider": "agentfsm.agent.PreambleProvider",
    "agentfsm.agent.WorkspaceContext": "agentfsm.agent.WorkspacePreamble",
    "agentfsm.agent.context_message": "agentfsm.agent.preamble_message",
    "agentfsm.agent.is_context_message": "agentfsm.agent.is_preamble_message",
    "agentfsm.engine.Compactor": "agentfsm.engine.Compressor",
    "agentfsm.engine.policy.Compactor": "agentfsm.engine.Compressor",
    "agentfsm.conformance.AdapterTarget": "agentfsm.conformance.RecordedTarget",
    "agentfsm.conformance.EndpointTarget": "agentfsm.conformance.LiveTarget",
    "agentfsm.conformance.context.AdapterTarget": "agentfsm.conformance.RecordedTarget",
    "agentfsm.conformance.context.EndpointTarget": "agentfsm.conformance.LiveTarget",
}
"""Old public name -> its new public name."""

INTERNAL: dict[str, dict[str, str]] = {
    "agentfsm.engine": {
        "AGENT_LOOP_ABORTED": "agentfsm.engine._errors",
        "COMPRESSION_SYSTEM_PROMPT": "agentfsm.engine._compression",
        "KEEP_RECENT_TURNS": "agentfsm.engine._compression",
        "TRANSCRIPT_MAX_CHARS": "agentfsm.engine._compression",
        "TURN_BUDGET_EXHAUSTED": "agentfsm.engine._history",
        "MAX_OVERFLOW_COMPACTIONS": "agentfsm.engine._errors",
        "PolicySet": "agentfsm.engine._policy",
        "LoopRunner": "agentfsm.engine._runner",
        "LoopGuards": "agentfsm.engine._machine",
        "build_run": "agentfsm.engine._loop",
        "StepperKind": "agentfsm.engine._stepper",
        "compress_messages": "agentfsm.engine._compression",
        "render_transcript": "agentfsm.engine._compression",
        "should_compress": "agentfsm.engine._compression",
        "Compression": "agentfsm.engine._compression",
        "estimate_message_tokens": "agentfsm.engine._tokens",
        "estimate_messages_tokens": "agentfsm.engine._tokens",
        "estimate_text_tokens": "agentfsm.engine._tokens",
        "tool_message_from_result": "agentfsm.engine._history",
        "RecordedError": "agentfsm.engine._errors",
        "is_context_overflow": "agentfsm.engine._errors",
        "policy_name": "agentfsm.engine._policy_check",
    },
    "agentfsm.policies": {
        "prune_marker": "agentfsm.policies._prune",
        "build_evidence": "agentfsm.policies._redirect",
        "parse_directions": "agentfsm.policies._redirect",
        "parse_text_tool_calls": "agentfsm.policies._text_tools",
        "resolve_verify_command": "agentfsm.policies._verify",
        "WRAP_UP_REMINDER": "agentfsm.policies._limits",
        "TOOL_RESULT_BUDGET_CHARS": "agentfsm.policies._prune",
        "ReadOnlyTools": "agentfsm.policies._verifier",
        "as_condition": "agentfsm.policies._stop",
        "max_turns": "agentfsm.policies._limits",
    },
    "agentfsm.adapters.providers": {
        "is_overflow_message": "agentfsm.adapters.providers._errors",
        "RETRYABLE_KINDS": "agentfsm.adapters.providers._errors",
    },
    "agentfsm.adapters.tools": {
        "truncate_for_model": "agentfsm.adapters.tools._truncate",
        "read_settings_file": "agentfsm.adapters.tools._settings",
    },
    "agentfsm.adapters.sessions": {
        "answer_open_tool_calls": "agentfsm.adapters.sessions._reader",
        "drop_trailing_user_messages": "agentfsm.adapters.sessions._reader",
        "iter_session_records": "agentfsm.adapters.sessions._lines",
        "state_home": "agentfsm.adapters.sessions._location",
    },
    "agentfsm.adapters.durable": {
        "QUEUE_NAME": "agentfsm.adapters.durable._queue",
        "UNFINISHED": "agentfsm.adapters.durable._workflow",
        "WORKFLOW_NAME": "agentfsm.adapters.durable._workflow",
        "executor_slot": "agentfsm.adapters.durable._worker",
        "declare_queue": "agentfsm.adapters.durable._queue",
        "parse_rate": "agentfsm.adapters.durable._queue",
        "spec_of": "agentfsm.adapters.durable._workflow",
        "durable_run": "agentfsm.adapters.durable._workflow",
    },
    "agentfsm.sandbox": {
        "scrubbed_environ": "agentfsm.sandbox._process",
        "sandbox_environ": "agentfsm.sandbox._process",
        "PROTECTED_DIR": "agentfsm.sandbox._bubblewrap",
    },
}
"""Per public package, a name it no longer exports -> the private module that holds it."""

MOVED_MODULES: dict[str, str] = {
    "agentfsm.runtime": "agentfsm.agent",
    "agentfsm.engine.compaction": "agentfsm.engine._compression",
    "agentfsm.engine.process": "agentfsm.sandbox._process",
    "agentfsm.engine.sandbox": "agentfsm.sandbox._bubblewrap",
    "agentfsm.adapters.tools.sandbox": "agentfsm.sandbox",
}
"""Old module path -> the module now behind it, for paths that moved to another package.
Every other old path is the same path with the private (underscored) module name."""


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new``."""
    _warn(f"{old} is deprecated; use {new}", stacklevel + 1)


def _warn(message: str, stacklevel: int) -> None:
    import warnings  # not at import: ``import agentfsm`` stays light

    warnings.warn(message, AgentfsmDeprecationWarning, stacklevel=stacklevel)


def _resolve(dotted: str) -> object:
    from importlib import import_module

    module, _, name = dotted.rpartition(".")
    return getattr(import_module(module), name)


def package_getattr(package: str) -> Callable[[str], object]:
    """The module ``__getattr__`` of a public package (or of the private module behind an old
    module path, named by that path): serves its deprecated names."""

    def __getattr__(name: str) -> object:
        old = f"{package}.{name}"
        if old in RENAMED:
            warn_renamed(old, RENAMED[old])
            return _resolve(RENAMED[old])
        module = INTERNAL.get(package, {}).get(name)
        if module is not None:
            _warn(f"{old} is deprecated: it is internal to agentfsm now (see CHANGELOG)", 3)
            return _resolve(f"{module}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def _private_path(fullname: str) -> str | None:
    """The module an old public path ``fullname`` now is, or None when it is not one."""
    if fullname in MOVED_MODULES:
        return MOVED_MODULES[fullname]
    from importlib.machinery import PathFinder

    parts = fullname.split(".")
    found = "agentfsm"
    renamed = False
    for part in parts[1:]:
        parent = sys.modules.get(found)
        path = getattr(parent, "__path__", None)
        if path is None:
            return None
        if PathFinder.find_spec(f"{found}.{part}", path) is not None:
            found = f"{found}.{part}"
        elif not part.startswith("_") and PathFinder.find_spec(f"{found}._{part}", path):
            found, renamed = f"{found}._{part}", True
        else:
            return None
        if found not in sys.modules and part != parts[-1]:
            __import__(found)
    return found if renamed else None


class _OldModulePaths:
    """An import finder: an old module path loads the private module behind it.

    One instance sits at the end of ``sys.meta_path`` (a last resort: only paths nothing else
    finds); one at the front catches submodules of an old package path
    (``agentfsm.conformance.checks.wire``), which would otherwise load a second copy.
    """

    def __init__(self, *, front: bool) -> None:
        self.front = front

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> ModuleSpec | None:
        if not fullname.startswith("agentfsm."):
            return None
        if self.front:
            parent = sys.modules.get(fullname.rpartition(".")[0])
            if parent is None or parent.__name__ == fullname.rpartition(".")[0]:
                return None
        if _private_path(fullname) is None:
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(fullname, self)  # type: ignore[arg-type]

    def create_module(self, spec: ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        from importlib import import_module

        new = _private_path(module.__name__)
        assert new is not None
        public = new.split("._")[0]
        warn_renamed(f"the module {module.__name__}", f"{public} (its module is private now)")
        # The import system returns what sys.modules holds under the old name at the end.
        sys.modules[module.__name__] = import_module(new)


def install_module_aliases() -> None:
    """Let old module paths import (once per process)."""
    if not any(isinstance(finder, _OldModulePaths) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OldModulePaths(front=True))
        sys.meta_path.append(_OldModulePaths(front=False))
