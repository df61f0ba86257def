"""`parley console`: the full agent in a terminal, for trying Parley without a chat platform.

Questions show their options numbered; approvals show the plan and ask y/N. The
conversation carries over between objectives, like a chat thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import re
import signal
import sys
import threading
import time
from collections.abc import Coroutine
from typing import Any, TextIO

from adapters.base import Actor, ConversationKey, InboundMessage
from agent.outcomes import AwaitingAnswer, AwaitingApproval, Failed, Finished, Outcome
from agent.protocols import RunContext
from agent.state import RunState
from bot.config import Settings
from bot.conversation.commands import Commands
from bot.conversation.engine import help_text
from bot.conversation.render import approval_text
from bot.ops.doctor import check_anthropic, check_ollama
from bot.runtime.sessions import Session
from bot.wiring.app import redis_connection
from bot.wiring.compose import build_agent
from bot.wiring.console_view import ConsoleView
from bot.wiring.mcp_setup import build_toolbox
from bot.wiring.memory_setup import open_memory
from bot.wiring.models import build_chat_model

NO_PROVIDER = """\
Parley has no language model to talk to. Configure one of:
  • Anthropic: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL if you use a proxy), or
  • Ollama: run `ollama serve` at {host} (or set OLLAMA_HOST) and `ollama pull {model}`
    (or set OLLAMA_MODEL to a model you have pulled).
Then run `parley doctor` to check."""

COMMANDS = ("memories", "forget", "help")  # answered here, without the model
YES = {"y", "yes", "yeah", "yep", "sure", "ok", "okay", "approve", "approved", "go"}
NO = {"n", "no", "nope", "nah", "reject", "rejected", "don't", "dont", "stop", "cancel"}
INTERRUPTED = "\x03"  # what `LineReader.readline` returns after Ctrl-C


def yes_or_no(text: str) -> bool | None:
    """True for yes ("yes please", "ok, go ahead"), False for no (and Enter), None otherwise."""
    words = re.findall(r"[a-z']+", text.lower())
    if not words:
        return False if not text.strip() else None
    if words[0] in YES or " ".join(words[:2]) in ("do it", "go ahead"):
        return True
    if words[0] in NO:
        return False
    return None


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
        """The next line without its newline; None at the end of input; INTERRUPTED."""
        if self._ended:
            return None
        line = await self._lines.get()
        if line is None:
            self._ended = True
            return None
        return line.rstrip("\n")

    def interrupt(self) -> None:
        self._lines.put_nowait(INTERRUPTED)


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
    message = NO_PROVIDER.format(host=settings.ollama.host, model=settings.ollama.model)
    return f"{message}\n\nWhat I found:\n{details}"


class Chat:
    """The terminal side: what Parley says, what the person types, and Ctrl-C.

    Ctrl-C while a request runs cancels that request only; at the prompt it leaves.
    """

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self.out = stdout
        self.reader = LineReader(stdin)
        self.request: asyncio.Task[Outcome] | None = None

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    async def ask(self, prompt: str) -> str | None:
        """A stripped line; None at the end of input; INTERRUPTED after Ctrl-C."""
        print(prompt, end="", file=self.out, flush=True)
        line = await self.reader.readline()
        return line if line in (None, INTERRUPTED) else line.strip()

    def interrupt(self) -> None:
        if self.request is not None and not self.request.done():
            self.request.cancel()
        else:
            self.reader.interrupt()

    async def attempt(self, work: Coroutine[Any, Any, Outcome]) -> Outcome | None:
        """Run one step of a request; None if Ctrl-C cancelled it."""
        self.request = asyncio.create_task(work)
        try:
            await asyncio.wait({self.request})
        finally:
            task, self.request = self.request, None
            if not task.done():
                task.cancel()
        if task.cancelled():
            self.say("\n(cancelled)")
            return None
        return task.result()


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
        user = getpass.getuser()
        context = RunContext(
            conversation_id="console:-:local:-",
            platform="console",
            user_id=user,
            chat_id="local",
            is_direct=True,
            user_name=user,
        )
        commands = Commands(memory)
        chat.say(
            "Parley console — type a request, /memories, /forget N, /help; /quit to leave; "
            "Ctrl-C cancels a request."
        )
        history: RunState | None = None
        view = ConsoleView(out=stdout)
        try:
            while True:
                text = await chat.ask("\nyou> ")
                if text in (None, INTERRUPTED, "/quit", "/exit"):
                    break
                if not text:
                    continue
                name, _, args = text[1:].partition(" ")
                if text.startswith("/") and name.lower() in COMMANDS:
                    event = InboundMessage(
                        event_id="console",
                        conversation=ConversationKey(platform="console", chat_id="local"),
                        actor=Actor(platform="console", user_id=user, name=user),
                        text=args,
                        is_direct=True,
                        command=name.lower(),
                        args=args.strip(),
                    )
                    if name.lower() == "help":
                        chat.say(f"parley> {help_text('console')}")
                        continue
                    result = await commands.handle(event, context, Session())
                    chat.say(f"parley> {result.text}")
                    continue
                outcome = await chat.attempt(
                    agent.run(text, context, history=history, on_progress=view.progress)
                )
                while outcome is not None:
                    await view.close()
                    if isinstance(outcome, Finished | Failed):
                        await view.finish(
                            outcome.answer if isinstance(outcome, Finished) else outcome.message
                        )
                        history = outcome.state
                        break
                    resumed = await _decide(chat, outcome)
                    if resumed is None:
                        break
                    outcome = await chat.attempt(
                        agent.resume(outcome.state, on_progress=view.progress, **resumed)
                    )
                await view.close()  # a cancelled request leaves no spinner behind
        finally:
            await view.close()
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


async def _decide(chat: Chat, outcome: Outcome) -> dict[str, Any] | None:
    """Ask the person what a suspended run waits for; None if they gave up on it."""
    if isinstance(outcome, AwaitingAnswer):
        chat.say(f"parley asks> {outcome.question}")
        for index, option in enumerate(outcome.options, 1):
            chat.say(f"  {index}. {option}")
        answer = await chat.ask("your answer> ")
        if answer in (None, INTERRUPTED):
            return None
        assert answer is not None
        if answer.isdigit() and 1 <= int(answer) <= len(outcome.options):
            answer = outcome.options[int(answer) - 1]
        return {"answer": answer}
    assert isinstance(outcome, AwaitingApproval)
    chat.say("parley wants to:")
    chat.say(approval_text(outcome))
    while True:
        decision = await chat.ask("Approve? [y/N] ")
        if decision in (None, INTERRUPTED):
            return None
        assert decision is not None
        approved = yes_or_no(decision)
        if approved is not None:
            break
        chat.say("Please answer yes or no.")
    chat.say("approved." if approved else "rejected.")
    reason = None if approved or decision.lower() in ("", "n", "no") else decision
    return {"approved": approved, "reason": reason}
