"""The client the MCP conformance suite runs: Parley's own MCP client, driven as a person would.

    python -m tests.conformance.driver REVISION SERVER_URL

`conformance client --command "… driver REVISION"` appends SERVER_URL and names the scenario in
`MCP_CONFORMANCE_SCENARIO` (`MCP_CONFORMANCE_CONTEXT`: pre-registered credentials). The
driver holds no protocol logic: it configures a server the way an operator would (a shared
server in an `McpToolbox`, or `"auth": "user"` with Parley's `Connections` on the Redis at
`PARLEY_CONFORMANCE_REDIS`), offers the tools to "the model" and calls them, and plays the
person's browser: it opens the Connect link Parley made, and hands the redirect back to
Parley's `/oauth/callback` on a local listener (the reverse proxy's part, since the redirect
URI is under `PARLEY_PUBLIC_URL`). What each scenario's tools are called with is the model's
part, in `ARGUMENTS`. A server's question reaches "the person" as Parley asks it in a chat
(`InputRequired`, one field at a time); the person skips what may be skipped (the server's
defaults then go) and otherwise takes the first offer (the suggested answer, or Yes), and the
call is made again with that answer as Parley's loop makes it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import uuid
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import httpx2
import redis.asyncio as aioredis
from cryptography.fernet import Fernet
from pydantic import ValidationError

from agent.deps import ToolContext
from agent.mcp import McpConfig, McpToolbox, ServerConfig, Timing
from agent.protocols import RunContext
from agent.tools import InputRequired, QuestionRequired, Tool, ToolError
from bot.features.connections.callback import OAuthCallback
from bot.features.connections.store import Connections
from bot.ops.http import HttpServer
from bot.runtime.keys import Keys

log = logging.getLogger("conformance")

PUBLIC_URL = "https://conformance-test.local"  # where the suite expects Parley's documents
# generous: the suite gives a scenario 90 s, and a loaded machine starts Python slowly
TIMING = Timing(start_timeout=40, call_timeout=30, retry_base=0.2, retry_max=1.0)
PERSON = RunContext(
    conversation_id="telegram:-:1001:-", platform="telegram", user_id="1001", chat_id="1001"
)
ROUNDS = 4  # Connect links one call may bring (a step-up asks again); the person stops after
QUESTIONS = 20  # questions (fields) one call may ask before the person stops answering
# The model's part: what each scenario's tools are called with (the rest get `{}`).
ARGUMENTS: dict[str, dict[str, Any]] = {
    "add_numbers": {"a": 5, "b": 3},
    "valid_tool": {"region": "us-west1"},  # http-invalid-tool-headers
}
# json-schema-2020-12-preservation: the model echoes another tool's schema as it was offered
ECHO = ("json_schema_echo", "json_schema_2020_12_tool")


async def main(revision: str, url: str) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    log.info("scenario %s at %s, revision %s", scenario, url, revision)
    if scenario.startswith("auth/"):
        config = ServerConfig(
            url=url,
            auth="user",
            protocol=revision,  # type: ignore[arg-type]
            client_id=context.get("client_id"),
            client_secret=context.get("client_secret"),
        )
        return await personal(config)
    # a scenario may say what its tools are called with (http-custom-headers); the model
    # leaves out a parameter it has no value for rather than send null
    for call in context.get("toolCalls") or []:
        given = call.get("arguments") or {}
        ARGUMENTS[call["name"]] = {k: v for k, v in given.items() if v is not None}
    return await shared(ServerConfig(url=url, protocol=revision))  # type: ignore[arg-type]


async def shared(config: ServerConfig) -> int:
    box = McpToolbox(McpConfig(mcpServers={"server": config}), TIMING)
    await box.start()
    try:
        return await call_all(list(box.tools_for(PERSON)), ToolContext(run=PERSON))
    finally:
        await box.stop()


async def personal(config: ServerConfig) -> int:
    redis = aioredis.Redis.from_url(os.environ["PARLEY_CONFORMANCE_REDIS"])
    connections = Connections(
        redis,
        Keys(prefix=f"conformance-{uuid.uuid4().hex[:8]}"),
        servers={"server": config},
        secret_key=Fernet.generate_key().decode(),
        public_url=PUBLIC_URL,
        connect_ttl=300,
        trusted="localhost,127.0.0.1",  # the suite's authorization servers
    )
    box = McpToolbox(McpConfig(mcpServers={"server": config}), TIMING, credentials=connections)
    # The system picks the port as it binds: a port probed free beforehand can be taken by
    # the suite's next mock server in the meantime.
    listener = HttpServer("127.0.0.1", 0, metrics_port=0)
    callback = OAuthCallback(connections=connections)
    listener.add_route(*callback.route())
    listener.add_route(*callback.metadata_route())
    await listener.start()
    port = listener.port
    try:
        async with httpx2.AsyncClient(timeout=10, follow_redirects=False) as browser:
            for _ in range(ROUNDS):
                tools = await box.personal_tools(PERSON)
                try:
                    return await call_all(tools, ToolContext(run=PERSON))
                except QuestionRequired as asked:
                    try:
                        code = await sign_in(browser, asked.url, port)
                        # the person types the page's code in their chat
                        await connections.confirm(
                            PERSON.platform, PERSON.user_id, PERSON.conversation_id, True, code
                        )
                    except RuntimeError as exc:
                        log.error("%s", exc)
                        return 1
            log.error("still asked to connect after %d sign-ins", ROUNDS)
            return 1
    finally:
        await listener.stop()
        await redis.aclose()


async def sign_in(browser: httpx2.AsyncClient, link: str, port: int) -> str:
    """The person's browser: the authorization server redirects back to Parley's callback,
    which a reverse proxy would pass to the listener; the one-time code its page shows (the
    person types it in their chat). A page that says it failed ends it."""
    answer = await browser.get(link)
    location = answer.headers.get("location", "")
    if answer.status_code not in (301, 302, 303, 307) or not location.startswith(PUBLIC_URL):
        raise RuntimeError(f"the sign-in did not come back ({answer.status_code})")
    back = urlsplit(location)
    page = await browser.get(f"http://127.0.0.1:{port}{back.path}?{back.query}")
    log.info("callback page: %s %s", page.status_code, page.text[:200])
    if page.status_code != 200 or "<b>" not in page.text:
        raise RuntimeError("the sign-in failed")
    return page.text.split("<b>")[1].split("</b>")[0]


async def call_all(tools: list[Tool], context: ToolContext) -> int:
    """Call every offered tool once, as the model would (asking to connect propagates)."""
    if not tools:
        log.error("no tools offered")
        return 1
    failed = 0
    offered = {getattr(tool, "remote_name", tool.name): tool for tool in tools}
    for tool in tools:
        remote = getattr(tool, "remote_name", tool.name)
        arguments = ARGUMENTS.get(remote, {})
        if remote == ECHO[0] and ECHO[1] in offered:
            arguments = {"schema": offered[ECHO[1]].spec().input_schema}
        try:
            result = await answering(tool, arguments, context)
            log.info("%s: %s", remote, str(result)[:200])
        except (ToolError, ValidationError) as exc:  # what the model would be told
            log.warning("%s failed: %s", remote, exc)
            failed += 1
    return 1 if failed else 0


async def answering(tool: Tool, arguments: dict[str, Any], context: ToolContext) -> Any:
    """The call, with the person answering each question Parley puts to them."""
    for _ in range(QUESTIONS):
        try:
            return await tool(arguments, context)
        except InputRequired as asked:
            answer = "Skip" if "Skip" in asked.options else asked.options[0]
            log.info("asked: %s; the person answers %s", asked.question[:200], answer)
            context = replace(context, resume={**asked.resume, "answer": answer})
    raise ToolError(f"still asking after {QUESTIONS} answers")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
