"""The one way Parley reaches an address a third party named.

An MCP server names its protected-resource metadata; that names an authorization server,
whose metadata names registration, token and revocation endpoints. None of these is the
operator's choice, so a hostile server could point Parley at its own network (the cloud
metadata service at 169.254.169.254, Redis on 127.0.0.1:6379, a 10.x admin page). Every such
request goes through a client from `Guard.client()`:

- https only, and every address the name resolves to must be a global unicast address: no
  loopback, link-local, private, shared (100.64.0.0/10), reserved or multicast range, nor an
  IPv6 form of one (mapped, NAT64, 6to4, Teredo);
- the name is resolved once and the connection goes to the address that was checked (the
  TLS name stays the host's), so a name that changes its answer between check and connect
  (DNS rebinding) reaches nothing new;
- each request is bounded in time (connect to last byte) and size, redirects are not
  followed, and bodies come unencoded (no decompression bomb).

A host in `trusted` (the host of a server URL the operator configured, and
`PARLEY_TRUSTED_HOSTS`) is used as given: http allowed, any address.

Errors::

    AddressRefused   the address is not one Parley may reach; the message says why
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import httpx2

Resolve = Callable[[str, int], Awaitable[list[str]]]
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

SECONDS = 15.0  # one request, from connecting to its last byte
MAX_BYTES = 256 * 1024  # metadata and token answers are a few kilobytes
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class AddressRefused(Exception):
    """A third party named an address Parley does not reach."""


async def system_resolve(host: str, port: int) -> list[str]:
    found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in found]


def reachable(address: str) -> bool:
    """A global unicast address, looking through the IPv6 forms that carry an IPv4 one."""
    ip: Address = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or (ip.teredo[1] if ip.teredo else None) or ip.sixtofour
        if inner is None and ip in _NAT64:
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inner is not None:
            return reachable(str(inner))
    return ip.is_global and not ip.is_multicast


def trusted_hosts(*entries: str | None) -> frozenset[str]:
    """Host names (or URLs, whose host counts) as the guard compares them."""
    hosts: set[str] = set()
    for entry in entries:
        for item in (entry or "").split(","):
            item = item.strip()
            if not item:
                continue
            host = httpx2.URL(item).host if "://" in item else item
            hosts.add(host.strip("[]").lower())
    return frozenset(hosts)


@dataclass(frozen=True, kw_only=True)
class Guard:
    trusted: frozenset[str] = frozenset()
    resolve: Resolve = system_resolve
    seconds: float = SECONDS
    max_bytes: int = MAX_BYTES

    def with_trusted(self, hosts: Iterable[str]) -> Guard:
        return Guard(
            trusted=self.trusted | trusted_hosts(*hosts),
            resolve=self.resolve,
            seconds=self.seconds,
            max_bytes=self.max_bytes,
        )

    def client(self, inner: httpx2.AsyncBaseTransport | None = None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            transport=_Guarded(self, inner or httpx2.AsyncHTTPTransport()),
            timeout=self.seconds,
            follow_redirects=False,
            headers={"Accept-Encoding": "identity"},
            trust_env=False,  # a proxy would connect by name, past the pinned address
        )

    async def pin(self, url: httpx2.URL) -> str | None:
        """The checked address to connect to, or None for a trusted host (used as given)."""
        host = url.host.lower()
        if host in self.trusted:
            return None
        if url.scheme != "https":
            raise AddressRefused(f"{host}: only https addresses are followed")
        try:
            addresses = await self.resolve(host, url.port or 443)
        except OSError:
            raise AddressRefused(f"{host}: the name does not resolve") from None
        if not addresses:
            raise AddressRefused(f"{host}: the name does not resolve")
        for address in addresses:
            if not reachable(address):
                raise AddressRefused(f"{host}: resolves to an internal address")
        return addresses[0]


@dataclass
class _Guarded(httpx2.AsyncBaseTransport):
    guard: Guard
    inner: httpx2.AsyncBaseTransport
    _closed: bool = field(default=False)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        async with asyncio.timeout(self.guard.seconds):
            address = await self.guard.pin(request.url)
            if address is not None:  # connect to what was checked; TLS still names the host
                request.extensions = {**request.extensions, "sni_hostname": request.url.host}
                request.url = request.url.copy_with(host=address)
            response = await self.inner.handle_async_request(request)
            body = bytearray()
            try:
                async for chunk in response.stream:  # type: ignore[union-attr]
                    body += chunk
                    if len(body) > self.guard.max_bytes:
                        raise AddressRefused(f"{request.url.host}: the answer is too large")
            finally:
                await response.aclose()
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            content=bytes(body),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()
