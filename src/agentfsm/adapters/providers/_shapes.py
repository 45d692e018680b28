"""Reading untrusted JSON: type checks, bounded accumulation, and the guard that turns any
surprise in a reply into a ``ProviderError`` of a documented kind."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from ._errors import ProviderError
from ._limits import BadShape, TooLarge
from ._transport import TransportContext, bad_response, too_large

__all__ = ["Buffer", "as_dict", "opt_dict", "opt_list", "opt_str", "shape_guard"]


def _kind(value: Any) -> str:
    return type(value).__name__


def as_dict(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else :class:`BadShape`."""
    if not isinstance(value, Mapping):
        raise BadShape(f"`{where}` is a {_kind(value)}, expected an object")
    return value


def opt_dict(value: Any, where: str) -> Mapping[str, Any]:
    """A JSON object, or ``{}`` for ``null``/absent (and falsy values such as ``""``)."""
    if value is None or (not value and not isinstance(value, Mapping)):
        return {}
    return as_dict(value, where)


def opt_list(value: Any, where: str) -> list[Any]:
    """A JSON array, or ``[]`` for ``null``/absent."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadShape(f"`{where}` is a {_kind(value)}, expected an array")
    return value


def opt_str(value: Any, where: str) -> str | None:
    """A string, or ``None`` for ``null``/absent."""
    if value is None or isinstance(value, str):
        return value
    raise BadShape(f"`{where}` is a {_kind(value)}, expected a string")


class Buffer:
    """Text accumulated from many small deltas: UTF-8 in one ``bytearray`` (no per-piece
    overhead), with a shared byte budget so a stream cannot grow memory without end."""

    def __init__(self, budget: list[int] | None = None, *, limit: str = "max_body_bytes") -> None:
        self._data = bytearray()
        self._budget = budget
        self._limit = limit

    def append(self, piece: str) -> None:
        data = piece.encode("utf-8", errors="surrogatepass")
        if self._budget is not None:
            self._budget[0] -= len(data)
            if self._budget[0] < 0:
                raise TooLarge(self._limit, "the reply's text and arguments exceed the size bound")
        self._data += data

    def text(self) -> str:
        return self._data.decode("utf-8", errors="surrogatepass")

    def __len__(self) -> int:
        return len(self._data)

    def __bool__(self) -> bool:
        return bool(self._data)


_UNEXPECTED = (
    TypeError,
    AttributeError,
    ValueError,
    KeyError,
    IndexError,
    RecursionError,
    OverflowError,
    UnicodeError,
)


@contextlib.contextmanager
def shape_guard(
    ctx: TransportContext,
    *,
    status: int | None = None,
    in_stream: bool = False,
    started: bool = False,
) -> Iterator[None]:
    """Map what reading a reply may raise to ``bad_response`` / ``too_large`` errors."""
    try:
        yield
    except ProviderError:
        raise
    except TooLarge as exc:
        raise too_large(ctx, exc, status=status, in_stream=in_stream, started=started) from None
    except BadShape as exc:
        raise bad_response(
            ctx,
            str(exc),
            status=status,
            code=exc.code,
            limit=exc.limit,
            in_stream=in_stream,
            started=started,
        ) from None
    except _UNEXPECTED as exc:
        raise bad_response(
            ctx,
            f"the reply does not have the expected shape ({type(exc).__name__})",
            status=status,
            in_stream=in_stream,
            started=started,
        ) from None
