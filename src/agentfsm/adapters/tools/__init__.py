"""Tools: Python functions as tools, the workspace tools, batching and MCP servers."""

from agentfsm.engine.batching import plan_tool_batches
from agentfsm.engine.process import CommandSandbox, SandboxUnavailable, Unsandboxed

from .builtin import WorkspaceTools, workspace_tools
from .mcp import McpConnectionError, McpServer, McpTools
from .sandbox import BubblewrapSandbox, detect_sandbox
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
    "PermissionRule",
    "Permissions",
    "SandboxUnavailable",
    "ToolBox",
    "Unsandboxed",
    "Workspace",
    "WorkspaceTools",
    "detect_sandbox",
    "plan_tool_batches",
    "tool",
    "truncate_for_model",
    "workspace_tools",
]
