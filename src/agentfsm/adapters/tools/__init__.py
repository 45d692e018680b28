"""Tools: Python functions as tools, the workspace tools, batching and MCP servers."""

from agentfsm.engine.batching import plan_tool_batches
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, detect_sandbox
from agentfsm.sandbox.process import CommandSandbox, SandboxUnavailable, Unsandboxed

from .builtin import WorkspaceTools, workspace_tools
from .fs import PathRefused, SafeRoot
from .mcp import McpConnectionError, McpServer, McpTools
from .settings import (
    SandboxSettings,
    Settings,
    SettingsError,
    load_settings,
    parse_settings,
    read_settings_file,
)
from .toolbox import FunctionTool, ToolBox, tool
from .truncate import OutputStore, truncate_for_model
from .workspace import OutsideWorkspace, PermissionRule, Permissions, Workspace

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
    "read_settings_file",
    "tool",
    "truncate_for_model",
    "workspace_tools",
]
