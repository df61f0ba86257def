"""Slack installations (one bot token per workspace, or per org-wide install) and OAuth states,
kept in Redis for every process: Bolt's `AsyncInstallationStore` and `AsyncOAuthStateStore`.

Each installation is stored as JSON encrypted with `PARLEY_SECRET_KEY` (Fernet), like connected
accounts: no token is ever in Redis in plain text. A workspace install lives under its team
id, an org-wide (Enterprise Grid) install under its enterprise id; a workspace of an org-wide
install is found through the enterprise the gateway saw its events come with (`note_team`),
since a conversation names only its workspace. Uninstalling (`app_uninstalled`) or a revoked
bot token (`tokens_revoked`) deletes the installation and that link, and raises a counter
(`removals`) by which every process knows its cached tokens are stale. An install from a
workspace or organisation not on `PARLEY_SLACK_ALLOWED_TEAMS` is refused.

An OAuth state is a random value kept for `state_ttl` seconds and good once (GETDEL).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from cryptography.fernet import Fernet, InvalidToken
from slack_bolt.error import BoltError
from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore

from bot.runtime.codec import Codec, as_text
from bot.runtime.keys import Keys

log = logging.getLogger(__name__)

# The SDK's own copy of an installation, read back by `Installation(**record)`. Its times are
# stored as the SDK's numbers: it reads ISO text only with "+00:00", never pydantic's "Z".
# Records written before the codec hold `str(datetime)`, which it reads too.
RECORD: Codec[dict[str, Any]] = Codec(dict[str, Any])


def _record(installation: Installation) -> dict[str, Any]:
    return {
        **installation.to_dict_for_copying(),
        "installed_at": installation.installed_at,
        "bot_token_expires_at": installation.bot_token_expires_at,
        "user_token_expires_at": installation.user_token_expires_at,
    }


class NotAllowed(BoltError):
    """An install from a workspace or organisation the allowlist does not name."""


class RedisInstallations(AsyncInstallationStore):
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        *,
        secret_key: str,
        allowed_teams: Sequence[str] = (),
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.fernet = Fernet(secret_key.encode())
        self.allowed_teams = tuple(allowed_teams)

    # --- writing ------------------------------------------------------------------------------

    async def async_save(self, installation: Installation) -> None:
        org = bool(installation.is_enterprise_install)
        ids = (
            (installation.enterprise_id,)
            if org
            else (installation.team_id, installation.enterprise_id)
        )
        if self.allowed_teams and not any(i and i in self.allowed_teams for i in ids):
            log.warning(
                "refused a Slack install from %s %s: not on PARLEY_SLACK_ALLOWED_TEAMS",
                "organisation" if org else "workspace",
                ids[0],
            )
            raise NotAllowed("this workspace may not install Parley")
        data = RECORD.encode(_record(installation))
        key = self._key(installation.enterprise_id, installation.team_id, org)
        await self.redis.set(key, self.fernet.encrypt(data))
        log.info(
            "Slack installed in %s %s",
            "organisation" if org else "workspace",
            installation.enterprise_id if org else installation.team_id,
        )

    async def async_save_bot(self, bot: Bot) -> None:
        raise NotImplementedError("installations are saved whole (async_save)")

    async def note_team(self, enterprise_id: str, team_id: str) -> None:
        """`team_id` is a workspace of the organisation `enterprise_id` (an org-wide install)."""
        await self.redis.set(self.keys.slack_grid_team(team_id), enterprise_id)

    # --- reading ------------------------------------------------------------------------------

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        if is_enterprise_install or (team_id is None and enterprise_id):
            return await self._load(self._key(enterprise_id, None, True))
        if team_id is None:
            return None
        found = await self._load(self._key(enterprise_id, team_id, False))
        if found is not None:
            return found
        # a workspace of an org-wide install: the organisation's
        org = enterprise_id or as_text(await self.redis.get(self.keys.slack_grid_team(team_id)))
        return await self._load(self._key(org, None, True)) if org else None

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        found = await self.async_find_installation(
            enterprise_id=enterprise_id,
            team_id=team_id,
            is_enterprise_install=is_enterprise_install,
        )
        return found.to_bot() if found is not None and found.bot_token else None

    # --- removing -----------------------------------------------------------------------------

    async def async_delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        await self.async_delete_installation(enterprise_id=enterprise_id, team_id=team_id)

    async def async_delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        """Everything stored for that workspace (or, with no team, that organisation)."""
        org = team_id is None
        keys = [self._key(enterprise_id, team_id, org)]
        if team_id is not None:
            keys.append(self.keys.slack_grid_team(team_id))
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(*keys)
            pipe.incr(self.keys.slack_installs_removed)
            removed, _ = await pipe.execute()
        if removed:
            log.info("Slack installation removed for %s", team_id or enterprise_id)

    async def removals(self) -> int:
        """How many removals there have been: tokens cached before the last one are stale."""
        return int(await self.redis.get(self.keys.slack_installs_removed) or 0)

    # --- inside -------------------------------------------------------------------------------

    def _key(self, enterprise_id: str | None, team_id: str | None, org: bool) -> str:
        if org:
            return self.keys.slack_install(f"org:{enterprise_id or '-'}")
        return self.keys.slack_install(f"team:{team_id or '-'}")

    async def _load(self, key: str) -> Installation | None:
        raw = await self.redis.get(key)
        if raw is None:
            return None
        try:
            data = RECORD.decode(self.fernet.decrypt(raw))
        except (InvalidToken, ValueError):
            log.warning(
                "a stored Slack installation could not be read (PARLEY_SECRET_KEY changed?)"
            )
            return None
        return Installation(**data)


class RedisOAuthStates(AsyncOAuthStateStore):
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, ttl: float = 600.0) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl_ms = int(ttl * 1000)

    @property
    def logger(self) -> logging.Logger:
        return log

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        state = secrets.token_urlsafe(24)
        await self.redis.set(self.keys.slack_oauth_state(state), "1", px=self.ttl_ms)
        return state

    async def async_consume(self, state: str) -> bool:
        if not state or len(state) > 200:
            return False
        return await self.redis.getdel(self.keys.slack_oauth_state(state)) is not None
