"""``ToolBox``: tools from Python functions, validated before they run.

Schemas come from type hints through pydantic (``create_model`` over the signature, then
``model_json_schema``): pydantic is the most used and best kept way to turn annotations into
JSON Schema and to validate against it with readable errors, so nothing here is hand-rolled.
Parameter descriptions come from Google, NumPy or reST docstrings (``docstring_parser``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, get_type_hints, overload

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from agentfsm.engine import (
    AbortError,
    SupportsAbort,
    ToolCall,
    ToolResult,
    ToolSpec,
    active_interrupter,
    cancel_on_abort,
    race_abort,
)

from ._truncate import DEFAULT_MODEL_OUTPUT_CHARS, OutputStore, cut_for_model

__all__ = [
    "FunctionTool",
    "ToolBox",
    "describe_validation_error",
    "fit_result",
    "run_in_daemon_thread",
    "tool",
]

ToolFunction = Callable[..., Any]
INJECTED = frozenset({"signal", "call"})
"""Parameters the ToolBox supplies itself; they are not part of the schema."""


async def run_in_daemon_thread(
    fn: Callable[..., Any], kwargs: Mapping[str, Any], *, name: str = "tool"
) -> Any:
    """``fn(**kwargs)`` in a new daemon thread, awaited. Cancelling the await abandons the
    thread (Python cannot stop it); being a daemon, it never keeps the process alive."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = context.run(fn, **kwargs)
        except BaseException as raised:
            error = raised
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await future


class FunctionTool:
    """A Python function as a tool: its spec, its argument model, and how to call it."""

    def __init__(
        self,
        fn: ToolFunction,
        *,
        name: str | None = None,
        description: str | None = None,
        concurrency_safe: bool = False,
        destructive: bool = False,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        doc = docstring_parser.parse(inspect.getdoc(fn) or "")
        summary = "\n\n".join(p for p in (doc.short_description, doc.long_description) if p)
        self.description = description if description is not None else summary
        param_docs = {p.arg_name: p.description or "" for p in doc.params}
        hints = get_type_hints(fn)
        fields: dict[str, Any] = {}
        self.injected: set[str] = set()
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {self.name!r}: *args and **kwargs cannot be described")
            if param.name in INJECTED:
                self.injected.add(param.name)
                continue
            annotation = hints.get(param.name, Any)
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (
                annotation,
                Field(default, description=param_docs.get(param.name) or None),
            )
        self.model: type[BaseModel] = create_model(
            f"{self.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        self.spec = ToolSpec(
            self.name,
            self.description,
            schema,
            concurrency_safe=concurrency_safe,
            destructive=destructive,
        )

    async def invoke(
        self,
        arguments: Mapping[str, Any],
        signal: SupportsAbort | None = None,
        call: ToolCall | None = None,
    ) -> Any:
        """Validate, then call (awaiting async functions; sync ones run in a daemon thread
        of their own, which an interrupted run abandons and which never holds the process
        open at exit).

        A function may declare ``signal`` (the run's abort signal) and ``call`` (the
        :class:`ToolCall`) parameters; they are supplied, not part of the schema.
        """
        validated = self.model.model_validate(dict(arguments))
        kwargs = {name: getattr(validated, name) for name in type(validated).model_fields}
        if "signal" in self.injected:
            kwargs["signal"] = signal
        if "call" in self.injected:
            kwargs["call"] = call
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**kwargs)
        value = await run_in_daemon_thread(self.fn, kwargs, name=f"tool:{self.name}")
        if inspect.isawaitable(value):
            value = await value
        return value

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r})"


@overload
def tool(fn: ToolFunction, /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    concurrency_safe: bool = False,
    destructive: bool = False,
) -> Callable[[ToolFunction], FunctionTool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    concurrency_safe: bool = False,
    destructive: bool = False,
) -> FunctionTool | Callable[[ToolFunction], FunctionTool]:
    """Make a function a tool: ``@tool`` or ``@tool(concurrency_safe=True)``.

    ``concurrency_safe`` tools only read and may run in parallel with each other;
    ``destructive`` tools change files or the world (a success counts as a mutation).
    """

    def wrap(function: ToolFunction) -> FunctionTool:
        return FunctionTool(
            function,
            name=name,
            description=description,
            concurrency_safe=concurrency_safe,
            destructive=destructive,
        )

    return wrap(fn) if fn is not None else wrap


class _Cancelled(Exception):
    pass


def describe_validation_error(tool_name: str, error: ValidationError) -> str:
    """A message that tells the model what to fix."""
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item.get("loc", ())) or "arguments"
        message = item.get("msg", "invalid")
        if item.get("type") == "extra_forbidden":
            message = "is not a parameter of this tool"
        elif item.get("type") != "missing" and "input" in item:
            message += f" (got {json.dumps(item['input'], default=str)[:80]})"
        problems.append(f"{where!r}: {message}")
    return f"invalid arguments for {tool_name}: " + "; ".join(problems)


def _describe(error: BaseException) -> str:
    """``Type: message``, even when the message itself fails."""
    try:
        text = str(error)
    except Exception:
        text = "(the error's message could not be read)"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def fit_result(result: ToolResult, limit: int, store: OutputStore | None) -> ToolResult:
    """``result`` with its output and error each cut to ``limit`` characters (head and
    tail around a marker); what was cut is kept in ``store`` for ``read_output``, and
    ``display_output`` carries the kept text for people."""
    if len(result.output) <= limit and (result.error is None or len(result.error) <= limit):
        return result
    output, stored = cut_for_model(result.output, limit, store)
    metadata = dict(result.metadata)
    if stored is not None:
        metadata["output_id"] = stored.id
    error = result.error
    if error is not None and len(error) > limit:
        error, stored_error = cut_for_model(error, limit, store)
        if stored_error is not None:
            metadata["error_id"] = stored_error.id
    display = result.display_output
    if stored is not None and store is not None:
        display = store.get(stored.id)
    elif display is not None and len(display) > limit:
        display = output
    return ToolResult(result.ok, output, error, metadata, display_output=display)


