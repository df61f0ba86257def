"""The chat commands: what /help says, and the commands that read memory or usage
(/memories, /forget, /correct, /why, /status, Forget buttons).

The engine (engine.py) answers /help, /start, /cancel and unknown commands itself and hands
the others over through its `Command` and `Forget` effects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from adapters.base import Addressing, Button, InboundAction, InboundMessage, OutboundMessage
from agent.protocols import MemoryRecord, MemoryStore, RunContext
from agent.provenance import learned
from bot.conversation.render import MEMORY_ACTION
from bot.conversation.shown import ShownList, ShownLists
from bot.conversation.texts import (
    ALREADY_FORGOTTEN,
    BARE_DIRECT,
    BARE_GROUP,
    BARE_THREAD,
    CORRECT_HOW,
    CORRECTED,
    FORGET,
    FORGET_NUMBER,
    FORGOT_ALL,
    FORGOTTEN,
    FORGOTTEN_TEXT,
    HELP,
    INSTRUCTIONS_FOOT,
    INSTRUCTIONS_HEAD,
    MEMORIES_FOOT,
    MEMORIES_HEAD,
    MORE_MEMORIES,
    NO_INSTRUCTIONS,
    NO_MEMORY,
    NO_MEMORY_NUMBER,
    NO_PAGE,
    NOT_ON_LIST,
    NOT_YOURS_TO_CORRECT,
    NOT_YOURS_TO_FORGET,
    NOTHING_REMEMBERED,
    NOTHING_USED,
    PAIRED,
    PAIRING_APPROVERS_ONLY,
    PAIRING_NOT_HERE,
    PAIRING_UNKNOWN,
    PAIRING_USAGE,
    REMEMBERED_MANY,
    REMEMBERED_ONE,
    SEE_MEMORIES,
    STATUS_TEXT,
    UNKNOWN_COMMAND,
    USED_HEAD,
    WHERE_GROUPS,
    WHERE_THREADS,
    WHICH_ONE,
)
from bot.runtime.pairing import Pairings, normalised
from bot.runtime.sessions import Session

log = logging.getLogger(__name__)


def help_text(addressing: Addressing) -> str:
    where = WHERE_THREADS if addressing.threads else WHERE_GROUPS if addressing.mention else ""
    return HELP.format(p=addressing.command_prefix, where=where)


def unknown_command(addressing: Addressing, name: str) -> str:
    return UNKNOWN_COMMAND.format(command=addressing.command(name), help=addressing.command("help"))


def bare_mention_line(addressing: Addressing, *, direct: bool) -> str:
    """What a bare mention of Parley gets: how to ask, in this platform's words."""
    help_ = addressing.shown("help")
    if not direct and addressing.threads:
        return BARE_THREAD.format(help=help_)
    if not direct and addressing.mention:
        return BARE_GROUP.format(mention=addressing.mention, help=help_)
    return BARE_DIRECT.format(help=help_)


MEMORIES_PAGE = 10


@dataclass(frozen=True, kw_only=True)
class CommandResult:
    text: str
    private: bool = False  # show only to the person who asked, where the platform can
    buttons: tuple[Button, ...] = ()  # Forget buttons, under MEMORY_ACTION


PLAIN = Addressing()  # no platform named: `/memories`
UsageText = Callable[[InboundMessage], Awaitable[str]]
EditList = Callable[[str, OutboundMessage], Awaitable[None]]  # message id, new content


def remembered_note(kept: list[MemoryRecord]) -> OutboundMessage | None:
    """The "I'll remember: …" note after extraction kept facts, with a Forget button each."""
    if not kept:
        return None
    if len(kept) == 1:
        text = REMEMBERED_ONE.format(text=kept[0].text)
        buttons: tuple[Button, ...] = (Button(label=FORGET, value=kept[0].id),)
    else:
        text = REMEMBERED_MANY + "\n".join(f"{n}. {m.text}" for n, m in enumerate(kept, 1))
        buttons = tuple(
            Button(label=FORGET_NUMBER.format(n=n), value=m.id) for n, m in enumerate(kept, 1)
        )
    return OutboundMessage(text=text, buttons=buttons, decision_id=MEMORY_ACTION)


@dataclass(frozen=True, kw_only=True)
class Refresh:
    """A /memories list shown again after one of its memories was forgotten."""

    message_id: str
    message: OutboundMessage
    shown: ShownList  # to keep once the list on screen shows it
    stale: ShownList  # to keep if the list could not be edited: the old numbers, less one


