"""What a web page elsewhere must not make this server do: CSRF and DNS rebinding.

A key-less server on 127.0.0.1 is still reachable from every page the user's
browser opens. Two attacks follow, and this ASGI middleware closes both:

* **Cross-site requests.** A page on another origin may send a "simple" request
  (a multipart ``POST /documents``) without a CORS preflight; the browser only
  hides the answer, the write has happened. Every state-changing request
  (POST, PUT, PATCH, DELETE) whose ``Origin`` is not this server's own is refused
  (403); a browser sends ``Origin`` on every such request, so a request without
  one is a tool's (curl, the ``openai`` client) and is allowed, unless its
  ``Sec-Fetch-Site`` says another site sent it.
* **DNS rebinding.** A page on ``evil.example`` rebinds its name to 127.0.0.1 and
  becomes same-origin with this server. Its requests carry ``Host: evil.example``,
  so a ``Host`` that is not a name this server is reached by is refused (421).
  An IP literal is always accepted: rebinding needs a name the attacker owns.

Lifespan scopes pass through untouched (the app's startup and shutdown hooks).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from unirag.server.errors import error_body

#: Names that always mean this machine.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: Methods that change state: the ones a cross-site page must never get through.
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def host_name(value: str) -> str:
    """The host part of a ``Host`` header or bind address, lower case, without port,
    brackets or a trailing dot: ``[::1]:8080`` -> ``::1``, ``LocalHost.:80`` -> ``localhost``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine (127.0.0.0/8, ::1, localhost)."""
    name = host_name(host)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def served_names(bind_host: str, allowed_hosts: Iterable[str] = ()) -> frozenset[str]:
    """The host names a request's ``Host`` may carry: loopback names, the bound address
    (unless it is a wildcard such as 0.0.0.0) and the operator's ``allowed_hosts``."""
    names = set(LOOPBACK_NAMES) | {host_name(name) for name in allowed_hosts}
    if host_name(bind_host) not in _WILDCARDS:
        names.add(host_name(bind_host))
    return frozenset(names)


def _authority(scheme: str, netloc: str) -> tuple[str, int | None]:
    """(host, port) of ``netloc``, the scheme's default port filled in."""
    parts = urlsplit(f"{scheme}://{netloc}")
    try:
        port = parts.port
    except ValueError:
        port = None
    return (parts.hostname or "").rstrip("."), port if port is not None else _DEFAULT_PORTS.get(scheme)


def same_origin(origin: str, host_header: str) -> bool:
    """Whether ``Origin`` names the server this ``Host`` reaches (host and port; the scheme
    may differ, so a TLS proxy in front of the server keeps working)."""
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False  # "null" (a sandboxed frame, a file: page) or garbage
    return _authority(parts.scheme, parts.netloc) == _authority(parts.scheme, host_header.strip().lower())


class OriginGuardMiddleware:
    """Refuse a request whose ``Host`` this server is not reached by (421), and a
    state-changing request from another origin or site (403), each with the usual error body."""

    def __init__(self, app: Any, names: frozenset[str]) -> None:
        self.app = app
        self._names = names

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan; the app serves no websocket
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message, kind = refusal
        body = json.dumps(error_body(message, kind)).encode("utf-8")
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope: dict[str, Any]) -> tuple[int, str, str] | None:
        """(status, message, error type) when the request must be refused, else None."""
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        host = headers.get("host")
        if not host:
            return 400, "the request has no Host header", "invalid_request_error"
        name = host_name(host)
        if name not in self._names and not _is_ip(name):
            return (421, f"this server is not reached as '{name}' (a page rebinding its name to this machine?): "
                         f"start it with --allowed-host {name} if that name is yours", "misdirected_request")
        if scope.get("method", "GET").upper() not in WRITE_METHODS:
            return None
        origin = headers.get("origin")
        if origin is not None and not same_origin(origin, host):
            return (403, f"cross-origin request refused: a page from {origin.strip()[:100]} may not "
                         f"{scope['method']} to this server", "forbidden")
        site = headers.get("sec-fetch-site", "none").strip().lower()
        if origin is None and site not in ("same-origin", "none"):
            return 403, f"cross-site request refused (Sec-Fetch-Site: {site[:20]})", "forbidden"
        return None
