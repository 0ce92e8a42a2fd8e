"""Outbound HTTP from a Python tool, through ``wasi:http``.

CPython's own clients (``urllib``, ``http.client``, ``requests``) open
sockets, and the Longhand host refuses every socket: the one door out of the
sandbox is ``wasi:http/outgoing-handler``, where the host checks the
operator's host grants, adds secrets the tool never sees, and records the
request in the call's receipt. :func:`fetch` is that door, synchronous::

    from longhand_tool import http

    response = http.fetch("https://api.example.com/v1/items?q=x")
    items = response.json()

A host that is not granted raises :class:`longhand_tool.AccessDenied` (the
model sees ``access-denied`` naming the host); other transport failures
raise :class:`HttpError`, which becomes ``failed``. Any status is a
response, not an error.

The bindings are imported when this module is, not when :func:`fetch`
runs: componentize-py keeps only the modules imported while it builds the
component (a component has no files to import from later), so a tool
imports ``longhand_tool.http`` at its top. In plain CPython, where a tool's
unit tests run, the import succeeds and :func:`fetch` raises
:class:`HttpError` (tests replace it).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping
from urllib.parse import urlsplit

from . import AccessDenied

try:
    from componentize_py_types import Err as _Err
    from wit_world.imports import outgoing_handler as _handler
    from wit_world.imports import wasi_http_types as _t
except ImportError:  # plain CPython: no component around us
    _Err = _handler = _t = None

__all__ = ["HttpError", "Response", "fetch"]

#: Default cap on the response body read, in bytes (8 MiB, the host's
#: default per-response limit).
DEFAULT_MAX_BYTES = 8 << 20

# Most bytes one blocking read asks for; the host's streams cap writes at
# 4096 bytes per call.
_READ_CHUNK = 64 << 10
_WRITE_CHUNK = 4096


class HttpError(Exception):
    """The request did not get a response (refused connection, no such
    host, a limit); the message says which."""


@dataclasses.dataclass
class Response:
    """A response: status, headers (lowercase names, in order) and body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    #: True when the body was longer than ``max_bytes`` and was cut.
    truncated: bool = False

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), if present."""
        name = name.lower()
        return next((v for n, v in self.headers if n == name), None)

    def text(self) -> str:
        """The body as UTF-8 text (invalid bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


def _method(t: Any, method: str) -> Any:
    known = {
        "GET": t.Method_Get,
        "HEAD": t.Method_Head,
        "POST": t.Method_Post,
        "PUT": t.Method_Put,
        "DELETE": t.Method_Delete,
        "CONNECT": t.Method_Connect,
        "OPTIONS": t.Method_Options,
        "TRACE": t.Method_Trace,
        "PATCH": t.Method_Patch,
    }
    upper = method.upper()
    return known[upper]() if upper in known else t.Method_Other(method)


def _error_text(code: Any) -> str:
    """A wasi:http error-code as words: its variant name, minus the prefix."""
    name = type(code).__name__.removeprefix("ErrorCode_")
    value = getattr(code, "value", None)
    return f"{name}: {value}" if value is not None else name


def _raise(code: Any, host: str) -> None:
    name = type(code).__name__
    if name == "ErrorCode_HttpRequestDenied":
        raise AccessDenied(
            host, "outgoing HTTP requests to this host are not granted to this tool"
        )
    raise HttpError(f"request to {host} failed: {_error_text(code)}")


def fetch(
    url: str,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    body: bytes | str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Response:
    """Send one request and read its response (up to ``max_bytes`` of body).

    ``url`` must be absolute ``http://`` or ``https://``. Redirects are not
    followed: a 3xx comes back as it is, with its ``location`` header.
    """
    if _handler is None or _t is None or _Err is None:
        raise HttpError("longhand_tool.http works inside a component only (wasi:http)")
    t, Err, outgoing_handler = _t, _Err, _handler
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an absolute http(s) URL: {url!r}")
    host = parts.hostname or parts.netloc
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    if isinstance(body, str):
        body = body.encode("utf-8")

    fields = t.Fields.from_list([(k, v.encode("utf-8")) for k, v in (headers or {}).items()])
    request = t.OutgoingRequest(fields)
    request.set_method(_method(t, method))
    request.set_scheme(t.Scheme_Https() if parts.scheme == "https" else t.Scheme_Http())
    request.set_authority(parts.netloc)
    request.set_path_with_query(path)
    outgoing = request.body()
    try:
        future = outgoing_handler.handle(request, None)
    except Err as e:
        _raise(e.value, host)
    if body:
        with outgoing.write() as stream:
            for at in range(0, len(body), _WRITE_CHUNK):
                stream.blocking_write_and_flush(body[at : at + _WRITE_CHUNK])
    t.OutgoingBody.finish(outgoing, None)

    with future:
        while (answer := future.get()) is None:
            with future.subscribe() as ready:
                ready.block()
    # Ok(Ok(response)), Ok(Err(error-code)), or Err(()) if taken twice.
    inner = getattr(answer, "value", None)
    if type(answer).__name__ != "Ok" or type(inner).__name__ != "Ok":
        _raise(getattr(inner, "value", inner), host)
    response = inner.value
    status = response.status()
    with response.headers() as h:
        pairs = [(n.lower(), v.decode("utf-8", errors="replace")) for n, v in h.entries()]
    data = bytearray()
    truncated = False
    incoming = response.consume()
    with incoming.stream() as stream:
        while True:
            try:
                chunk = stream.blocking_read(_READ_CHUNK)
            except Err as e:
                if type(e.value).__name__ == "StreamError_Closed":
                    break
                raise HttpError(f"reading the response from {host} failed: {e.value}") from None
            if len(data) + len(chunk) > max_bytes:
                data.extend(chunk[: max_bytes - len(data)])
                truncated = True
                break
            data.extend(chunk)
    return Response(status=status, headers=pairs, body=bytes(data), truncated=truncated)
