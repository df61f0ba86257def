"""The fake Anthropic, Telegram and Slack servers of bench_stream, in a process of their own.

Run by bench_stream as `python -m bench.stream_fakes <pace>`: prints one JSON line with the
three base URLs, then serves until its stdin closes. On the Anthropic server,
`GET /_bench/wait?tag=…` answers once the answer tagged `[tag]` was delivered in full, and
`GET /_bench/dump` returns when each stream began and each call that showed answer text.
Apart from the platforms' clocks being another process's (CLOCK_MONOTONIC is system-wide),
Parley's process then does only Parley's work.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from aiohttp import web

from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic, last_user_text
from tests.fakes.server import Recorded
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram

BODY = " ".join(f"word{i}" for i in range(120))  # about 1,000 characters
SHOWING = {
    "sendMessageDraft",
    "sendMessage",
    "editMessageText",
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
    "chat.postMessage",
    "chat.update",
}


def whole(tag: str) -> str:
    return f"[{tag}] {BODY}"


def shown_text(recorded: Recorded) -> str:
    body = recorded.body if isinstance(recorded.body, dict) else {}
    text = str(body.get("text") or body.get("markdown_text") or "")
    for chunk in body.get("chunks") or []:
        text += str(chunk.get("text") or "")
    return text


async def main(pace: float) -> None:
    hosted, telegram, slack = FakeAnthropic(), FakeTelegram(), FakeSlack()
    hosted.responder = lambda body: fa.streamed(whole(last_user_text(body)), pace=pace, chunk=8)
    for server in (hosted, telegram, slack):
        await server.start()

    def delivered(tag: str) -> bool:
        text = whole(tag)
        return any(p.text == text for p in telegram.posted) or any(
            p.text == text and not p.streaming for p in slack.posts
        )

    async def wait(recorded: Recorded, request: web.Request) -> web.StreamResponse:
        tag = request.query["tag"]
        deadline = time.monotonic() + 60
        while True:
            if delivered(tag):
                return web.json_response({"done": True})
            if time.monotonic() > deadline:
                return web.json_response({"done": False})
            # coarse on purpose: many waiters polling finely would starve the fakes' CPU
            await asyncio.sleep(0.02)

    async def dump(recorded: Recorded, request: web.Request) -> web.StreamResponse:
        calls = [
            (r.path.rsplit("/", 1)[-1], shown_text(r), r.received_at)
            for fake in (telegram, slack)
            for r in fake.requests
        ]
        for fake in (telegram, slack):
            fake.requests.clear()
        tokens, hosted.first_tokens = hosted.first_tokens, []
        hosted.requests.clear()
        return web.json_response({"first_tokens": tokens, "calls": calls})

    hosted.add("GET", "/_bench/wait", wait)
    hosted.add("GET", "/_bench/dump", dump)
    urls = {"anthropic": hosted.url, "telegram": telegram.url, "slack": slack.api_url}
    print(json.dumps({**urls, "token": telegram.token}), flush=True)
    await asyncio.to_thread(sys.stdin.read)  # until the bench closes our stdin
    for server in (hosted, telegram, slack):
        await server.stop()


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1])))
