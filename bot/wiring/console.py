"""`parley console`: Parley in a terminal, for trying it without a chat platform.

The terminal is one more chat platform (`ConsoleAdapter` in console_view.py): each line
becomes an event for the same conversation engine and executor the workers run, without
the inbox. Questions show their options numbered and approvals show the plan and ask y/N;
the answer becomes a button press (or, for a "no" with a reason, a message). The
conversation carries over between objectives, like a chat thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TextIO

import redis.asyncio as aioredis

from adapters.base import Inbound
from agent.loop import Agent
from agent.protocols import RunContext
from bot.config import Settings
from bot.conversation.commands import Commands
from bot.conversation.engine import LOST_TEXT, STATUS_LINES
from bot.conversation.executor import Executor
from bot.conversation.render import APPROVE, REJECT
from bot.conversation.running import Runner
from bot.conversation.yes_no import verdict
from bot.ops.invocation import parley_command, source_checkout
from bot.ops.service_checks import check_anthropic, check_ollama
from bot.runtime.decisions import DecisionStore
from bot.runtime.keys import Keys
from bot.runtime.locks import ConversationLocks
from bot.runtime.outbox import Outbox
from bot.runtime.sessions import SessionStore
from bot.runtime.stops import StopRequest, Stops
from bot.wiring.compose import build_agent
from bot.wiring.connection import redis_connection
from bot.wiring.console_view import ConsoleAdapter, ConsoleView, Person, is_approval
from bot.wiring.mcp_setup import build_toolbox
from bot.wiring.memory_setup import open_memory
from bot.wiring.models import build_chat_model

log = logging.getLogger(__name__)

NO_PROVIDER = """\
Parley has no language model to talk to. Configure one of, in {where}:
  • Anthropic: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL if you use a proxy), or
  • Ollama: run `ollama serve` at {host} (or set OLLAMA_HOST) and `ollama pull {model}`
    (or set OLLAMA_MODEL to a model you have pulled).
Then run `{parley} doctor` to check."""

NO = {"n", "no", "nope", "nah", "reject", "rejected", "don't", "dont", "stop", "cancel"}
CTRL_C = "\x03"  # what `LineReader.readline` returns after Ctrl-C


def yes_or_no(text: str) -> bool | None:
    """True for a clear yes, False for a no (Enter, or a no with a reason), None otherwise.

    A yes is read as in the chats (`yes_no.verdict`): "yes, but to Carol" is no yes.
    """
    if not text.strip():
        return False
    typed = verdict(text)
    if typed is not None:
        return typed
    words = re.findall(r"[a-z']+", text.lower())
    return False if words and words[0] in NO else None


class LineReader:
    """Lines from a text stream, read on a daemon thread so Ctrl-C never waits for Enter."""

    def __init__(self, stream: TextIO) -> None:
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._ended = False
        loop = asyncio.get_running_loop()

        def pump() -> None:
            for line in iter(stream.readline, ""):
                if not _hand_over(loop, self._lines, line):
                    return
            _hand_over(loop, self._lines, None)

        threading.Thread(target=pump, name="console-input", daemon=True).start()

    async def readline(self) -> str | None:
        """The next line without its newline; None at the end of input; CTRL_C after Ctrl-C."""
        if self._ended:
            return None
        line = await self._lines.get()
        if line is None:
            self._ended = True
            return None
        return line.rstrip("\n")

    def interrupt(self) -> None:
        self._lines.put_nowait(CTRL_C)


def _hand_over(
    loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[str | None], line: str | None
) -> bool:
    try:
        loop.call_soon_threadsafe(lines.put_nowait, line)
    except RuntimeError:  # the console has closed its loop
        return False
    return True


class ConsoleScheduler:
    """Reminders for a terminal session: printed when due while the console runs."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tasks: set[asyncio.Task[None]] = set()

    async def schedule_reminder(self, text: str, due_at: float, context: RunContext) -> str:
        async def later() -> None:
            await asyncio.sleep(max(0.0, due_at - time.time()))
            print(f"\n⏰ Reminder: {text}", file=self.out, flush=True)

        task = asyncio.create_task(later())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return f"console-{len(self.tasks)}"

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def provider_problem(settings: Settings) -> str | None:
    checks = await asyncio.gather(check_anthropic(settings), check_ollama(settings))
    if any(check.status == "ok" for check in checks):
        return None
    details = "\n".join(f"  {c.name}: {c.detail}" for c in checks)
    message = NO_PROVIDER.format(
        where=".env (copy .env.example)" if source_checkout() else "the environment or .env",
        host=settings.ollama.host,
        model=settings.ollama.model,
        parley=parley_command(),
    )
    return f"{message}\n\nWhat I found:\n{details}"


class Chat:
    """The terminal side: what the person types, and Ctrl-C.

    Ctrl-C while a request runs stops it as /cancel and the platforms' stop buttons do (at the
    run's next step, saying what was stopped); a second Ctrl-C cancels it outright. At the
    prompt Ctrl-C leaves.
    """

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self.out = stdout
        self.reader = LineReader(stdin)
        self.request: asyncio.Task[None] | None = None
        self.on_stop: Callable[[], None] | None = None  # asks the running run to stop
        self._stopping = False

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    async def ask(self, prompt: str) -> str | None:
        """A stripped line; None at the end of input; CTRL_C after Ctrl-C (never a typed line)."""
        print(prompt, end="", file=self.out, flush=True)
        line = await self.reader.readline()
        return line if line in (None, CTRL_C) else line.strip()

    def interrupt(self) -> None:
        if self.request is None or self.request.done():
            self.reader.interrupt()
        elif self.on_stop is not None and not self._stopping:
            self._stopping = True
            self.on_stop()
        else:
            self.request.cancel()

    async def attempt(self, work: Coroutine[Any, Any, None]) -> None:
        """Run one request; Ctrl-C stops it, a second Ctrl-C cancels it."""
        self._stopping = False
        self.request = asyncio.create_task(work)
        try:
            await asyncio.wait({self.request})
        finally:
            task, self.request = self.request, None
            if not task.done():
                task.cancel()
        if task.cancelled():
            self.say("\n(cancelled)")
            return
        task.result()


