"""`parley console`: the full agent in a terminal, for trying Parley without a chat platform.

Questions show their options numbered; approvals show the plan and ask y/N. The
conversation carries over between objectives, like a chat thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import sys
import time
from typing import TextIO

from adapters.base import Actor, ConversationKey, InboundMessage
from agent.outcomes import AwaitingAnswer, AwaitingApproval, Failed, Finished, Outcome
from agent.protocols import RunContext
from agent.state import RunState
from bot.app import redis_connection
from bot.commands import Commands
from bot.compose import build_agent
from bot.config import Settings
from bot.doctor import check_anthropic, check_ollama
from bot.memory_setup import open_memory
from bot.models import build_chat_model
from bot.sessions import Session

NO_PROVIDER = """\
Parley has no language model to talk to. Configure one of:
  • Anthropic: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL if you use a proxy), or
  • Ollama: run `ollama serve` at {host} (or set OLLAMA_HOST) and `ollama pull {model}`
    (or set OLLAMA_MODEL to a model you have pulled).
Then run `parley doctor` to check."""

YES = {"y", "yes", "approve", "ok"}
COMMANDS = ("memories", "forget", "help")


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


async def run_console(
    settings: Settings, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout
) -> int:
    def say(text: str = "") -> None:
        print(text, file=stdout, flush=True)

    async def ask(prompt: str) -> str | None:
        print(prompt, end="", file=stdout, flush=True)
        line = await asyncio.to_thread(stdin.readline)
        return None if line == "" else line.strip()

    problem = await provider_problem(settings)
    if problem is not None:
        say(problem)
        return 2
    async with redis_connection(settings) as redis:
        model = build_chat_model(settings, redis)
        memory = await open_memory(settings, redis)
        scheduler = ConsoleScheduler(stdout)
        agent = build_agent(settings, redis, model=model, memory=memory, scheduler=scheduler)
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
        say("Parley console — type a request, /memories, /forget N, /help; /quit to leave.")
        history: RunState | None = None
        try:
            while True:
                text = await ask("\nyou> ")
                if text is None or text in ("/quit", "/exit"):
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
                    result = await commands.handle(event, context, Session())
                    say(f"parley> {result.text}")
                    continue
                outcome: Outcome = await agent.run(text, context, history=history)
                while True:
                    if isinstance(outcome, Finished | Failed):
                        say(
                            f"parley> {outcome.answer if isinstance(outcome, Finished) else outcome.message}"
                        )
                        history = outcome.state
                        break
                    if isinstance(outcome, AwaitingAnswer):
                        say(f"parley asks> {outcome.question}")
                        for index, option in enumerate(outcome.options, 1):
                            say(f"  {index}. {option}")
                        answer = await ask("your answer> ")
                        if answer is None:
                            return 0
                        if answer.isdigit() and 1 <= int(answer) <= len(outcome.options):
                            answer = outcome.options[int(answer) - 1]
                        outcome = await agent.resume(outcome.state, answer=answer)
                    else:
                        assert isinstance(outcome, AwaitingApproval)
                        say("parley wants to:")
                        for index, step in enumerate(outcome.plan.steps, 1):
                            say(f"  {index}. {step.description}")
                        decision = await ask("Approve? [y/N] ")
                        if decision is None:
                            return 0
                        approved = decision.lower() in YES
                        reason = (
                            None if approved or decision.lower() in ("", "n", "no") else decision
                        )
                        say("approved." if approved else "rejected.")
                        outcome = await agent.resume(
                            outcome.state, approved=approved, reason=reason
                        )
        finally:
            await scheduler.close()
            await memory.embedder.close()
            close = getattr(model, "close", None)
            if close is not None:
                await close()
    return 0
