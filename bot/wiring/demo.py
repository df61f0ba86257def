"""`parley console --demo`: Parley with a small scripted stand-in for the language model, so a
newcomer sees a question, an approval, memory and a schedule work before setting up a model.

`DemoModel` is a `ChatModel` like agent/testing.py's scripted one, but it answers by rules:
it picks a tool by a few words of the request ("remember …", "what do you remember", "pick
… or …", "remind me …", "every minute …") and says what the tool did. Everything else —
the agent loop, approvals, Redis, the memory index and its embedding model, the schedule
clock — is the real thing. Every answer starts with `[demo]`, so it is never taken for a
model's.
"""

from __future__ import annotations

import re

from agent.messages import (
    ChatRequest,
    ChatResponse,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from agent.testing import call, is_summary_request

LABEL = "[demo]"
BANNER = (
    "Demo mode: a scripted stand-in answers, not a language model (nothing is sent anywhere). "
    "Try: “remember that my bike is green”, “what do you remember about me?”, "
    "“pick tea or coffee for me”, “remind me to stretch in 30 seconds”, "
    "“every minute tell me the time”. For real answers set ANTHROPIC_API_KEY, or run Ollama."
)
HELP = (
    "I'm the demo stand-in, not a language model: I only follow a script. Try “remember "
    "that …”, “what do you remember about me?”, “pick tea or coffee for me”, “remind me to "
    "stretch in 30 seconds” or “every minute tell me the time”."
)
_MEMORY_LINE = re.compile(r"^- \[[^\]]+\] \(\w+\) (.+)$", re.MULTILINE)
_EVERY = re.compile(r"\bevery (\d+ )?(second|minute|hour|day)s?\b", re.IGNORECASE)
_IN = re.compile(r"\bin (\d+) (second|minute|hour)s?\b", re.IGNORECASE)
_SECONDS = {"second": 1, "minute": 60, "hour": 3600}
DONE = {
    "remember": "Noted — I'll remember that. Ask me “what do you remember about me?”, or "
    "type /memories.",
    "create_reminder": "Reminder set: it is printed here when it is due.",
    "schedule": "Scheduled. It runs here while this console is open; /schedules lists it.",
}


class DemoModel:
    """A ChatModel that follows a small script of rules; see the module docstring."""

    name = "demo"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        if is_summary_request(request):
            return _reply("(a summary of the conversation so far)")
        newest = request.messages[-1] if request.messages else Message.user("")
        results = [b for b in newest.content if isinstance(b, ToolResultBlock)]
        if results:
            return _reply(_after(request, results[-1]))
        tools = {tool.name for tool in request.tools}
        wanted = _tool_for(_asked(newest), tools)
        if wanted is not None:
            return _calls(wanted)
        return _reply(_plain(request, _asked(newest)))


def _asked(message: Message) -> str:
    """The request's own words: the newest turn's last text that is not a context block."""
    texts = [
        block.text.strip()
        for block in message.content
        if isinstance(block, TextBlock) and not block.text.lstrip().startswith("<")
    ]
    return texts[-1] if texts else ""


def _tool_for(asked: str, tools: set[str]) -> ToolUseBlock | None:
    lowered = asked.lower()
    if "what do you remember" in lowered or "what do you know" in lowered:
        return call("list_memories") if "list_memories" in tools else None
    if lowered.startswith("remember") and "remember" in tools:
        fact = re.sub(r"^remember( that)?\s*", "", asked, flags=re.IGNORECASE)
        return call("remember", text=fact or asked)
    every = _EVERY.search(asked)
    if every and "schedule" in tools:
        count = int(every[1] or 1)
        when = f"every {count} {every[2].lower()}s"
        objective = (asked[: every.start()] + asked[every.end() :]).strip(" ,.") or asked
        return call("schedule", when=when, objective=objective)
    if lowered.startswith("remind me") and "create_reminder" in tools:
        within = _IN.search(asked)
        seconds = int(within[1]) * _SECONDS[within[2].lower()] if within else 60
        without = _IN.sub("", asked).strip()
        text = re.sub(r"^remind me( to)?\s*", "", without, flags=re.IGNORECASE).strip(" ,.")
        return call("create_reminder", text=text or asked, in_seconds=seconds)
    options = re.search(r"\b(\w+) or (\w+)\b", asked)
    if options and "ask_user" in tools and re.search(r"\b(pick|choose|which)\b", lowered):
        choices = [options[1].capitalize(), options[2].capitalize()]
        return call("ask_user", question=f"{choices[0]} or {choices[1]}?", options=choices)
    return None


def _after(request: ChatRequest, result: ToolResultBlock) -> str:
    """What to say once a tool ran (or was refused)."""
    used = _tool_named(request, result.tool_use_id)
    if result.is_error:
        return f"That didn't happen: {result.content[:300]}"
    if used == "ask_user":
        chosen = result.content.rpartition("answered: ")[2].strip().rstrip(".")
        return f"You chose: {chosen[:200]}. (A model would now act on your answer.)"
    if used == "list_memories":
        return f"Here is what I remember:\n{result.content[:1500]}"
    return DONE.get(used, "Done.")


def _tool_named(request: ChatRequest, tool_use_id: str) -> str:
    for message in request.messages:
        for block in message.content:
            if isinstance(block, ToolUseBlock) and block.id == tool_use_id:
                return block.name
    return ""


def _plain(request: ChatRequest, asked: str) -> str:
    """An answer without a tool: the memories recall brought, then how to try the rest."""
    if "tell me the time" in asked.lower():  # a schedule's objective, as the demo suggests
        found = re.search(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?( \w+)?", request.system)
        return f"It is {found[0]}." if found else "It is now."
    recalled = _MEMORY_LINE.findall(request.system)
    if recalled:
        facts = "; ".join(recalled[:3])
        return f"From what you told me before: {facts}. {HELP}"
    return HELP


def _reply(text: str) -> ChatResponse:
    return ChatResponse(
        message=Message.assistant(f"{LABEL} {text}"),
        stop_reason="end_turn",
        usage=Usage(input_tokens=0, output_tokens=0),
        provider="demo",
        model="demo",
    )


def _calls(block: ToolUseBlock) -> ChatResponse:
    return ChatResponse(
        message=Message(role="assistant", content=[block]),
        stop_reason="tool_use",
        usage=Usage(input_tokens=0, output_tokens=0),
        provider="demo",
        model="demo",
    )
