"""`parley console`: Parley in a terminal, for trying it without a chat platform.

The terminal is one more chat platform (`ConsoleAdapter` in console_view.py): each line
becomes an event for the same conversation engine and executor the workers run, without
the inbox. Questions show their options numbered and approvals show the plan and ask y/N;
the answer becomes a button press (or, for a "no" with a reason, a message). The
conversation carries over between objectives, like a chat thread.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import re
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TextIO

import redis.asyncio as aioredis

from adapters.base import Inbound
from agent.llm.base import ChatModel
from agent.loop import Agent
from bot.config import Settings
from bot.conversation.commands import Commands
from bot.conversation.connection_commands import ConnectionCommands
from bot.conversation.engine import LOST_TEXT, STATUS_LINES
from bot.conversation.executor import Executor
from bot.conversation.render import APPROVE, REJECT
from bot.conversation.running import Runner
from bot.conversation.schedule_commands import ScheduleCommands
from bot.conversation.scheduled import Objectives
from bot.conversation.yes_no import verdict
from bot.ops.invocation import parley_command, source_checkout
from bot.ops.service_checks import check_anthropic, check_ollama
from bot.runtime.connections import Connections
from bot.runtime.decisions import DecisionStore
from bot.runtime.keys import Keys
from bot.runtime.locks import ConversationLocks
from bot.runtime.outbox import Outbox
from bot.runtime.schedules import ScheduleStore
from bot.runtime.sessions import SessionStore
from bot.runtime.stops import StopRequest, Stops
from bot.wiring.compose import build_agent
from bot.wiring.connection import redis_connection
from bot.wiring.console_schedules import ConsoleScheduler, ConsoleSchedules, ended
from bot.wiring.console_view import (
    LIST_ACTIONS,
    ConsoleAdapter,
    ConsoleView,
    Person,
    is_approval,
)
from bot.wiring.demo import BANNER as DEMO_BANNER
from bot.wiring.demo import DemoModel
from bot.wiring.mcp_setup import build_connections, build_toolbox
from bot.wiring.memory_setup import open_memory
from bot.wiring.models import build_chat_model

log = logging.getLogger(__name__)

NO_PROVIDER = """\
Parley has no language model to talk to. Configure one of, in {where}:
  • Anthropic: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL if you use a proxy), or
  • Ollama: run `ollama serve` at {host} (or set OLLAMA_HOST) and `ollama pull {model}`
    (or set OLLAMA_MODEL to a model you have pulled).
Then run `{parley} doctor` to check. To see Parley work first, without a model:
`{parley} console --demo` answers with a scripted stand-in."""
NO_MODEL = 78  # EX_CONFIG: `make run` ends here without a make error (Makefile)

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

    async def ask_or(self, prompt: str, due: asyncio.Queue[Inbound]) -> str | Inbound | None:
        """As `ask`, unless one of Parley's own objectives (a schedule's slot) comes due first:
        then that, on a line of its own; the prompt is shown again after it."""
        print(prompt, end="", file=self.out, flush=True)
        reading = asyncio.create_task(self.reader.readline())
        waiting = asyncio.create_task(due.get())
        await asyncio.wait({reading, waiting}, return_when=asyncio.FIRST_COMPLETED)
        for task in (reading, waiting):
            task.cancel()  # neither loses what it got: a queue's get gives up cleanly
        await asyncio.gather(reading, waiting, return_exceptions=True)
        if not reading.cancelled():
            if not waiting.cancelled():
                due.put_nowait(waiting.result())  # both at once: the typed line first
            line = reading.result()
            return line if line in (None, CTRL_C) else line.strip()
        self.say()
        return waiting.result()

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
    *,
    schedules: ScheduleStore | None = None,
    connections: Connections | None = None,
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
        objectives=Objectives(store=schedules) if schedules is not None else None,
        schedules=ScheduleCommands(store=schedules) if schedules is not None else None,
        connections=ConnectionCommands(connections),
    )


async def run_console(
    settings: Settings,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
    *,
    demo: bool = False,
) -> int:
    problem = None if demo else await provider_problem(settings)
    if problem is not None:
        print(problem, file=stdout, flush=True)
        return NO_MODEL
    chat = Chat(stdin, stdout)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, chat.interrupt)
    async with redis_connection(settings) as redis:
        model: ChatModel = DemoModel() if demo else build_chat_model(settings, redis)
        memory = await open_memory(settings, redis)
        person = Person(getpass.getuser())
        schedules = ConsoleSchedules(redis, settings, person.conversation.thread_id or "")
        scheduler = ConsoleScheduler(stdout, schedules.store)
        toolbox = build_toolbox(settings)
        if toolbox is not None:
            await toolbox.start()
        agent = build_agent(
            settings, redis, model=model, memory=memory, scheduler=scheduler, tool_source=toolbox
        )
        adapter = ConsoleAdapter(view=ConsoleView(out=stdout))
        executor = console_executor(
            settings,
            redis,
            agent,
            adapter,
            Commands(memory),
            schedules=schedules.store,
            connections=build_connections(settings, redis),
        )
        stops = executor.stops = Stops(redis, Keys(settings.redis.key_prefix))
        locks = ConversationLocks(
            redis,
            Keys(settings.redis.key_prefix),
            lease=settings.runtime.lock_lease,
            ttl=settings.runtime.session_ttl,
        )

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
        if demo:
            chat.say(DEMO_BANNER)
        schedules.start()
        try:
            while True:
                event = await next_event(chat, adapter, person, schedules.due)
                if event is None:
                    break
                await chat.attempt(handle(event))
        finally:
            if ending := await schedules.close():
                chat.say(f"\n{ended(ending)}")
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


async def next_event(
    chat: Chat, adapter: ConsoleAdapter, person: Person, due: asyncio.Queue[Inbound]
) -> Inbound | None:
    """What happens next: a line at the prompt, the answer to what Parley asked, a choice
    from a list it showed, or a schedule's slot that came due; None when the person leaves."""
    waiting, adapter.waiting = adapter.waiting, None
    if waiting is not None and waiting.decision_id in LIST_ACTIONS:
        choice = await chat.ask("a number, or Enter to go on> ")
        if choice is None:
            return None
        if choice.isdigit() and 1 <= int(choice) <= len(waiting.buttons):
            return person.presses(waiting.decision_id or "", waiting.buttons[int(choice) - 1].value)
        if choice and choice != CTRL_C:
            return person.says(choice)  # not a choice: a request of its own
    elif waiting is not None and waiting.decision_id is not None:
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
        text = await chat.ask_or("\nyou> ", due)
        if text is None or not isinstance(text, str):
            return text  # the end of input, or a schedule's slot
        if text in (CTRL_C, "/quit", "/exit"):
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
