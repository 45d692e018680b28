"""One run's telemetry: the ``invoke_agent`` span, the chat and tool wrappers that open
``chat {model}`` and ``execute_tool {name}`` spans around each call, and the run's events
(compression, policy decisions) as span events."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as ga
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from agentfsm.engine import (
    AgentEmitter,
    AgentEvent,
    ChatFn,
    ChatResult,
    DeltaHandler,
    LlmEndEvent,
    LoopOutcome,
    Message,
    SupportsAbort,
    ToolCall,
    ToolCallEndEvent,
    ToolResult,
    ToolRunner,
    ToolSpec,
)

from . import _content as content
from ._attributes import (
    CHAT,
    EXECUTE_TOOL,
    INVOKE_AGENT,
    STOPPED_REASON,
    TOOL_CALLS,
    TOOL_CANCELLED,
    TOOL_OK,
    TOOL_TRUNCATED,
    TURNS,
    AttributeValue,
    error_type,
)
from ._span_events import span_event_for

if TYPE_CHECKING:
    from ._instrumentation import Instrumentation

__all__ = ["RunTelemetry", "TracedChat", "TracedTools", "describe_chat"]

Attributes = dict[str, AttributeValue]


def describe_chat(chat: object) -> tuple[str | None, str | None]:
    """``(provider name, model)`` of a chat function, from its ``provider_name`` and
    ``model`` attributes (a router's: its first provider's)."""
    providers = getattr(chat, "providers", None)
    if isinstance(providers, tuple) and providers and not hasattr(chat, "model"):
        chat = providers[0]
    provider = getattr(chat, "provider_name", None)
    model = getattr(chat, "model", None)
    return (
        provider if isinstance(provider, str) else None,
        model if isinstance(model, str) else None,
    )


def _usage_attributes(result: ChatResult) -> Attributes:
    usage = result.usage
    if usage is None:
        return {}
    attributes: Attributes = {
        ga.GEN_AI_USAGE_INPUT_TOKENS: usage.input_tokens,
        ga.GEN_AI_USAGE_OUTPUT_TOKENS: usage.output_tokens,
    }
    if usage.cache_read_tokens:
        attributes[ga.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        attributes[ga.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_write_tokens
    if usage.reasoning_tokens:
        attributes[ga.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning_tokens
    return attributes


def _fail(span: Span | None, error: BaseException) -> str:
    kind = error_type(error)
    if span is not None:
        span.set_attribute(ERROR_TYPE, kind)
        span.set_status(Status(StatusCode.ERROR, kind))
    return kind


class RunTelemetry:
    """The spans and metrics of one run (made by :meth:`Instrumentation.start_run`)."""

    def __init__(
        self,
        instrumentation: Instrumentation,
        chat: ChatFn,
        emitter: AgentEmitter,
        *,
        conversation_id: str | None,
        tracing: bool,
    ) -> None:
        self.instrumentation = instrumentation
        self.capture = instrumentation.capture_content
        self.tracing = tracing
        self.provider, self.model = describe_chat(chat)
        self.conversation_id = conversation_id
        self.span: Span | None = None
        self.turns = 0
        self.tool_calls = 0
        self._final: ChatResult | None = None
        emitter.on("*", self._on_event)

    # -- wrappers -----------------------------------------------------------------------

    def wrap_chat(self, chat: ChatFn) -> ChatFn:
        """``chat``, with a ``chat`` span and metrics around each call."""
        return TracedChat(chat, self)

    def wrap_tools(self, tools: ToolRunner | None) -> ToolRunner | None:
        """``tools``, with an ``execute_tool`` span around each call."""
        return None if tools is None else TracedTools(tools, self)

    def start_span(
        self, name: str, kind: SpanKind, attributes: Attributes
    ) -> tuple[Span | None, Any]:
        """A span, child of the current one (or of the run's, when the call runs where the
        run's context is not current), and its ``use_span`` context; ``(None, None)`` when
        not tracing."""
        if not self.tracing:
            return None, None
        parent = None
        if not trace.get_current_span().get_span_context().is_valid and self.span is not None:
            parent = trace.set_span_in_context(self.span)
        span = self.instrumentation.tracer.start_span(
            name, context=parent, kind=kind, attributes=attributes
        )
        return span, trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        )

    # -- the run ------------------------------------------------------------------------

    async def run(self, body: Callable[[], Awaitable[LoopOutcome]]) -> LoopOutcome:
        """Await ``body`` (the run) inside the ``invoke_agent`` span."""
        instrumentation = self.instrumentation
        name = instrumentation.agent_name
        attributes: Attributes = {
            ga.GEN_AI_OPERATION_NAME: INVOKE_AGENT,
            ga.GEN_AI_AGENT_NAME: name,
        }
        if self.provider is not None:
            attributes[ga.GEN_AI_PROVIDER_NAME] = self.provider
        if self.model is not None:
            attributes[ga.GEN_AI_REQUEST_MODEL] = self.model
        if self.conversation_id is not None:
            attributes[ga.GEN_AI_CONVERSATION_ID] = self.conversation_id
        metric: Attributes = {ga.GEN_AI_OPERATION_NAME: INVOKE_AGENT, ga.GEN_AI_AGENT_NAME: name}
        if not self.tracing:
            try:
                outcome = await body()
            except BaseException as error:
                metric[ERROR_TYPE] = error_type(error)
                self._record_run(metric)
                raise
            metric[STOPPED_REASON] = outcome.stopped_reason
            self._record_run(metric)
            return outcome
        span = instrumentation.tracer.start_span(
            f"{INVOKE_AGENT} {name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        self.span = span
        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            try:
                outcome = await body()
            except BaseException as error:
                metric[ERROR_TYPE] = _fail(span, error)
                span.set_attributes({TURNS: self.turns, TOOL_CALLS: self.tool_calls})
                self._record_run(metric)
                raise
            self.turns = outcome.turns_used
            span.set_attributes(
                {
                    STOPPED_REASON: outcome.stopped_reason,
                    TURNS: outcome.turns_used,
                    TOOL_CALLS: self.tool_calls,
                    ga.GEN_AI_USAGE_INPUT_TOKENS: outcome.usage.input_tokens,
                    ga.GEN_AI_USAGE_OUTPUT_TOKENS: outcome.usage.output_tokens,
                }
            )
            if self.capture and outcome.result is not None:
                span.set_attribute(
                    ga.GEN_AI_OUTPUT_MESSAGES, content.output_messages(outcome.result)
                )
            metric[STOPPED_REASON] = outcome.stopped_reason
            self._record_run(metric)
            return outcome

    def _record_run(self, attributes: Attributes) -> None:
        self.instrumentation.turns.record(self.turns, attributes)
        self.instrumentation.tool_calls.record(self.tool_calls, attributes)

    def _on_event(self, event: AgentEvent) -> None:
        if isinstance(event, LlmEndEvent):
            self.turns += 1
        elif isinstance(event, ToolCallEndEvent):
            if not event.cancelled:
                self.tool_calls += 1
        elif self.span is not None:
            found = span_event_for(event, self.capture)
            if found is not None:
                self.span.add_event(*found)

    # -- calls --------------------------------------------------------------------------

    def chat_attributes(
        self, chat: object, temperature: float | None, max_tokens: int | None
    ) -> Attributes:
        provider, model = describe_chat(chat)
        attributes: Attributes = {ga.GEN_AI_OPERATION_NAME: CHAT}
        if provider is not None:
            attributes[ga.GEN_AI_PROVIDER_NAME] = provider
        if model is not None:
            attributes[ga.GEN_AI_REQUEST_MODEL] = model
        if temperature is not None:
            attributes[ga.GEN_AI_REQUEST_TEMPERATURE] = temperature
        if max_tokens is not None:
            attributes[ga.GEN_AI_REQUEST_MAX_TOKENS] = max_tokens
        return attributes

    def chat_done(
        self,
        span: Span | None,
        metric: Attributes,
        started: float,
        result: ChatResult | None,
        error: BaseException | None,
    ) -> None:
        """Fill the chat span from the reply (or the error) and record the metrics."""
        instrumentation = self.instrumentation
        if error is not None:
            metric[ERROR_TYPE] = _fail(span, error)
        elif result is not None:
            if result.model:
                metric[ga.GEN_AI_RESPONSE_MODEL] = result.model
            if span is not None:
                attributes = _usage_attributes(result)
                if result.model:
                    attributes[ga.GEN_AI_RESPONSE_MODEL] = result.model
                if result.response_id:
                    attributes[ga.GEN_AI_RESPONSE_ID] = result.response_id
                if result.finish_reason:
                    attributes[ga.GEN_AI_RESPONSE_FINISH_REASONS] = (result.finish_reason,)
                if self.capture:
                    attributes[ga.GEN_AI_OUTPUT_MESSAGES] = content.output_messages(result)
                span.set_attributes(attributes)
            usage = result.usage
            if usage is not None:
                token_type = ga.GEN_AI_TOKEN_TYPE
                instrumentation.token_usage.record(
                    usage.input_tokens, {**metric, token_type: "input"}
                )
                instrumentation.token_usage.record(
                    usage.output_tokens, {**metric, token_type: "output"}
                )
        instrumentation.duration.record(time.perf_counter() - started, metric)


class TracedChat:
    """A chat function whose calls are ``chat`` spans (current while the call runs, so the
    provider's retries and failovers land on them as events)."""

    def __init__(self, inner: ChatFn, run: RunTelemetry) -> None:
        self._inner = inner
        self._run = run

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"TracedChat({self._inner!r})"

    async def __call__(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        signal: SupportsAbort | None = None,
        on_delta: DeltaHandler | None = None,
    ) -> ChatResult:
        run, inner = self._run, self._inner
        attributes = run.chat_attributes(inner, temperature, max_tokens)
        metric = {
            k: v
            for k, v in attributes.items()
            if k in (ga.GEN_AI_OPERATION_NAME, ga.GEN_AI_PROVIDER_NAME, ga.GEN_AI_REQUEST_MODEL)
        }
        if run.tracing and run.capture:
            attributes[ga.GEN_AI_INPUT_MESSAGES] = content.input_messages(messages)
            system = content.system_instructions(messages)
            if system is not None:
                attributes[ga.GEN_AI_SYSTEM_INSTRUCTIONS] = system
            if tools:
                attributes[ga.GEN_AI_TOOL_DEFINITIONS] = content.tool_definitions(tools)
        model = attributes.get(ga.GEN_AI_REQUEST_MODEL)
        name = f"{CHAT} {model}" if model else CHAT
        span, use = run.start_span(name, SpanKind.CLIENT, attributes)
        started = time.perf_counter()
        if use is None:
            return await self._call(
                messages, tools, temperature, max_tokens, signal, on_delta, span, metric, started
            )
        with use:
            return await self._call(
                messages, tools, temperature, max_tokens, signal, on_delta, span, metric, started
            )

    async def _call(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        temperature: float | None,
        max_tokens: int | None,
        signal: SupportsAbort | None,
        on_delta: DeltaHandler | None,
        span: Span | None,
        metric: Attributes,
        started: float,
    ) -> ChatResult:
        try:
            result = await self._inner(
                messages,
                tools,
                temperature=temperature,
                max_tokens=max_tokens,
                signal=signal,
                on_delta=on_delta,
            )
        except BaseException as error:
            self._run.chat_done(span, metric, started, None, error)
            raise
        self._run.chat_done(
            span, metric, started, result if isinstance(result, ChatResult) else None, None
        )
        return result


class TracedTools:
    """A tool runner whose calls are ``execute_tool`` spans (a concurrent batch: siblings)."""

    def __init__(self, inner: ToolRunner, run: RunTelemetry) -> None:
        self._inner = inner
        self._run = run

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"TracedTools({self._inner!r})"

    def specs(self) -> Sequence[ToolSpec]:
        return self._inner.specs()

    async def run(self, call: ToolCall, *, signal: SupportsAbort | None = None) -> ToolResult:
        run = self._run
        if not run.tracing:
            return await self._inner.run(call, signal=signal)
        attributes: Attributes = {
            ga.GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
            ga.GEN_AI_TOOL_NAME: call.name,
            ga.GEN_AI_TOOL_CALL_ID: call.id,
            ga.GEN_AI_TOOL_TYPE: "function",
        }
        if run.capture:
            attributes[ga.GEN_AI_TOOL_CALL_ARGUMENTS] = content.to_json(call.arguments)
        span, use = run.start_span(f"{EXECUTE_TOOL} {call.name}", SpanKind.INTERNAL, attributes)
        assert span is not None
        with use:
            try:
                result = await self._inner.run(call, signal=signal)
            except BaseException as error:
                kind = _fail(span, error)
                span.set_attributes({TOOL_OK: False, TOOL_CANCELLED: kind == "cancelled"})
                raise
            if isinstance(result, ToolResult):
                done: Mapping[str, AttributeValue] = {
                    TOOL_OK: result.ok,
                    TOOL_TRUNCATED: result.display_output is not None,
                    TOOL_CANCELLED: False,
                }
                span.set_attributes(done)
                if not result.ok:
                    span.set_attribute(ERROR_TYPE, "tool_error")
                    span.set_status(Status(StatusCode.ERROR, "tool_error"))
                if run.capture:
                    span.set_attribute(
                        ga.GEN_AI_TOOL_CALL_RESULT,
                        result.output if result.ok else (result.error or result.output),
                    )
            return result
