"""Tools: Python functions as tools, the workspace tools, batching and MCP servers."""

from agentfsm.engine._batching import plan_tool_batches
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, detect_sandbox
from agentfsm.sandbox._process import CommandSandbox, SandboxUnavailable, Unsandboxed

from ._builtin import WorkspaceTools, workspace_tools
from ._fs import PathRefused, SafeRoot
from ._mcp import McpConnectionError, McpServer, McpTools
from ._settings import (
    SandboxSettings,
    Settings,
    SettingsError,
    load_settings,
    parse_settings,
)
from ._toolbox import FunctionTool, ToolBox, tool
from ._truncate import OutputStore
from ._workspace import OutsideWorkspace, PermissionRule, Permissions, Workspace

__all__ = [
    "BubblewrapSandbox",
    "CommandSandbox",
    "FunctionTool",
    "McpConnectionError",
    "McpServer",
    "McpTools",
    "OutputStore",
    "OutsideWorkspace",
    "PathRefused",
    "PermissionRule",
    "Permissions",
    "ResourceLimits",
    "SafeRoot",
    "SandboxSettings",
    "SandboxUnavailable",
    "Settings",
    "SettingsError",
    "ToolBox",
    "Unsandboxed",
    "Workspace",
    "WorkspaceTools",
    "detect_sandbox",
    "load_settings",
    "parse_settings",
    "plan_tool_batches",
    "tool",
    "workspace_tools",
]
