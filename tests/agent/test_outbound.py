"""The outbound guard (agent/outbound.py): what a third party may make Parley reach.

Names are answered by an injected resolver and requests end in httpx's MockTransport, so
nothing here leaves the process; the address the guard connects to is the one the inner
transport is handed.
"""

from __future__ import annotations

import asyncio

import httpx2
import pytest

from agent.outbound import AddressRefused, Guard, reachable, trusted_hosts


def answers(*rounds: list[str]) -> tuple[list[str], object]:
    """A resolver that gives each round's addresses in turn (the last one after that)."""
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return rounds[min(len(asked), len(rounds)) - 1]

    return asked, resolve


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",  # loopback (Redis on 127.0.0.1:6379)
        "169.254.169.254",  # link-local: the cloud metadata service
        "10.1.2.3",
        "172.16.0.9",
        "192.168.1.1",  # private
        "100.64.0.7",  # shared address space (carrier-grade NAT)
        "0.0.0.0",
        "224.0.0.1",  # multicast
        "::1",
        "fe80::1",
        "fd00::5",  # IPv6 loopback, link-local, unique local
        "::ffff:127.0.0.1",  # IPv4-mapped
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "2002:a00:1::",  # 6to4 of 10.0.0.1
    ],
)
def test_internal_addresses_are_not_reachable(address: str) -> None:
    assert not reachable(address)


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"])
def test_global_addresses_are_reachable(address: str) -> None:
    assert reachable(address)


@pytest.mark.parametrize(
    ("url", "resolved"),
    [
        ("https://127.0.0.1:6379/", ["127.0.0.1"]),
        ("https://169.254.169.254/latest/meta-data/", ["169.254.169.254"]),
        ("https://admin.internal/", ["10.0.0.7"]),
        ("https://[::1]/", ["::1"]),
        ("https://split.example/", ["93.184.216.34", "10.0.0.7"]),  # one bad answer is enough
        ("http://public.example/", ["93.184.216.34"]),  # https only
    ],
)
async def test_the_guard_refuses_before_connecting(url: str, resolved: list[str]) -> None:
    _, resolve = answers(resolved)
    sent: list[httpx2.Request] = []
    guard = Guard(resolve=resolve)  # type: ignore[arg-type]
    inner = httpx2.MockTransport(lambda r: sent.append(r) or httpx2.Response(200))
    async with guard.client(inner) as client:
        with pytest.raises(AddressRefused):
            await client.get(url)
    assert sent == []


async def test_a_rebinding_name_reaches_only_the_address_that_was_checked() -> None:
    asked, resolve = answers(["93.184.216.34"], ["127.0.0.1"])  # public, then loopback
    sent: list[httpx2.Request] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(200, json={"ok": True})

    guard = Guard(resolve=resolve)  # type: ignore[arg-type]
    async with guard.client(httpx2.MockTransport(record)) as client:
        answer = await client.get("https://rebind.example/.well-known/x")
    assert answer.json() == {"ok": True}
    assert asked == ["rebind.example"]  # resolved once: nothing resolves it again later
    (request,) = sent
    assert request.url.host == "93.184.216.34"  # connected to the checked address
    assert request.headers["Host"] == "rebind.example"
    assert request.extensions["sni_hostname"] == "rebind.example"  # TLS checks the name


async def test_trusted_hosts_are_used_as_given() -> None:
    _, resolve = answers(["127.0.0.1"])
    sent: list[httpx2.Request] = []
    guard = Guard(trusted=trusted_hosts("http://127.0.0.1:8080/mcp", "auth.local"), resolve=resolve)  # type: ignore[arg-type]
    inner = httpx2.MockTransport(lambda r: sent.append(r) or httpx2.Response(200))
    async with guard.client(inner) as client:
        await client.get("http://127.0.0.1:9000/x")  # the configured server's host, any port
        await client.get("http://AUTH.local/token")
        with pytest.raises(AddressRefused):
            await client.get("http://localhost:6379/")  # another name for loopback
    assert [r.url.host for r in sent] == ["127.0.0.1", "auth.local"]


async def test_answers_are_bounded_in_size_and_time() -> None:
    _, resolve = answers(["93.184.216.34"])
    big = httpx2.MockTransport(lambda r: httpx2.Response(200, content=b"x" * 10_000))
    guard = Guard(resolve=resolve, max_bytes=4096)  # type: ignore[arg-type]
    async with guard.client(big) as client:
        with pytest.raises(AddressRefused, match="too large"):
            await client.get("https://big.example/")

    async def slow(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(5)
        return httpx2.Response(200)

    guard = Guard(resolve=resolve, seconds=0.05)  # type: ignore[arg-type]
    async with guard.client(httpx2.MockTransport(slow)) as client:
        with pytest.raises(TimeoutError):
            await client.get("https://slow.example/")
