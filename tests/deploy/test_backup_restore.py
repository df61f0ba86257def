"""The runbook's Redis backup and restore (docs/operations.md), run as written.

Each `kubectl` line of its two `sh` blocks is played against a Redis Stack server started
the way the StatefulSet starts redis-0: the shipped deploy/redis.conf, a password, and the
arguments `kubectl patch` adds. A line the player does not know fails the test, so the
runbook cannot drift from what was tried. After the restore, Parley's own stores find their
memories (the RedisVL index answers) and the pending approval and queued event are there.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from agent.protocols import RunContext
from bot.ops.embedded_redis import EmbeddedRedis, free_port
from bot.runtime.decisions import DecisionStore
from bot.runtime.keys import Keys
from memory import Embedder, open_store

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "deploy" / "redis.conf"
PASSWORD = "restore-test-password"
ANA = RunContext(conversation_id="slack:T1:DANA", platform="slack", user_id="UANA",
                 chat_id="DANA", team_id="T1")  # fmt: skip


def runbook_blocks() -> tuple[list[str], list[str]]:
    """The backup and the restore commands, comments left out."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("## Back up and restore Redis", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) == 2, "one block to back up, one to restore"
    return tuple(  # type: ignore[return-value]
        [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
        for block in blocks
    )


class Pod:
    """redis-0: one data volume, and a server started as the StatefulSet starts it."""

    def __init__(self, volume: Path) -> None:
        self.volume = volume
        self.port = free_port()
        self.args: list[str] = []  # what `kubectl patch` added to the container's args
        self.server: EmbeddedRedis | None = None

    @property
    def data(self) -> Path:
        return self.volume / "redis"  # the container's /data

    async def start(self) -> None:
        extra = list(self.args)

        class Container(EmbeddedRedis):
            def command(self) -> list[str]:
                return [*super().command(), *extra]

        server = Container(self.volume, config=CONF, password=PASSWORD, port=self.port)
        await asyncio.to_thread(server.start)
        self.server = server

    async def stop(self) -> None:
        """SIGTERM, as Kubernetes stops a container: Redis saves as it shuts down."""
        server, self.server = self.server, None
        if server is not None:
            await asyncio.to_thread(server.stop)

    async def exited(self) -> None:
        """The container's process ended by itself; the kubelet starts it again."""
        server = self.server
        assert server is not None and server._process is not None
        await asyncio.to_thread(server._process.wait, 10)
        await self.stop()
        await self.start()

    def client(self) -> aioredis.Redis:
        return aioredis.Redis(port=self.port, password=PASSWORD)


class Player:
    """Plays runbook lines against the pod; `kubectl cp` to and from `here`."""

    def __init__(self, pod: Pod, here: Path) -> None:
        self.pod, self.here = pod, here
        self.seen: dict[str, object] = {}  # the last answer to each redis-cli command

    def path(self, name: str) -> Path:
        if name.startswith("redis-0:"):
            return self.pod.data / name.removeprefix("redis-0:/data/")
        return self.here / name

    async def cli(self, *command: str, until: dict[str, str]) -> object:
        client = self.pod.client()
        try:
            if command == ("SHUTDOWN", "NOSAVE"):
                with pytest.raises(redis.ConnectionError):  # it goes away mid-answer
                    await client.execute_command(*command)
                await self.pod.exited()
                return None
            answer = await client.execute_command(*command)
            deadline = time.monotonic() + 30
            while until and not all(str(answer[k]) == v for k, v in until.items()):
                assert time.monotonic() < deadline, (command, answer)
                await asyncio.sleep(0.1)
                answer = await client.execute_command(*command)
            self.seen[" ".join(command)] = answer
            return answer
        finally:
            await client.aclose()

    async def play(self, line: str) -> None:
        words = shlex.split(line, comments=True)
        # "# repeat until field:value ...": INFO is asked again until it shows them all
        repeat = line.partition("# repeat until")[2]
        until = dict(re.findall(r"(\w+):(\w+)", repeat))
        assert words[0] == "kubectl", line
        words = words[3:] if words[1:3] == ["-n", "parley"] else words[1:]
        verb = words[0]
        if verb in ("annotate", "scale") or words[:2] == ["rollout", "status"]:
            return  # the writers and the autoscaler: nothing writes in this test
        if verb == "patch":
            assert words[1:3] == ["statefulset", "redis"], line
            for op in json.loads(words[words.index("-p") + 1]):
                assert op["op"] == "add" and op["path"].endswith("/containers/0/args/-"), op
                self.pod.args.append(op["value"])
            await self.pod.stop()  # the StatefulSet rolls redis-0
            await self.pod.start()
            return
        if words[:2] == ["apply", "-k"]:
            assert words[2] == "deploy/k8s/overlays/production", line
            self.pod.args = []  # the shipped args again
            await self.pod.stop()
            await self.pod.start()
            return
        if verb == "cp":
            shutil.copyfile(self.path(words[1]), self.path(words[2]))
            return
        assert words[:3] == ["exec", "redis-0", "--"], line
        command = words[3:]
        if command[0] == "redis-cli":
            await self.cli(*command[1:], until=until)
        elif command[:2] == ["sh", "-c"]:
            script = command[2].replace("/data", str(self.pod.data))
            await asyncio.to_thread(subprocess.run, ["sh", "-c", script], check=False, timeout=30)
        elif command[:2] == ["rm", "-rf"]:
            shutil.rmtree(self.path("redis-0:" + command[2]), ignore_errors=True)
        else:
            raise AssertionError(f"the test cannot play this runbook line: {line}")


async def fill(redis: aioredis.Redis, embedder: Embedder) -> tuple[str, int]:
    """Memories, a pending approval and a queued event, as a running Parley leaves them."""
    store = await open_store(redis, embedder)
    await store.remember("Our VAT number is DE123456789", ANA)
    await store.remember("I prefer answers in German", ANA)
    decisions = DecisionStore(redis, Keys("parley"), ttl=86_400)
    pending = decisions.new(
        kind="approval", conversation_id=ANA.conversation_id, requester_id="UANA", text="Pay?"
    )
    await decisions.save(pending)
    inbox = Keys("parley").inbox
    await redis.xgroup_create(inbox, "workers", id="0", mkstream=True)
    await redis.xadd(inbox, {"event": "queued before the backup"})
    return pending.id, int(await redis.dbsize())


async def check(redis: aioredis.Redis, embedder: Embedder, decision_id: str, keys: int) -> None:
    assert int(await redis.dbsize()) == keys
    store = await open_store(redis, embedder)  # the index is there and matches: no rebuild
    found = await store.recall("what is our VAT number?", ANA)
    assert found and found[0].text == "Our VAT number is DE123456789"
    decision = await DecisionStore(redis, Keys("parley"), ttl=86_400).get(decision_id)
    assert decision is not None and decision.status == "pending" and decision.text == "Pay?"
    inbox = Keys("parley").inbox
    assert [e[1] for e in await redis.xrange(inbox)] == [{b"event": b"queued before the backup"}]
    assert (await redis.xinfo_groups(inbox))[0]["name"] == b"workers"


@pytest.mark.parametrize("volume", ["the same volume, flushed", "a fresh volume"])
async def test_the_runbook_restores_memories_and_pending_approvals(
    tmp_path: Path, embedder: Embedder, volume: str
) -> None:
    backup, restore = runbook_blocks()
    production = Pod(tmp_path / "production")
    await production.start()
    try:
        client = production.client()
        decision_id, keys = await fill(client, embedder)
        player = Player(production, tmp_path)
        for line in backup:
            await player.play(line)
        assert (tmp_path / "parley-DATE.rdb").stat().st_size > 0
        # the disaster: everything gone, and the AOF records it
        await client.flushall()
        await client.aclose()
        await asyncio.sleep(1.2)  # appendfsync everysec
        if volume == "a fresh volume":
            await production.stop()
            target = Pod(tmp_path / "fresh")
            await target.start()
        else:
            target = production
        player = Player(target, tmp_path)
        try:
            for line in restore:
                await player.play(line)
            assert player.seen["DBSIZE"] == keys
            assert player.seen["FT._LIST"]  # the memory index, before Parley touches it
            # and once more after a plain restart with the shipped settings (AOF on)
            await target.stop()
            await target.start()
            client = target.client()
            await check(client, embedder, decision_id, keys)
            await client.aclose()
        finally:
            if target is not production:
                await target.stop()
    finally:
        await production.stop()


async def test_the_old_runbook_lost_the_data(tmp_path: Path, embedder: Embedder) -> None:
    """What the runbook said before: copy the backup over dump.rdb, move the AOF aside,
    CONFIG SET appendonly no, restart, CONFIG SET appendonly yes. Redis starts empty."""
    pod = Pod(tmp_path / "pod")
    await pod.start()
    try:
        client = pod.client()
        await fill(client, embedder)
        await client.bgsave()
        for _ in range(300):
            if not (await client.info("persistence"))["rdb_bgsave_in_progress"]:
                break
            await asyncio.sleep(0.1)
        shutil.copyfile(pod.data / "dump.rdb", tmp_path / "backup.rdb")
        await client.flushall()
        shutil.copyfile(tmp_path / "backup.rdb", pod.data / "dump.rdb")
        shutil.move(pod.data / "appendonlydir", pod.data / "appendonlydir.old")
        await client.config_set("appendonly", "no")
        await client.aclose()
        await pod.stop()  # "delete pod redis-0"
        await pod.start()
        client = pod.client()
        assert await client.dbsize() == 0
        await client.aclose()
    finally:
        await pod.stop()
