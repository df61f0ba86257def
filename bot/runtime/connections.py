"""People's connected accounts for `"auth": "user"` MCP servers, kept in Redis.

Everything secret is encrypted with `PARLEY_SECRET_KEY` (a Fernet key) before it reaches
Redis: tokens (`oauth:token:<server>:<platform>:<user>`, until disconnected), each server's
registration (`oauth:client:<server>`), and pending sign-ins (`oauth:state:<sha256 of the
state>`, expiring after `PARLEY_CONNECT_TTL`, taken with GETDEL so a state works once).
A pending sign-in names the person, the conversation and the question the run waits on; the
callback (`callback.py`) checks it and hands the conversation a `connected` event, which
resumes the run there. Tokens are refreshed when they have less than `REFRESH_EARLY`
seconds left; a refresh the server refuses forgets them, so the person is asked again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from cryptography.fernet import Fernet, InvalidToken
from redis.asyncio import Redis

from agent.mcp import ServerConfig
from agent.protocols import RunContext
from agent.tools import ToolError
from bot.runtime import oauth
from bot.runtime.keys import Keys

log = logging.getLogger(__name__)

REFRESH_EARLY = 120.0  # seconds before expiry a token is refreshed
CALLBACK_PATH = "/oauth/callback"


@dataclass(frozen=True, kw_only=True)
class Pending:
    """A sign-in under way: whose, for which server, and which waiting run it resumes."""

    server: str
    platform: str
    user_id: str
    user_name: str
    team_id: str | None
    conversation_id: str
    is_direct: bool
    question_id: str
    verifier: str


class Connections:
    """The `Credentials` of `agent.mcp.user`, on Redis."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        *,
        servers: Mapping[str, ServerConfig],
        secret_key: str,
        public_url: str,
        connect_ttl: float,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.servers = dict(servers)
        self.fernet = Fernet(secret_key.encode())
        self.redirect_uri = public_url.rstrip("/") + CALLBACK_PATH
        self.connect_ttl = connect_ttl

    # --- Credentials ---------------------------------------------------------------------------

    async def token(self, server: str, run: RunContext) -> str | None:
        tokens = await self._tokens(server, run.platform, run.user_id)
        if tokens is None or _fresh(tokens):
            return tokens.access_token if tokens is not None else None
        # one refresh at a time per person and server: refresh tokens rotate, so a second
        # concurrent refresh would be refused and look like a revoked account
        lock = self.redis.lock(
            self.keys.oauth_refresh(server, run.platform, run.user_id),
            timeout=oauth.TIMEOUT * 2,
            blocking_timeout=oauth.TIMEOUT * 2,
        )
        async with lock:
            return await self._refresh(server, run)

    async def _refresh(self, server: str, run: RunContext) -> str | None:
        tokens = await self._tokens(server, run.platform, run.user_id)
        if tokens is None or _fresh(tokens):  # done by whoever held the lock before
            return tokens.access_token if tokens is not None else None
        try:
            client = await self.client(server)
            fresh = await oauth.refresh(client, tokens)
        except oauth.OAuthError as exc:
            log.info(
                "MCP server %s: a refresh was refused (%s); asking to connect again", server, exc
            )
            await self.disconnect(server, run.platform, run.user_id)
            return None
        except ConnectionError:  # try again next time; the old token may still do
            expired = (tokens.expires_at or 0) <= time.time()
            return None if expired else tokens.access_token
        await self.store(server, run.platform, run.user_id, fresh)
        return fresh.access_token

    async def connect_link(self, server: str, run: RunContext, question_id: str) -> str:
        try:
            client = await self.client(server)
        except oauth.OAuthError as exc:
            log.warning("MCP server %s: cannot start a sign-in (%s)", server, exc)
            raise ToolError(f"{server}'s sign-in is not working right now") from None
        state = secrets.token_urlsafe(32)
        authorization = oauth.authorization(client, self.redirect_uri, state)
        pending = Pending(
            server=server,
            platform=run.platform,
            user_id=run.user_id,
            user_name=run.user_name,
            team_id=run.team_id,
            conversation_id=run.conversation_id,
            is_direct=run.is_direct,
            question_id=question_id,
            verifier=authorization.verifier,
        )
        sealed = self._seal(json.dumps(asdict(pending)))
        await self.redis.set(
            self.keys.oauth_state(_digest(state)), sealed, px=int(self.connect_ttl * 1000)
        )
        return authorization.url

    # --- the store -----------------------------------------------------------------------------

    async def client(self, server: str) -> oauth.Client:
        """The server's registration, made once and kept (encrypted: it may hold a secret)."""
        key = self.keys.oauth_client(server)
        raw = await self.redis.get(key)
        if raw is not None and (opened := self._open(raw)) is not None:
            return oauth.Client.model_validate_json(opened)
        client = await oauth.register(self.servers[server], self.redirect_uri)
        await self.redis.set(key, self._seal(client.model_dump_json()))
        return client

    async def take_pending(self, state: str) -> Pending | None:
        """The sign-in `state` started, once: a second use, or a forged state, finds None."""
        raw = await self.redis.getdel(self.keys.oauth_state(_digest(state)))
        opened = self._open(raw) if raw is not None else None
        return Pending(**json.loads(opened)) if opened is not None else None

    async def store(self, server: str, platform: str, user_id: str, tokens: oauth.Tokens) -> None:
        key = self.keys.oauth_token(server, platform, user_id)
        await self.redis.set(key, self._seal(tokens.model_dump_json()))

    async def disconnect(
        self, server: str, platform: str, user_id: str, *, revoke: bool = False
    ) -> bool:
        """Forget the person's tokens; with `revoke`, also ask the server to end the grant
        (best effort: forgotten here either way)."""
        tokens = await self._tokens(server, platform, user_id) if revoke else None
        gone = bool(await self.redis.delete(self.keys.oauth_token(server, platform, user_id)))
        if tokens is not None:
            try:
                await oauth.revoke(await self.client(server), tokens)
            except (oauth.OAuthError, ConnectionError) as exc:
                log.warning("MCP server %s: could not revoke a token (%s)", server, exc)
        return gone

    async def connected(self, platform: str, user_id: str) -> list[str]:
        """The servers this person has connected."""
        found: list[str] = []
        for server in self.servers:
            if await self.redis.exists(self.keys.oauth_token(server, platform, user_id)):
                found.append(server)
        return found

    async def _tokens(self, server: str, platform: str, user_id: str) -> oauth.Tokens | None:
        raw = await self.redis.get(self.keys.oauth_token(server, platform, user_id))
        opened = self._open(raw) if raw is not None else None
        return oauth.Tokens.model_validate_json(opened) if opened is not None else None

    def _seal(self, text: str) -> bytes:
        return self.fernet.encrypt(text.encode())

    def _open(self, raw: bytes | str) -> str | None:
        try:
            return self.fernet.decrypt(raw if isinstance(raw, bytes) else raw.encode()).decode()
        except InvalidToken:  # another key, or tampered with: as good as absent
            log.warning(
                "a stored connection could not be decrypted (was PARLEY_SECRET_KEY changed?)"
            )
            return None


def _fresh(tokens: oauth.Tokens) -> bool:
    return tokens.expires_at is None or tokens.expires_at - time.time() > REFRESH_EARLY


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()
