"""People's connected accounts for `"auth": "user"` MCP servers, kept in Redis.

Everything secret is encrypted with `PARLEY_SECRET_KEY` (Fernet keys, the first encrypts and
any decrypts, so a key can be rotated) before it reaches Redis: tokens
(`oauth:token:<server>:<platform>:<user>`, until disconnected or unused for
`PARLEY_CONNECTION_IDLE`), Parley's registration at each
authorization server (`oauth:registration:<sha256 of the issuer>`), what each server's last
discovery found (`oauth:client:<server>`), and pending sign-ins (`oauth:state:<sha256 of the
state>`, expiring after `PARLEY_CONNECT_TTL`, taken with GETDEL so a state works once).
A pending sign-in names the person, the conversation and the question the run waits on; the
callback (`callback.py`) checks it, exchanges the code and holds the tokens until the
person confirms them in the chat with the one-time code its page shows (`held.py`);
only then are they the person's, and the conversation gets a `connected` event, which
resumes the run there. Every sign-in discovers the server's authorization server afresh, so
a server that moved is followed (and registered with anew). Tokens are refreshed when they
have less than `REFRESH_EARLY` seconds left; only a refresh answered `invalid_grant` forgets
them (revoking them where the server can), anything else is tried again later. A server that
wants more scope (403 `insufficient_scope`) gets a new sign-in for what was granted plus what
it asks, at most `MAX_STEP_UPS` times an hour per person and server.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx2
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from mcp.client.auth.utils import union_scopes
from redis.asyncio import Redis

from agent.mcp import ServerConfig
from agent.mcp.user import Refusal
from agent.outbound import Guard, trusted_hosts
from agent.protocols import RunContext
from agent.tools import ToolError
from bot.features.connections import oauth
from bot.features.connections.held import Confirmation, Held, HeldSignIns, SignIn
from bot.runtime.codec import Codec
from bot.runtime.keys import Keys

log = logging.getLogger(__name__)

REFRESH_EARLY = 120.0  # seconds before expiry a token is refreshed
CALLBACK_PATH = "/oauth/callback"
METADATA_PATH = "/client-metadata.json"  # Parley's Client ID Metadata Document
MAX_STEP_UPS = 2  # sign-ins for more scope per person and server within STEP_UP_WINDOW
STEP_UP_WINDOW = 3600


def fernet(keys: str) -> MultiFernet:
    """`PARLEY_SECRET_KEY`: comma-separated Fernet keys, the first one current."""
    return MultiFernet([Fernet(key.strip().encode()) for key in keys.split(",") if key.strip()])


@dataclass(frozen=True, kw_only=True)
class Pending(SignIn):
    """A sign-in under way, with the PKCE verifier that finishes it."""

    verifier: str


PENDING: Codec[Pending] = Codec(Pending)


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
        trusted: str | None = None,
        guard: Guard | None = None,
        idle: float = 90 * 86_400.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.servers = dict(servers)
        self.fernet = fernet(secret_key)
        self.redirect_uri = public_url.rstrip("/") + CALLBACK_PATH
        self.metadata_url = public_url.rstrip("/") + METADATA_PATH
        self.connect_ttl = connect_ttl
        self.idle = idle  # seconds a connection is kept unused
        self.held = HeldSignIns(redis, keys, self.fernet, connect_ttl, clock)
        # PARLEY_TRUSTED_HOSTS, and each server's own host: addresses used as given
        base = (guard or Guard()).with_trusted(trusted_hosts(trusted))
        self.guards = {
            name: base.with_trusted([config.url or ""]) for name, config in self.servers.items()
        }

    # --- Credentials ---------------------------------------------------------------------------

    async def token(self, server: str, run: RunContext) -> str | None:
        tokens = await self._tokens(server, run.platform, run.user_id)
        if tokens is not None:  # in use: kept for another idle period
            await self.redis.expire(
                self.keys.oauth_token(server, run.platform, run.user_id), int(self.idle)
            )
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
            fresh = await oauth.refresh(client, tokens, self.guards[server])
        except (oauth.OAuthError, ConnectionError) as exc:
            if isinstance(exc, oauth.OAuthError) and exc.code == "invalid_grant":
                log.info(
                    "MCP server %s: the grant is gone (%s); asking to connect again", server, exc
                )
                await self.disconnect(server, run.platform, run.user_id, revoke=True)
                return None
            # kept: a server error or an outage is no reason to make the person sign in again
            log.warning("MCP server %s: a refresh failed (%s); trying again later", server, exc)
            if (tokens.expires_at or 0) <= time.time():
                raise ConnectionError(f"{server}'s sign-in is not answering") from None
            return tokens.access_token
        await self.store(server, run.platform, run.user_id, fresh)
        return fresh.access_token

    async def connect_link(
        self,
        server: str,
        run: RunContext,
        question_id: str,
        refusal: Refusal | None = None,
    ) -> str:
        """A sign-in link; `refusal` is what the server answered a call with (401: the
        token is refused; 403 insufficient_scope: it wants more scope)."""
        challenge = (
            oauth.Challenge.of(
                httpx2.Response(
                    refusal.status, headers={"WWW-Authenticate": refusal.www_authenticate}
                )
            )
            if refusal is not None
            else None
        )
        scope: str | None = None
        if challenge is not None and challenge.insufficient_scope:
            scope = await self._step_up(server, run, challenge)
        elif challenge is not None:  # refused: worthless, and the server may have moved
            await self.redis.delete(self.keys.oauth_token(server, run.platform, run.user_id))
        try:
            client = await self._discovered(server, challenge)
        except oauth.OAuthError as exc:
            log.warning("MCP server %s: cannot start a sign-in (%s)", server, exc)
            raise ToolError(f"{server}'s sign-in is not working right now") from None
        if scope is not None:
            client = client.model_copy(update={"scope": union_scopes(scope, client.scope)})
            await self._keep_client(server, client)
        state = secrets.token_urlsafe(32)
        authorization = oauth.authorization(client, self.redirect_uri, state, client.scope)
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
        sealed = self._seal(PENDING.encode(pending).decode())
        await self.redis.set(
            self.keys.oauth_state(_digest(state)), sealed, px=int(self.connect_ttl * 1000)
        )
        return authorization.url

    async def _step_up(self, server: str, run: RunContext, challenge: oauth.Challenge) -> str:
        """The scope to ask for: what was granted plus what the server asks; bounded, and
        refused when the server asks for what it was already granted."""
        tokens = await self._tokens(server, run.platform, run.user_id)
        held = tokens.scope if tokens is not None else None
        wanted = set((challenge.scope or "").split())
        if not wanted or wanted <= set((held or "").split()):
            raise ToolError(f"{server} refuses the access it was granted")
        key = self.keys.oauth_step_up(server, run.platform, run.user_id)
        count = await self.redis.incr(key)
        if count == 1:
            await self.redis.expire(key, STEP_UP_WINDOW)
        if count > MAX_STEP_UPS:
            raise ToolError(f"{server} keeps asking for more access; ask its administrator")
        return union_scopes(held, challenge.scope) or ""

    async def finish(self, server: str, verifier: str, query: Mapping[str, str]) -> oauth.Tokens:
        """The tokens of an authorization response (`iss` checked, the code exchanged)."""
        client = await self.client(server)
        code = oauth.check_response(client, query)
        return await oauth.exchange(client, code, verifier, self.redirect_uri, self.guards[server])

    def client_metadata(self) -> str:
        """Parley's Client ID Metadata Document, served at `metadata_url`."""
        document = oauth.client_metadata(self.redirect_uri).model_dump(
            mode="json", exclude_none=True
        )
        return json.dumps({"client_id": self.metadata_url, **document})

    # --- the store -----------------------------------------------------------------------------

    async def client(self, server: str) -> oauth.Client:
        """What the server's latest sign-in discovered (discovering it when nothing is kept)."""
        raw = await self.redis.get(self.keys.oauth_client(server))
        if raw is not None and (opened := self._open(raw)) is not None:
            return oauth.Client.model_validate_json(opened)
        return await self._discovered(server)

    async def _discovered(
        self, server: str, challenge: oauth.Challenge | None = None
    ) -> oauth.Client:
        config, guard = self.servers[server], self.guards[server]
        found = await oauth.discover(config, guard, challenge)
        registration = await self._registration(server, found)
        client = oauth.client_for(found, registration)
        await self._keep_client(server, client)
        return client

    async def _registration(self, server: str, found: oauth.Discovery) -> oauth.Registration:
        """Parley's client at the discovered issuer: registered once per issuer and kept
        (encrypted: it may hold a secret); the operator's `client_id` is never kept."""
        config = self.servers[server]
        key = self.keys.oauth_registration(_digest(found.issuer))
        if config.client_id is None:
            raw = await self.redis.get(key)
            if raw is not None and (opened := self._open(raw)) is not None:
                kept = oauth.Registration.model_validate_json(opened)
                if kept.issuer == found.issuer:
                    return kept
        made = await oauth.register(
            config, found, self.guards[server], self.redirect_uri, self.metadata_url
        )
        if config.client_id is None and made.client_id != self.metadata_url:
            await self.redis.set(key, self._seal(made.model_dump_json()))
        return made

    async def _keep_client(self, server: str, client: oauth.Client) -> None:
        await self.redis.set(self.keys.oauth_client(server), self._seal(client.model_dump_json()))

    async def take_pending(self, state: str) -> Pending | None:
        """The sign-in `state` started, once: a second use, or a forged state, finds None."""
        raw = await self.redis.getdel(self.keys.oauth_state(_digest(state)))
        opened = self._open(raw) if raw is not None else None
        return PENDING.decode(opened) if opened is not None else None

    async def hold(self, pending: Pending, tokens: oauth.Tokens) -> str:
        """Keep a sign-in's tokens until `pending`'s person confirms them; the code to type."""
        return await self.held.hold(
            Held(**pending.sign_in(), tokens=tokens.model_dump_json(), expires=0.0)
        )

    async def confirm(
        self, platform: str, user_id: str, conversation_id: str, is_direct: bool, code: str
    ) -> Confirmation | None:
        """The person typed `code`: the held sign-in it names becomes theirs. None when
        nothing of theirs is held (the message is not a code, just a message)."""
        if not await self.held.any_for(platform, user_id):
            return None
        found = await self.held.confirm(platform, user_id, conversation_id, is_direct, code)
        if found.held is not None and found.held.server in self.servers:
            tokens = oauth.Tokens.model_validate_json(found.held.tokens)
            await self.store(found.held.server, platform, user_id, tokens)
        return found

    async def store(self, server: str, platform: str, user_id: str, tokens: oauth.Tokens) -> None:
        key = self.keys.oauth_token(server, platform, user_id)
        await self.redis.set(key, self._seal(tokens.model_dump_json()), ex=int(self.idle))

    async def disconnect(
        self, server: str, platform: str, user_id: str, *, revoke: bool = False
    ) -> bool:
        """Forget the person's tokens; with `revoke`, also ask the server to end the grant
        (best effort: forgotten here either way)."""
        tokens = await self._tokens(server, platform, user_id) if revoke else None
        gone = bool(await self.redis.delete(self.keys.oauth_token(server, platform, user_id)))
        if tokens is not None:
            try:
                await oauth.revoke(await self.client(server), tokens, self.guards[server])
            except (oauth.OAuthError, ConnectionError) as exc:
                log.warning("MCP server %s: could not revoke a token (%s)", server, exc)
        return gone

    async def remove_person(self, platform: str, user_id: str) -> list[str]:
        """Someone who no longer uses Parley: every grant of theirs is revoked (where the
        server can) and forgotten; the servers it was for."""
        removed: list[str] = []
        for server in self.servers:
            if await self.disconnect(server, platform, user_id, revoke=True):
                removed.append(server)
        return removed

    async def rekey(self) -> tuple[int, int]:
        """Everything sealed, sealed again with the first of `PARLEY_SECRET_KEY`'s keys (after
        a new key was put first): (re-encrypted, unreadable with any key and left alone)."""
        done = unreadable = 0
        async for key in self.redis.scan_iter(match=f"{self.keys.prefix}:oauth:*", count=500):
            if (await self.redis.type(key)) not in (b"string", "string"):
                continue  # the refresh locks and step-up counters hold nothing sealed
            raw = await self.redis.get(key)
            if raw is None:
                continue
            try:
                sealed = self.fernet.rotate(raw)
            except InvalidToken:
                unreadable += 1
                continue
            if await self.redis.set(key, sealed, keepttl=True, xx=True):
                done += 1
        return done, unreadable

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
            return self.fernet.decrypt(raw).decode()
        except InvalidToken:  # another key, or tampered with: as good as absent
            log.warning(
                "a stored connection could not be decrypted (was PARLEY_SECRET_KEY changed?)"
            )
            return None


def _fresh(tokens: oauth.Tokens) -> bool:
    return tokens.expires_at is None or tokens.expires_at - time.time() > REFRESH_EARLY


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()
