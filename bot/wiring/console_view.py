"""The terminal as a chat platform: `ConsoleAdapter` shows what the conversation engine sends,
and `Person` turns what is typed into events.

A plain message is printed after `parley> `; a prompt with buttons (a question's options,
an approval's plan) is printed and kept in `waiting` until the console asks the person.
While a run works, a spinner shows the current step; the answer is printed as it is written
(a live message, like a streamed answer on the platforms) and not printed again at the end.

On a terminal the status line is redrawn in place with a spinner; elsewhere (a pipe) it is
printed once per change.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from dataclasses import dataclass, field
from typing import TextIO

from adapters.base import (
    Actor,
    ConversationKey,
    InboundAction,
    InboundMessage,
    MessageRef,
    OutboundMessage,
    Platform,
)
from adapters.platform import ChatAdapter, LiveMessage
from bot.conversation.engine import STATUS_LINES
from bot.conversation.render import APPROVE, MEMORY_ACTION
from bot.features.connections.commands import CONNECTION_ACTION, STANDING_ACTION
from bot.features.schedules.commands import SCHEDULE_ACTION
from bot.wiring.console_format import Printed, terminal_text

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPIN_SECONDS = 0.1
_ids = itertools.count(1)


@dataclass(kw_only=True)
class ConsoleView:
    out: TextIO
    prefix: str = "parley> "
    source: str = ""  # the Markdown of the answer printed so far
    printed: Printed | None = None  # how much of it is on the screen, rendered
    _status: str = ""
    _spinner: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def tty(self) -> bool:
        isatty = getattr(self.out, "isatty", None)
        return bool(isatty and isatty())

    def text(self, markdown: str) -> str:
        """The model's Markdown as this terminal shows it."""
        return terminal_text(markdown, ansi=self.tty)

    async def say(self, text: str) -> None:
        await self._stop_spinner()
        self.end_line()
        self._write(f"{text}\n")

    async def show(self, text: str) -> None:
        """The answer so far (the whole of it, Markdown): print what is new."""
        await self._stop_spinner()
        if self.source and not text.startswith(self.source):
            self.end_line()  # not the same answer any more
        self.source = text
        printed = self.printed = self.printed or Printed(ansi=self.tty)
        started = bool(printed.shown)
        new = printed.more(text)
        if new:
            self._write(new if started else f"{self.prefix}{new}")

    async def reset(self, status: str | None) -> None:
        """What was printed was the model thinking aloud: it stays, the status follows."""
        self.end_line()
        self.status(status or STATUS_LINES.thinking)

    async def finish(self, answer: str) -> None:
        """End the run's display: the answer, unless it was already printed as it came."""
        await self._stop_spinner()
        printed = self.printed or Printed(ansi=self.tty)
        started = bool(printed.shown)
        rest = printed.rest(answer)
        if rest is None:  # printed text would read differently now: the answer anew
            self.end_line()
            self._write(f"{self.prefix}{self.text(answer)}\n")
        else:
            self._write(f"{rest}\n" if started else f"{self.prefix}{rest}\n")
        self.source, self.printed = "", None

    def end_line(self) -> None:
        if self.printed is not None and self.printed.shown:
            self._write("\n")
        self.source, self.printed = "", None

    async def close(self) -> None:
        await self._stop_spinner()

    def status(self, status: str) -> None:
        if status == self._status:
            return
        self._status = status
        if not self.tty:
            self._write(f"… {status}\n")
        elif self._spinner is None:
            self._spinner = asyncio.create_task(self._spin())

    async def _spin(self) -> None:
        for frame in itertools.cycle(FRAMES):
            self._write(f"\r\033[K{frame} {self._status}")
            await asyncio.sleep(SPIN_SECONDS)

    async def _stop_spinner(self) -> None:
        task, self._spinner = self._spinner, None
        self._status = ""
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self._write("\r\033[K")

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()


@dataclass(kw_only=True)
class ConsoleLive(LiveMessage):
    """The answer printed while it is written (a LiveMessage with no message to edit)."""

    view: ConsoleView
    conversation: ConversationKey
    message_id: str | None = None
    min_interval: float = 0.0

    async def show(self, text: str) -> None:
        await self.view.show(text)

    async def reset(self, status: str | None) -> None:
        await self.view.reset(status)

    async def discard(self) -> None:
        self.view.end_line()  # a question or plan follows what was thought aloud

    async def finish(self, message: OutboundMessage) -> MessageRef:
        await self.view.finish(message.text)
        return MessageRef(conversation=self.conversation, message_id=str(next(_ids)))


