"""Chat providers over their real wire protocols (httpx + httpx-sse, no provider SDKs)."""

from ._anthropic import AnthropicChat
from ._anthropic_wire import AnthropicQuirks
from ._endpoints import endpoint_url
from ._errors import ErrorKind, ProviderError
from ._finish import FINISH_REASONS
from ._http_adapter import default_http_client
from ._keys import Secret
from ._limits import Limits
from ._local import (
    LOCAL_CONTEXT_TOKENS,
    LOCAL_MODEL_NAME,
    LOCAL_QUIRKS,
    LocalModel,
    LocalModelUnavailable,
)
from ._log_filter import SecretsFilter
from ._openai_chat import OpenAIChat
from ._openai_wire import OpenAIQuirks
from ._replay import ReplayTransport, WireFixture, load_wire_fixture
from ._responses import OpenAIResponses
from ._responses_wire import ResponsesQuirks
from ._retry import RetryPolicy
from ._router import Router
from ._transport import Timeouts

__all__ = [
    "AnthropicChat",
    "AnthropicQuirks",
    "ErrorKind",
    "FINISH_REASONS",
    "LOCAL_CONTEXT_TOKENS",
    "LOCAL_MODEL_NAME",
    "LOCAL_QUIRKS",
    "Limits",
    "LocalModel",
    "LocalModelUnavailable",
    "OpenAIChat",
    "OpenAIQuirks",
    "OpenAIResponses",
    "ProviderError",
    "ReplayTransport",
    "ResponsesQuirks",
    "RetryPolicy",
    "Router",
    "Secret",
    "SecretsFilter",
    "Timeouts",
    "WireFixture",
    "default_http_client",
    "endpoint_url",
    "load_wire_fixture",
]
