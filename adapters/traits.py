"""What code outside an adapter needs to know of a platform, declared by the adapter itself.

Each adapter package that neutral code may meet declares its `Traits` in
`adapters/<platform>/traits.py` (`TRAITS`); `of(platform)` finds it by the platform's name,
so nothing outside the adapter writes a platform's name to decide how it behaves. A platform
without such a module (the console) gets `NEUTRAL`: people named by name, no addresses.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from adapters.base import ConversationKey


def _no_address(rest: str) -> ConversationKey | None:
    return None


@dataclass(frozen=True, kw_only=True)
class Traits:
    name: str
    # the credential a chat on this platform needs before Parley can post there
    token_setting: str = ""
    # how a triggers file or an MCP allow entry writes a chat here ("telegram:<chat id>")
    address_hint: str = ""
    max_text: int = 4096  # the longest message text the platform takes
    # how a message names a person so that it pings them ("<@{user_id}>"); else by name
    person: str | None = None
    # the written address of a chat after "<platform>:", and back (None: not an address)
    address: Callable[[ConversationKey], str] = lambda key: key.chat_id
    parse: Callable[[str], ConversationKey | None] = _no_address
    is_direct: Callable[[ConversationKey], bool] = lambda key: False
    # whether a chat id written in an allow entry is really a person's id (no chat has it)
    person_like: Callable[[str], bool] = lambda chat: False

    def mention(self, user_id: str, name: str) -> str:
        if self.person:
            return self.person.format(user_id=user_id)
        return name or user_id

    def written(self, key: ConversationKey) -> str:
        """The conversation as a triggers file writes it: `<platform>:<address>`."""
        return f"{self.name}:{self.address(key)}"


NEUTRAL = Traits(name="")


@functools.cache
def of(platform: str) -> Traits:
    """The platform's declared traits, or NEUTRAL for one that declares none."""
    if not platform.isidentifier():
        return NEUTRAL
    name = f"adapters.{platform}.traits"
    try:
        found = importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # no adapter package of that name
        found = False
    if not found:
        return NEUTRAL
    traits: Traits = importlib.import_module(name).TRAITS
    return traits


def known() -> list[Traits]:
    """Every platform whose adapter declares traits, by name."""
    import adapters

    names = (m.name for m in pkgutil.iter_modules(adapters.__path__) if m.ispkg)
    return sorted((t for t in map(of, names) if t is not NEUTRAL), key=lambda t: t.name)


def mention(platform: str, user_id: str, name: str) -> str:
    """How a message names a person: a mention that can ping where the platform has one,
    elsewhere their name."""
    return of(platform).mention(user_id, name)
