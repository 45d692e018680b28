"""API keys kept out of reprs, tracebacks and logs.

An adapter keeps its key as a :class:`Secret`: its ``repr`` and ``str`` hide it, and it
holds only the key's bytes XOR a random pad, so neither ``repr()`` nor ``vars()`` of the
adapter (or of anything holding it) shows the key, whatever an error reporter prints of a
traceback's locals. The key is revealed in one place only: :class:`KeyAuth` sets the header
on a request as it is sent, as a bytes value whose ``repr`` hides it, and takes it off the
request once the response headers arrived or the send failed, so no frame of the call path
(the request, its headers, the response's request) holds it afterwards.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import AsyncGenerator, Generator, Iterable
from typing import NoReturn

import httpx

__all__ = ["SENSITIVE_HEADERS", "KeyAuth", "KeyRefused", "Secret", "registered_secrets"]

SENSITIVE_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key"}
)
"""Header names whose values an adapter treats as keys (given as ``api_key`` or among its
extra ``headers``): sent through :class:`KeyAuth`, scrubbed from errors and logs."""

_REGISTERED: weakref.WeakSet[Secret] = weakref.WeakSet()


class Secret:
    """A key whose ``repr`` and ``str`` hide it; :meth:`reveal` gives it back.

    It stores the key's bytes XOR a random pad of the same length (never the key itself),
    refuses to be pickled, and is its own copy.
    """

    __slots__ = ("__weakref__", "_masked", "_pad")

    def __init__(self, value: str) -> None:
        data = value.encode("utf-8", "surrogatepass")
        self._pad = os.urandom(len(data))
        self._masked = bytes(a ^ b for a, b in zip(data, self._pad, strict=True))

    def reveal(self) -> str:
        """The key itself (use it at once; never keep it in a variable)."""
        data = bytes(a ^ b for a, b in zip(self._masked, self._pad, strict=True))
        return data.decode("utf-8", "surrogatepass")

    def __len__(self) -> int:
        return len(self._masked)

    def __bool__(self) -> bool:
        return bool(self._masked)

    def __repr__(self) -> str:
        return "Secret('[hidden]')"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret is not pickled (it would write the key out)")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: object) -> Secret:
        return self


def register(secret: Secret) -> None:
    """Have the log filter redact ``secret`` while it is alive."""
    _REGISTERED.add(secret)


def registered_secrets() -> tuple[Secret, ...]:
    """The keys of every live adapter (what :class:`SecretsFilter` redacts)."""
    return tuple(_REGISTERED)


def _header_safe(value: str) -> bool:
    return all(ch == "\t" or " " <= ch <= "~" for ch in value)


class KeyRefused(Exception):
    """A key holds characters an HTTP header cannot carry (only printable ASCII can go);
    the message names the header, never the key."""

    def __init__(self, header: str) -> None:
        super().__init__(
            f"the key for the {header} header holds characters an HTTP header cannot carry "
            "(only printable ASCII)"
        )
        self.header = header


class _HiddenBytes(bytes):
    """A header value whose ``repr`` hides it (httpcore keeps it in the request it sent)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "b'[hidden]'"

    __str__ = __repr__


class KeyAuth(httpx.Auth):
    """Sets the key headers on each request as it is sent, and takes them off again.

    ``headers``: (name, prefix, secret) for each header, e.g. ``("authorization", "Bearer
    ", key)``. Its ``repr`` names the headers only.
    """

    def __init__(self, headers: Iterable[tuple[str, str, Secret]]) -> None:
        self._headers = tuple(headers)

    def __repr__(self) -> str:
        return f"KeyAuth({[name for name, _, _ in self._headers]!r})"

    def _put(self, request: httpx.Request) -> None:
        for name, _, secret in self._headers:
            if not _header_safe(secret.reveal()):
                raise KeyRefused(name)
        request.headers.update(
            {
                name.encode("ascii"): _HiddenBytes(
                    prefix.encode("ascii") + secret.reveal().encode("ascii")
                )
                for name, prefix, secret in self._headers
            }
        )

    def _take(self, request: httpx.Request) -> None:
        for name, _, _ in self._headers:
            request.headers.pop(name, None)

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        """The key on ``request`` while it is sent, off it once the response arrived."""
        self._put(request)
        try:
            yield request
        finally:
            self._take(request)

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """The key on ``request`` while it is sent, off it once the response arrived."""
        self._put(request)
        try:
            yield request
        finally:
            self._take(request)