def _to_output(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult(True, "")
    if isinstance(value, str):
        return ToolResult(True, value)
    if isinstance(value, BaseModel):
        return ToolResult(True, value.model_dump_json())
    return ToolResult(True, json.dumps(value, ensure_ascii=False, default=str))


class ToolBox:
    """A :class:`~agentfsm.ToolRunner` made of Python functions.

    ``run`` never raises: unknown tools, malformed JSON, wrong or missing arguments and
    exceptions inside a tool all come back as ``ToolResult(ok=False)`` with an error that
    says what went wrong. Outputs longer than ``max_output_chars`` reach the model cut to
    head and tail; the full text is kept and the built-in ``read_output`` tool pages it.
    """

    def __init__(
        self,
        tools: Iterable[ToolFunction | FunctionTool] = (),
        *,
        max_output_chars: int = DEFAULT_MODEL_OUTPUT_CHARS,
        store: OutputStore | None = None,
    ) -> None:
        self.max_output_chars = max_output_chars
        self.store = store if store is not None else OutputStore()
        self._tools: dict[str, FunctionTool] = {}
        for item in tools:
            self.add(item)
        self.add(FunctionTool(self.read_output, concurrency_safe=True))

    def add(self, item: ToolFunction | FunctionTool) -> FunctionTool:
        """Register a function (or a :class:`FunctionTool`); names must be unique."""
        function_tool = item if isinstance(item, FunctionTool) else FunctionTool(item)
        if function_tool.name in self._tools:
            raise ValueError(f"a tool named {function_tool.name!r} is already registered")
        self._tools[function_tool.name] = function_tool
        return function_tool

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def specs(self) -> Sequence[ToolSpec]:
        return tuple(t.spec for t in self._tools.values())

    def read_output(self, id: str, offset: int = 0, limit: int = 8000) -> ToolResult:
        """Page through a tool output that was cut short.

        Args:
            id: The output id named in the cut marker.
            offset: The first character to return.
            limit: How many characters to return (at most the tool output limit).
        """
        text = self.store.get(id)
        if text is None:
            return ToolResult(False, "", f"no stored output {id[:100]!r} (it may have expired)")
        offset = min(max(0, offset), len(text))
        end = min(len(text), offset + min(max(1, limit), max(1, self.max_output_chars - 200)))
        more = f"; next: read_output(id={id!r}, offset={end})" if end < len(text) else ""
        return ToolResult(
            True,
            f"[output {id}: characters {offset}-{end} of {len(text)}{more}]\n{text[offset:end]}",
        )

    async def run(self, call: ToolCall, *, signal: SupportsAbort | None = None) -> ToolResult:
        function_tool = self._tools.get(call.name)
        if function_tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return ToolResult(
                False, "", f"unknown tool {call.name[:100]!r}; available tools: {known}"
            )
        if call.raw_arguments is not None:
            return ToolResult(
                False,
                "",
                f"the arguments for {call.name} were not valid JSON "
                f"({call.raw_arguments[:200]!r}); send a JSON object matching: "
                f"{json.dumps(function_tool.spec.parameters)[:600]}",
            )
        try:
            value = await self._until_aborted(
                function_tool.invoke(call.arguments, signal, call), signal
            )
        except _Cancelled:
            return ToolResult(False, "", "cancelled: the run was aborted")
        except ValidationError as error:
            return ToolResult(False, "", describe_validation_error(call.name, error))
        except asyncio.CancelledError:
            raise
        except Exception as error:
            return self._fit(ToolResult(False, "", _describe(error)), call.name)
        try:
            result = _to_output(value)
        except Exception as error:
            result = ToolResult(
                False, "", f"the tool's result could not be read: {_describe(error)}"
            )
        return self._fit(result, call.name)

    @staticmethod
    async def _until_aborted(work: Awaitable[Any], signal: SupportsAbort | None) -> Any:
        """Await ``work``; cancel it (killing what it started) when ``signal`` fires.

        With a signal that takes callbacks, the work runs in the calling task (no task per
        call): the abort cancels that task and the cancellation is turned back into
        ``_Cancelled`` here, unless one of the run's interruptible calls already wraps this
        one (the runner's, around a tool): that call ends it (the run records the call as
        interrupted either way)."""
        if signal is None:
            return await work
        interrupter = active_interrupter(signal)  # the run's: armed once, not per call
        if interrupter is not None and interrupter.depth:  # inside one of its calls
            return await work  # that one ends the work
        try:
            if interrupter is not None:
                return await interrupter.call(work, "cancelled")
            add_callback = getattr(signal, "add_callback", None)
            current = asyncio.current_task()
            if callable(add_callback) and current is not None:
                return await cancel_on_abort(work, add_callback, current, "cancelled")
            return await race_abort(work, signal, "cancelled")
        except AbortError:
            raise _Cancelled from None

    def _fit(self, result: ToolResult, name: str) -> ToolResult:
        return fit_result(
            result, self.max_output_chars, None if name == "read_output" else self.store
        )
