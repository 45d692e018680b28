"""Chat providers over their real wire protocols (httpx + httpx-sse, no provider SDKs)."""

from ._responses import OpenAIResponses
from ._responses_wire import ResponsesQuirks
from .anthropic import AnthropicChat
from .anthropic_wire import AnthropicQuirks
from .endpoints import endpoint_url
from .errors import RETRYABLE_KINDS, ErrorKind, ProviderError, is_overflow_message
from .http_adapter import default_http_client
from .keys import Secret
from .limits import Limits
from .log_filter import SecretsFilter
from .openai_chat import OpenAIChat
from .openai_wire import OpenAIQuirks
from .replay import ReplayTransport, WireFixture, load_wire_fixture
from .retry import RetryPolicy
from .router import Router
from .transport import Timeouts

__all__ = [
    "AnthropicChat",
    "AnthropicQuirks",
    "ErrorKind",
    "Limits",
    "OpenAIChat",
    "OpenAIQuirks",
    "OpenAIResponses",
    "ProviderError",
    "RETRYABLE_KINDS",
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
    "is_overflow_message",
    "load_wire_fixture",
]
