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
import signal
import sys
from typing import TYPE_CHECKING, TextIO

import redis.asyncio as aioredis

from adapters.base import Inbound
from agent.llm.base import ChatModel
from agent.loop import Agent
from bot.config import Settings
from bot.conversation.commands import Commands
from bot.conversation.engine import LOST_TEXT, STATUS_LINES
from bot.conversation.executor import Executor
from bot.conversation.limits import Limits
from bot.conversation.render import APPROVE, REJECT
from bot.conversation.running import Charge, Runner
from bot.conversation.voice import Voice
from bot.conversation.yes_no import verdict
from bot.features.connections.commands import ConnectionCommands
from bot.features.schedules.commands import ScheduleCommands
from bot.features.schedules.console import ConsoleScheduler, ConsoleSchedules, ended
from bot.features.schedules.runs import Objectives
from bot.features.schedules.store import ScheduleStore
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
from bot.wiring.console_input import CTRL_C, Chat, yes_or_no
from bot.wiring.console_view import (
    LIST_ACTIONS,
    ConsoleAdapter,
    ConsoleView,
    Person,
    is_approval,
)
from bot.wiring.demo import BANNER as DEMO_BANNER
from bot.wiring.demo import DemoModel
from bot.wiring.mcp_setup import build_toolbox, personal_servers
from bot.wiring.memory_setup import open_memory
from bot.wiring.models import build_chat_model

if TYPE_CHECKING:  # the OAuth code loads the MCP SDK; only per-user servers need it
    from bot.features.connections.store import Connections

log = logging.getLogger(__name__)

NO_PROVIDER = """\
Parley has no language model to talk to. Configure one of, in {where}:
  • Anthropic: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL if you use a proxy), or
  • Ollama: run `ollama serve` at {host} (or set OLLAMA_HOST) and `ollama pull {model}`
    (or set OLLAMA_MODEL to a model you have pulled).
Then run `{parley} doctor` to check. To see Parley work first, without a model:
`{parley} console --demo` answers with a scripted stand-in."""
PERSONAL_LEFT_OUT = (
    "({servers}: MCP servers that act as the person who asked are left out here — their "
    "sign-in comes back to Parley's service, not to the console; use them in Slack or Telegram.)"
)
NO_MODEL = 78  # EX_CONFIG: `make run` ends here without a make error (Makefile)


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


def console_executor(
    settings: Settings,
    redis: aioredis.Redis,
    agent: Agent,
    adapter: ConsoleAdapter,
    commands: Commands,
    *,
    schedules: ScheduleStore | None = None,
    connections: Connections | None = None,
    charge: Charge | None = None,
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
            charge=charge,
            outbox=outbox,
            lines=STATUS_LINES,
            stream_interval=streaming.interval if streaming.enabled else None,
            stream_first_show=streaming.first_show,
        ),
        max_message_chars=settings.agent.max_message_chars,
        features=[
            Voice(transcriber=None),  # the console takes no voice notes: said so, if one came
            *([ScheduleCommands(store=schedules)] if schedules is not None else []),
            *([Objectives(store=schedules)] if schedules is not None else []),
            ConnectionCommands(connections),
        ],
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
        # the console's tokens count towards the day's budgets like the service's, for /status
        limits = Limits(redis, Keys(settings.redis.key_prefix).prefix, settings.limits)
        toolbox = build_toolbox(settings)  # no sign-in comes back here: no per-user servers
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
            Commands(memory, limits.usage_text),
            schedules=schedules.store,
            charge=limits.charge_event,
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
        if personal := personal_servers(settings)[0]:
            chat.say(PERSONAL_LEFT_OUT.format(servers=", ".join(personal)))
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
            await limits.flush_at_stop(within=2.0)
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
