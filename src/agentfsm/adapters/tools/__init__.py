"""Tools: Python functions as tools, the workspace tools, batching and MCP servers.

The OS sandbox the ``shell`` tool runs in (``detect_sandbox``, ``BubblewrapSandbox``,
``Unsandboxed`` …) is :mod:`agentfsm.sandbox`'s.

A name imported here as itself (``x as x``) and left out of ``__all__`` is offered to the
other agentfsm packages only: it is not public API.
"""

from agentfsm.engine import plan_tool_batches

from ._builtin import WorkspaceTools, workspace_tools
from ._fs import PathRefused, SafeRoot
from ._fs import open_regular as open_regular
from ._fs import open_subdir as open_subdir
from ._fs import read_capped as read_capped
from ._globs import segment_regex as segment_regex
from ._mcp import McpConnectionError, McpServer, McpTools
from ._settings import MAX_SETTINGS_BYTES as MAX_SETTINGS_BYTES
from ._settings import (
    SandboxSettings,
    Settings,
    SettingsError,
    load_settings,
    parse_settings,
)
from ._settings import read_settings_file as read_settings_file
from ._toolbox import FunctionTool, ToolBox, tool
from ._toolbox import run_in_daemon_thread as run_in_daemon_thread
from ._truncate import OutputStore
from ._workspace import SETTINGS_FILE as SETTINGS_FILE
from ._workspace import OutsideWorkspace, PermissionRule, Permissions, Workspace

__all__ = [
    "FunctionTool",
    "McpConnectionError",
    "McpServer",
    "McpTools",
    "OutputStore",
    "OutsideWorkspace",
    "PathRefused",
    "PermissionRule",
    "Permissions",
    "SafeRoot",
    "SandboxSettings",
    "Settings",
    "SettingsError",
    "ToolBox",
    "Workspace",
    "WorkspaceTools",
    "load_settings",
    "parse_settings",
    "plan_tool_batches",
    "tool",
    "workspace_tools",
]