def console_executor(
    settings: Settings,
    redis: aioredis.Redis,
    agent: Agent,
    adapter: ConsoleAdapter,
    commands: Commands,
) -> Executor:
    """The workers' executor, on the console's adapter and without the inbox."""
    keys = Keys(settings.redis.key_prefix)
    runtime = settings.runtime
    outbox = Outbox(redis, keys, ttl=runtime.dedup_ttl, lost_text=LOST_TEXT, attempts=1)
    streaming = settings.streaming
    return Executor(
        agent=agent,
        adapters={"console": adapter},
        sessions=SessionStore(redis, keys, ttl=runtime.session_ttl),
        decisions=DecisionStore(redis, keys, ttl=runtime.decision_ttl),
        outbox=outbox,
        commands=commands,
        runner=Runner(
            outbox=outbox,
            lines=STATUS_LINES,
            stream_interval=streaming.interval if streaming.enabled else None,
            stream_first_show=streaming.first_show,
        ),
        max_message_chars=settings.agent.max_message_chars,
    )


async def run_console(
    settings: Settings, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout
) -> int:
    problem = await provider_problem(settings)
    if problem is not None:
        print(problem, file=stdout, flush=True)
        return 2
    chat = Chat(stdin, stdout)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, chat.interrupt)
    async with redis_connection(settings) as redis:
        model = build_chat_model(settings, redis)
        memory = await open_memory(settings, redis)
        scheduler = ConsoleScheduler(stdout)
        toolbox = build_toolbox(settings)
        if toolbox is not None:
            await toolbox.start()
        agent = build_agent(
            settings, redis, model=model, memory=memory, scheduler=scheduler, tool_source=toolbox
        )
        adapter = ConsoleAdapter(view=ConsoleView(out=stdout))
        executor = console_executor(settings, redis, agent, adapter, Commands(memory))
        stops = executor.stops = Stops(redis, Keys(settings.redis.key_prefix))
        locks = ConversationLocks(
            redis,
            Keys(settings.redis.key_prefix),
            lease=settings.runtime.lock_lease,
            ttl=settings.runtime.session_ttl,
        )
        person = Person(getpass.getuser())

        def stop() -> None:  # as a stop request would reach a worker's run
            request = StopRequest(
                conversation_id=person.conversation.id,
                entry_id=person.entry_id(),
                user_id=person.actor.user_id,
            )
            stops.receive(request)

        chat.on_stop = stop

        async def handle(event: Inbound) -> None:
            entry_id = person.entry_id()
            async with locks.held(person.conversation.id) as lease:
                assert lease is not None, "the console's conversation is its own"
                try:
                    await executor.handle(entry_id, event, lease)
                except Exception:
                    log.exception("the console could not handle a line")
                    await executor.fail_quietly(entry_id, event)
            await adapter.view.close()  # a cancelled request leaves no spinner behind

        chat.say(
            "Parley console — type a request, /memories, /forget N, /help; /quit to leave; "
            "Ctrl-C stops a request."
        )
        try:
            while True:
                event = await next_event(chat, adapter, person)
                if event is None:
                    break
                await chat.attempt(handle(event))
        finally:
            await adapter.stop()
            loop.remove_signal_handler(signal.SIGINT)
            if toolbox is not None:
                await toolbox.stop()
            await scheduler.close()
            await memory.embedder.close()
            close = getattr(model, "close", None)
            if close is not None:
                await close()
    chat.say()
    return 0


async def next_event(chat: Chat, adapter: ConsoleAdapter, person: Person) -> Inbound | None:
    """What the person does next: a line at the prompt, or the answer to what Parley asked;
    None when they leave."""
    waiting, adapter.waiting = adapter.waiting, None
    if waiting is not None and waiting.decision_id is not None:
        if is_approval(waiting):
            return await _approve(chat, person, waiting.decision_id)
        answer = await chat.ask("your answer> ")
        if answer is None:
            return None
        if answer == CTRL_C:
            return person.says("/cancel")  # they gave up on the question
        if answer.isdigit() and 1 <= int(answer) <= len(waiting.buttons):
            return person.presses(waiting.decision_id, waiting.buttons[int(answer) - 1].value)
        return person.says(answer)
    while True:
        text = await chat.ask("\nyou> ")
        if text in (None, CTRL_C, "/quit", "/exit"):
            return None
        if text:
            return person.says(text)


async def _approve(chat: Chat, person: Person, decision_id: str) -> Inbound | None:
    while True:
        decision = await chat.ask("Approve? [y/N] ")
        if decision is None:
            return None
        if decision == CTRL_C:
            return person.says("/cancel")
        approved = yes_or_no(decision)
        if approved is not None:
            break
        chat.say("Please answer yes or no.")
    chat.say("approved." if approved else "rejected.")
    if approved:
        return person.presses(decision_id, APPROVE)
    if not decision.strip() or verdict(decision) is False:
        return person.presses(decision_id, REJECT)
    return person.says(decision)  # a "no" with a reason: the reason goes to the model