@dataclass(kw_only=True)
class ConsoleAdapter(ChatAdapter):
    view: ConsoleView
    platform: Platform = "console"
    progress_delay: float = 0.0  # a terminal shows every step at once
    waiting: OutboundMessage | None = None  # a prompt to put to the person next

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        await self.view.close()

    async def send(self, conversation: ConversationKey, message: OutboundMessage) -> MessageRef:
        if message.buttons and message.decision_id in LIST_ACTIONS:
            # a list with buttons (schedules, accounts): numbered, chosen at the next prompt
            self.waiting = message
            options = [f"  {n}. {b.label}" for n, b in enumerate(message.buttons, 1)]
            listing = self.view.text(message.text)
            await self.view.say("\n".join([f"{self.view.prefix}{listing}", *options]))
        elif message.buttons and message.decision_id not in (None, MEMORY_ACTION):
            self.waiting = message
            if is_approval(message):
                await self.view.say(f"parley wants to:\n{self.view.text(message.text)}")
            else:
                options = [f"  {n}. {b.label}" for n, b in enumerate(message.buttons, 1)]
                question = self.view.text(message.text)
                await self.view.say("\n".join([f"parley asks> {question}", *options]))
        else:
            await self.view.say(f"{self.view.prefix}{self.view.text(message.text)}")
        return MessageRef(conversation=conversation, message_id=str(next(_ids)))

    async def edit(self, ref: MessageRef, message: OutboundMessage) -> None:
        return None  # the console echoed the decision where it was made

    async def notify(self, action: InboundAction, text: str, *, alert: bool = False) -> None:
        # a toast only repeats what the console echoed, but for a choice from a list
        if alert or action.decision_id in LIST_ACTIONS:
            await self.view.say(f"{self.view.prefix}{text}")

    async def progress(self, conversation: ConversationKey, status: str | None) -> None:
        if status is None:
            await self.view.close()
        else:
            self.view.status(status)

    def live(
        self,
        conversation: ConversationKey,
        *,
        user_id: str,
        team_id: str | None,
        is_direct: bool,
        allowed_mentions: frozenset[str] = frozenset(),
        reply_to: str | None = None,
    ) -> ConsoleLive:
        return ConsoleLive(view=self.view, conversation=conversation)


# The buttons under a list (/schedules, /connections), not under a question or a plan.
LIST_ACTIONS = (SCHEDULE_ACTION, CONNECTION_ACTION, STANDING_ACTION)


def is_approval(message: OutboundMessage) -> bool:
    return any(button.value == APPROVE for button in message.buttons)


class Person:
    """The person at the terminal, and the events their lines become."""

    def __init__(self, user: str) -> None:
        # A conversation of its own for each console session, in the person's direct chat.
        self.conversation = ConversationKey(
            platform="console", chat_id="local", thread_id=uuid.uuid4().hex[:12]
        )
        self.actor = Actor(platform="console", user_id=user, name=user)
        self._last_ms = 0

    def entry_id(self) -> str:
        """Inbox-style ids, increasing, so the session knows which lines it has handled."""
        self._last_ms = max(int(time.time() * 1000), self._last_ms + 1)
        return f"{self._last_ms}-0"

    def says(self, text: str) -> InboundMessage:
        command, args = None, ""
        if text.startswith("/") and len(text) > 1:
            name, _, args = text[1:].partition(" ")
            command, args = name.lower(), args.strip()
        return InboundMessage(
            event_id=uuid.uuid4().hex,
            conversation=self.conversation,
            actor=self.actor,
            text=args if command else text,
            is_direct=True,
            command=command,
            args=args,
        )

    def presses(self, decision_id: str, choice: str) -> InboundAction:
        return InboundAction(
            event_id=uuid.uuid4().hex,
            conversation=self.conversation,
            actor=self.actor,
            decision_id=decision_id,
            choice=choice,
            is_direct=True,
        )
