"""Tools: Python functions as tools, the workspace tools, batching and MCP servers."""

from agentfsm.engine.batching import plan_tool_batches

from .builtin import WorkspaceTools, workspace_tools
from .mcp import McpConnectionError, McpServer, McpTools
from .toolbox import FunctionTool, ToolBox, tool
from .truncate import OutputStore, truncate_for_model
from .workspace import OutsideWorkspace, PermissionRule, Permissions, Workspace

__all__ = [
    "FunctionTool",
    "McpConnectionError",
    "McpServer",
    "McpTools",
    "OutputStore",
    "OutsideWorkspace",
    "PermissionRule",
    "Permissions",
    "ToolBox",
    "Workspace",
    "WorkspaceTools",
    "plan_tool_batches",
    "tool",
    "truncate_for_model",
    "workspace_tools",
]
