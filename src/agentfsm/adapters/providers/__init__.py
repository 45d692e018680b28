"""Chat providers over their real wire protocols (httpx + httpx-sse, no provider SDKs).

A name imported here as itself (``x as x``) and left out of ``__all__`` is offered to the
other agentfsm packages only: it is not public API.
"""

from ._anthropic import ANTHROPIC_VERSION as ANTHROPIC_VERSION
from ._anthropic import AnthropicChat
from ._anthropic_wire import AnthropicQuirks
from ._anthropic_wire import EventAccumulator as EventAccumulator
from ._anthropic_wire import parse_message as parse_message
from ._endpoints import WireName as WireName
from ._endpoints import endpoint_url
from ._errors import ErrorKind, ProviderError
from ._errors import classify_error_body as classify_error_body
from ._errors import is_overflow_message as is_overflow_message
from ._errors import redact as redact
from ._finish import FINISH_REASONS
from ._finish import normalize_finish as normalize_finish
from ._http_adapter import default_http_client
from ._keys import Secret
from ._keys import registered_secrets as registered_secrets
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
from ._openai_wire import StreamAccumulator as StreamAccumulator
from ._openai_wire import parse_completion as parse_completion
from ._profiles import QuirkProfile as QuirkProfile
from ._profiles import QuirkValue as QuirkValue
from ._profiles import all_quirk_names as all_quirk_names
from ._profiles import changed_quirks as changed_quirks
from ._profiles import parse_quirk as parse_quirk
from ._profiles import quirk_names as quirk_names
from ._profiles import quirk_profile as quirk_profile
from ._replay import RecordedResponse as RecordedResponse
from ._replay import ReplayTransport, WireFixture, load_wire_fixture
from ._replay import fixture_body as fixture_body
from ._replay import fixture_wire as fixture_wire
from ._replay import path_wire as path_wire
from ._responses import OpenAIResponses
from ._responses_wire import ResponseAccumulator as ResponseAccumulator
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