class Commands:
    def __init__(
        self,
        memory: MemoryStore | None,
        usage: UsageText | None = None,
        lists: ShownLists | None = None,
        pairings: Pairings | None = None,
        approvers: frozenset[str] = frozenset(),
    ) -> None:
        self.memory = memory
        self.usage = usage
        self.lists = lists
        self.pairings = pairings  # /pair: an approver accepts a pairing code
        self.approvers = approvers

    async def handle(
        self,
        event: InboundMessage,
        context: RunContext,
        session: Session,
        addressing: Addressing = PLAIN,
    ) -> CommandResult:
        command = (event.command or "").lower()
        if command == "memories":
            result, shown = await self._memories(context, event.args, addressing)
            if self.lists is not None and shown is not None:
                await self.lists.save(context.conversation_id, context.user_id, shown)
            return result
        if command == "forget":
            text = await self._forget(context, event.args, addressing)
            return CommandResult(text=text, private=True)
        if command == "pair":
            return CommandResult(text=await self._pair(event), private=True)
        if command == "correct":
            text = await self._correct(context, event.args, addressing)
            return CommandResult(text=text, private=True)
        if command == "why":
            return CommandResult(text=await self._why(context), private=True)
        if command == "instructions":
            result, shown = await self._instructions(context, addressing)
            if self.lists is not None and shown is not None:
                await self.lists.save(context.conversation_id, context.user_id, shown)
            return result
        assert command == "status", f"not a command answered here: {command}"
        lines = [STATUS_TEXT[session.status]]
        if self.usage is not None:
            lines.append(await self.usage(event))
        return CommandResult(text="\n".join(lines), private=True)

    async def _pair(self, event: InboundMessage) -> str:
        if self.pairings is None or event.actor.platform != self.pairings.platform:
            return PAIRING_NOT_HERE
        if event.actor.user_id not in self.approvers:
            return PAIRING_APPROVERS_ONLY
        if not event.args.strip():
            return PAIRING_USAGE
        request = await self.pairings.approve(event.args)
        if request is None:
            return PAIRING_UNKNOWN.format(code=normalised(event.args))
        log.info("pairing: %s admitted by %s", request.user_id, event.actor.user_id)
        return PAIRED.format(name=request.name, user_id=request.user_id)

    async def reply(
        self,
        event: InboundMessage,
        context: RunContext,
        session: Session,
        addressing: Addressing = PLAIN,
    ) -> OutboundMessage:
        """The answer to a command, as the message to send, in the platform's syntax."""
        result = await self.handle(event, context, session, addressing)
        return OutboundMessage(
            text=result.text,
            private_to=event.actor.user_id if result.private else None,
            buttons=result.buttons,
            decision_id=MEMORY_ACTION if result.buttons else None,
        )

    async def _memories(
        self, context: RunContext, args: str, addressing: Addressing = PLAIN
    ) -> tuple[CommandResult, ShownList | None]:
        if self.memory is None:
            return CommandResult(text=NO_MEMORY, private=True), None
        page = int(args) if args.strip().isdigit() and int(args) > 0 else 1
        offset = (page - 1) * MEMORIES_PAGE
        found = await self.memory.list_memories(context, offset=offset, limit=MEMORIES_PAGE)
        numbered = dict(enumerate(((m.id, m.text) for m in found.records), offset + 1))
        shown = ShownList(page=page, entries=numbered)
        if not found.records:
            text = NOTHING_REMEMBERED if page == 1 else NO_PAGE.format(page=page)
            return CommandResult(text=text, private=True), shown
        now = time.time()
        lines = [
            f"{number}. {memory.text} ({memory.scope_label}) — {learned(memory, context, now)}"
            for number, memory in enumerate(found.records, offset + 1)
        ]
        more = (
            MORE_MEMORIES.format(command=addressing.shown(f"memories {page + 1}"))
            if found.has_more
            else ""
        )
        text = (
            MEMORIES_HEAD.format(total=found.total)
            + "\n".join(lines)
            + MEMORIES_FOOT.format(
                one=addressing.shown("forget N"), all=addressing.shown("forget all"), more=more
            )
        )
        buttons = tuple(
            Button(label=FORGET_NUMBER.format(n=number), value=memory.id)
            for number, memory in enumerate(found.records, offset + 1)
        )
        return CommandResult(text=text, private=True, buttons=buttons), shown

    async def listed(self, context: RunContext, message_id: str | None) -> None:
        """The /memories list just asked for went out as `message_id`."""
        if self.lists is None or message_id is None:
            return
        shown = await self.lists.get(context.conversation_id, context.user_id)
        if shown is not None and shown.message_id is None:
            await self.lists.save(
                context.conversation_id, context.user_id, replace(shown, message_id=message_id)
            )

    async def refresh(self, context: RunContext, addressing: Addressing = PLAIN) -> Refresh | None:
        """The person's list on screen, shown again with fresh numbers after a Forget."""
        if self.lists is None:
            return None
        shown = await self.lists.get(context.conversation_id, context.user_id)
        if shown is None or shown.message_id is None:
            return None
        result, fresh = await self._memories(context, str(shown.page), addressing)
        if fresh is None:
            return None
        message = OutboundMessage(
            text=result.text, buttons=result.buttons, decision_id=MEMORY_ACTION
        )
        # Still listed on that page: what the old numbers may go on naming (a forgotten one
        # is gone from it, and memories only move up from later pages).
        listed = {memory_id for memory_id, _ in fresh.entries.values()}
        stale = shown.keeping(listed)
        fresh = replace(fresh, message_id=shown.message_id)
        return Refresh(message_id=shown.message_id, message=message, shown=fresh, stale=stale)

    async def refresh_on_screen(
        self, context: RunContext, edit: EditList, addressing: Addressing = PLAIN
    ) -> None:
        """Show the person's list again after a Forget; if it can't be edited (a Slack
        ephemeral message), its old numbers go on meaning what they showed."""
        refresh = await self.refresh(context, addressing)
        if refresh is None or self.lists is None:
            return
        try:
            await edit(refresh.message_id, refresh.message)
            kept = refresh.shown
        except Exception as exc:
            log.info("a memory list could not be shown again (%s)", type(exc).__name__)
            kept = refresh.stale
        await self.lists.save(context.conversation_id, context.user_id, kept)

    async def _forget(self, context: RunContext, args: str, addressing: Addressing = PLAIN) -> str:
        see = SEE_MEMORIES.format(command=addressing.shown("memories"))
        if self.memory is None:
            return NO_MEMORY
        target = args.strip().lower()
        if target == "all":
            count = await self.memory.forget(context)
            return FORGOT_ALL.format(count=count, s="s" if count != 1 else "")
        if not target.isdigit() or int(target) < 1:
            forget = addressing.shown("forget N"), addressing.shown("forget all")
            return WHICH_ONE.format(one=forget[0], see=see, all=forget[1])
        # the number means what the list on screen says
        found = await self._numbered(context, int(target), see)
        if isinstance(found, str):
            return found
        return await self._forget_one(context, *found)

    async def _numbered(self, context: RunContext, index: int, see: str) -> tuple[str, str] | str:
        """The memory (id, text) number `index` names (the list on screen, else the newest
        first), or why there is none."""
        assert self.memory is not None
        shown = (
            await self.lists.get(context.conversation_id, context.user_id) if self.lists else None
        )
        if shown is not None:
            if index not in shown.entries:
                return NOT_ON_LIST.format(index=index, see=see)
            return shown.entries[index]
        found = await self.memory.list_memories(context, offset=index - 1, limit=1)
        if not found.records:
            return NO_MEMORY_NUMBER.format(index=index, see=see)
        return found.records[0].id, found.records[0].text

    async def _correct(self, context: RunContext, args: str, addressing: Addressing) -> str:
        see = SEE_MEMORIES.format(command=addressing.shown("memories"))
        if self.memory is None:
            return NO_MEMORY
        number, _, text = args.strip().partition(" ")
        if not number.isdigit() or int(number) < 1 or not text.strip():
            return CORRECT_HOW.format(command=addressing.shown("correct N new words"), see=see)
        found = await self._numbered(context, int(number), see)
        if isinstance(found, str):
            return found
        memory_id, old = found
        corrected = await self.memory.correct(context, memory_id, text)
        if corrected is None:
            return NOT_YOURS_TO_CORRECT
        return CORRECTED.format(old=old, new=corrected.text)

    async def _instructions(
        self, context: RunContext, addressing: Addressing
    ) -> tuple[CommandResult, ShownList | None]:
        """This conversation's standing instructions, numbered for /forget like /memories."""
        if self.memory is None:
            return CommandResult(text=NO_MEMORY, private=True), None
        standing = await self.memory.instructions(context)
        shown = ShownList(page=1, entries={n: (m.id, m.text) for n, m in enumerate(standing, 1)})
        if not standing:
            return CommandResult(text=NO_INSTRUCTIONS, private=True), shown
        now = time.time()
        lines = [f"{n}. {m.text} — {learned(m, context, now)}" for n, m in enumerate(standing, 1)]
        foot = INSTRUCTIONS_FOOT.format(one=addressing.shown("forget N"))
        buttons = tuple(
            Button(label=FORGET_NUMBER.format(n=n), value=m.id) for n, m in enumerate(standing, 1)
        )
        text = INSTRUCTIONS_HEAD + "\n".join(lines) + foot
        return CommandResult(text=text, private=True, buttons=buttons), shown

    async def _why(self, context: RunContext) -> str:
        if self.memory is None:
            return NO_MEMORY
        used = await self.memory.used(context)
        if not used:
            return NOTHING_USED
        now = time.time()
        lines = [f"• {m.text} — {learned(m, context, now)}" for m in used]
        return USED_HEAD + "\n".join(lines)

    async def _forget_one(self, context: RunContext, memory_id: str, text: str) -> str:
        assert self.memory is not None
        if not await self.memory.forget(context, memory_id):
            return NOT_YOURS_TO_FORGET
        return FORGOTTEN_TEXT.format(text=text)

    async def forget_pressed(self, action: InboundAction, context: RunContext) -> str:
        """A Forget button under /memories (or under "I'll remember: …") was pressed."""
        if self.memory is None:
            return NO_MEMORY
        if not await self.memory.forget(context, action.choice):
            return ALREADY_FORGOTTEN
        return FORGOTTEN
