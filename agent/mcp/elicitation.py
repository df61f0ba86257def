"""An MCP server's questions during a tool call (elicitation), asked in the chat.

The 2026-07-28 shape is used throughout: a call that needs input returns `input_required`;
Parley raises `InputRequired` (the run waits as for any question, durably), and once the
requester answers, makes the same call again with the responses and the server's
`requestState`. A 2025-11-25 server's question mid-call comes back in that shape too, naming
the call, which stays open while the question waits (agent/mcp/open_calls.py): the answer goes
to that very call. A form is asked one field at a time: a boolean as Yes / No, an enum as one
button per value, anything else as a typed reply; a schema default (SEP-1034) is offered first
as the suggested answer; a field the form does not require offers Skip, and an accepted form
carries every schema default of the fields left out (SEP-1034); every question offers Decline, and an unanswered one (it expires) is
simply never retried, which is what the specification asks of a client that stops. The
server's name heads each question so it cannot pose as Parley. A field that asks for a
secret, or a URL-mode request, is refused without asking anyone.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp.types as mt
from mcp import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from pydantic import ValidationError

from agent.mcp.open_calls import (
    AGAIN,
    OPEN,
    WAIT_META,
    OpenCall,
    OpenCalls,
    OpenQuestion,
    Result,
    fingerprint,
)
from agent.mcp.revision import completed, is_modern
from agent.mcp.secret_asks import asks_for_secret, secret_field
from agent.mcp.task_extension import TASK, TaskQuestion
from agent.observations import clean
from agent.tools import InputRequired, ToolError

log = logging.getLogger(__name__)

# what a retried call carries: the answers to its server's questions and the state: the
# server's own behind SERVER, else Parley's (OPEN: an open call; AGAIN: a call made again)
Answers = tuple[mt.InputResponses, str | None]
SERVER = "server:"  # a server's requestState is opaque: echoed exactly, never read as Parley's
Progress = ProgressFnT  # the SDK's: (progress, total, message)

YES, NO, DECLINE, SKIP = "Yes", "No", "Decline", "Skip"
MAX_MESSAGE = 500  # characters of a server's question shown
MAX_VALUES = 10  # enum values offered as buttons
SECRET_REFUSED = (
    "{server} asked for a secret ({field}). Parley never collects passwords, tokens or keys "
    "in a chat for a server, so it refused and the call did not complete."
)
URL_REFUSED = (
    "{server} asked the user to open a link to go on; Parley does not pass such requests on, "
    "so the call did not complete."
)
UNSUPPORTED = "{server} asked a question Parley cannot show in a chat ({why})."


def question(server: str, result: mt.InputRequiredResult) -> InputRequired:
    """The first question of a server's `input_required` result, or ToolError when it asks
    for something Parley refuses (a secret, a link) or cannot show."""
    asks: list[dict[str, Any]] = []
    prints: dict[str, str] = {}  # an open call's question: what identifies it if asked again
    # Parley's own (an open call's, a task's), else the server's: its keys and state are opaque
    own = isinstance(result, OpenQuestion | TaskQuestion)
    for key, request in (result.input_requests or {}).items():
        if not isinstance(request, mt.ElicitRequest):
            raise ToolError(UNSUPPORTED.format(server=server, why=request.method))
        params = request.params
        if isinstance(params, mt.ElicitRequestURLParams):
            raise ToolError(URL_REFUSED.format(server=server))
        if own and key.startswith(OPEN):
            prints[key] = fingerprint(params)
        message = clean(params.message, MAX_MESSAGE)
        schema = params.requested_schema or {}
        required = set(schema.get("required") or [])
        for name, field in (schema.get("properties") or {}).items():
            asks.append(_ask(server, key, message, str(name), field, name in required))
        if not schema.get("properties"):  # nothing to fill in: a plain confirmation
            asks.append({"key": key, "message": message, "field": None, "kind": "confirm"})
    state = result.request_state
    if not own and state is not None:
        state = SERVER + state
    resume: dict[str, Any] = {"server": server, "state": state, "asks": asks}
    resume |= {"at": 0, "answers": {}, "prints": prints}
    wait = (result.meta or {}).get(WAIT_META)
    if isinstance(wait, int | float) and prints:
        resume["wait"] = float(wait)
    if (first := _next(resume)) is None:
        raise ToolError(UNSUPPORTED.format(server=server, why="an empty request"))
    return first


def _ask(
    server: str, key: str, message: str, name: str, field: Any, required: bool
) -> dict[str, Any]:
    field = field if isinstance(field, dict) else {}
    label = " ".join(str(field.get(k) or "") for k in ("title", "description")).strip()
    values = [str(v) for v in field.get("enum") or []]
    values += [str(o["const"]) for o in field.get("oneOf") or [] if isinstance(o, dict)]
    kind = field.get("type")
    # A typed answer can carry whatever the question asks for: a field named `answer` under
    # "Enter your password" is a request for a secret too. A button's value cannot be one.
    typed = not values and kind != "boolean"
    asked = [name, label, message] if typed else [name, label]
    if any(asks_for_secret(text) for text in asked) or secret_field(field, [name, label, message]):
        raise ToolError(SECRET_REFUSED.format(server=server, field=name))
    if values:
        kind = "enum"
    elif kind not in ("boolean", "string", "number", "integer"):
        raise ToolError(UNSUPPORTED.format(server=server, why=f"a field of type {kind}"))
    return {
        "key": key,
        "message": message,
        "field": name,
        "label": clean(label, 200),
        "kind": kind,
        "values": values[:MAX_VALUES],
        "required": required,
        "default": _default(kind, field.get("default"), values),
        "fill": _fill(kind, field.get("default"), values),
    }


def _default(kind: Any, value: Any, values: list[str]) -> str | None:
    """A field's schema default (SEP-1034) as the answer that would give it, if it is one."""
    if value is None or isinstance(value, dict | list):
        return None
    if kind == "boolean":
        return (YES if value else NO) if isinstance(value, bool) else None
    if values:
        return str(value) if str(value) in values else None
    if kind in ("number", "integer") and (
        isinstance(value, bool) or not isinstance(value, int | float)
    ):
        return None
    return clean(str(value), 200)


def _fill(kind: Any, value: Any, values: list[str]) -> Any:
    """A field's schema default as the value sent when the field is left out (SEP-1034), if
    it is one of the field's type: a server's default of another type is not passed back."""
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if values:
        return value if isinstance(value, str | int | float) and str(value) in values else None
    if kind in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return value if kind == "number" or float(value).is_integer() else None
    return value[:2000] if isinstance(value, str) else None


def _skippable(ask: Mapping[str, Any]) -> bool:
    return bool(ask["field"]) and not ask.get("required", True)


def _next(resume: dict[str, Any]) -> InputRequired | None:
    """The question for the first field not answered yet, or None when all are."""
    asks, at = resume["asks"], resume["at"]
    declined = {key for key, answer in resume["answers"].items() if answer is None}
    while at < len(asks) and asks[at]["key"] in declined:
        at += 1
    resume["at"] = at
    if at >= len(asks):
        return None
    ask = asks[at]
    text = f"*{resume['server']}* (a connected tool, not Parley) asks: {ask['message']}"
    if ask["field"] and ask.get("label") and ask["label"] not in ask["message"]:
        text += f"\n{ask['label']}"
    default = ask.get("default")
    if ask["kind"] in ("boolean", "confirm"):
        options = [YES, NO, DECLINE]
    elif ask["kind"] == "enum":
        options = [*ask["values"], DECLINE]
    else:
        text += "\n(Reply with your answer.)"
        options = [DECLINE] if default is None else [default, DECLINE]
    if default is not None:  # offered first, as the answer already chosen
        options = [default, *(o for o in options if o != default)]
        text += f"\nSuggested: {default}"
    if _skippable(ask):  # optional: left out, the server's default (if any) goes instead
        options.insert(len(options) - 1, SKIP)
    if (wait := resume.get("wait")) is not None:
        text += f"\n(The call waits {_duration(wait)} for your answer.)"
    return InputRequired(text, options=options, resume=resume)


def _duration(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds:.0f} seconds"


def answered(resume: Mapping[str, Any]) -> Answers:
    """Record the requester's answer (`resume["answer"]`); raise the next question while
    fields remain, else give the responses to send with the call and the server's state."""
    state = {k: v for k, v in resume.items() if k != "answer"}
    state["answers"] = dict(state["answers"])
    ask = state["asks"][state["at"]]
    reply = str(resume.get("answer", "")).strip()
    answers: dict[str, Any] = state["answers"]
    no = ask["kind"] == "confirm" and reply.lower() in ("no", "n")
    if reply.lower() == DECLINE.lower() or no:
        answers[ask["key"]] = None
    elif reply.lower() == SKIP.lower() and _skippable(ask):
        answers.setdefault(ask["key"], {})
        state["at"] += 1
    else:
        value = _value(ask, reply)
        if value is _INVALID:
            retry = _next(state)
            assert retry is not None
            raise InputRequired(
                f"That answer does not fit; please try again.\n{retry.question}",
                options=retry.options,
                resume=state,
            )
        fields = answers.setdefault(ask["key"], {})
        if ask["field"]:
            fields[ask["field"]] = value
        state["at"] += 1
    if (more := _next(state)) is not None:
        raise more
    responses: mt.InputResponses = {}
    for key, fields in answers.items():
        if fields is None:
            responses[key] = mt.ElicitResult(action="decline")
        else:
            content = _defaults(state["asks"], key) | fields
            responses[key] = mt.ElicitResult(action="accept", content=content)
    return responses, state.get("state")


def _defaults(asks: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The schema defaults of request `key`'s fields, which the fields answered override."""
    return {
        ask["field"]: ask["fill"]
        for ask in asks
        if ask["key"] == key and ask["field"] and ask.get("fill") is not None
    }


_INVALID = object()


def _value(ask: Mapping[str, Any], reply: str) -> Any:
    kind = ask["kind"]
    if kind in ("boolean", "confirm"):
        word = reply.lower()
        if word in ("yes", "y", "true"):
            return True
        return False if word in ("no", "n", "false") else _INVALID
    if kind == "enum":
        for value in ask["values"]:
            if value.lower() == reply.lower():
                return value
        return _INVALID
    if kind in ("number", "integer"):
        try:
            number = float(reply)
        except ValueError:
            return _INVALID
        if kind == "integer":
            return int(number) if number.is_integer() else _INVALID
        return number
    return reply[:2000]


async def call_tool(
    calls: OpenCalls,
    send: Callable[[OpenCall, Answers | None], Awaitable[Result]],
    answers: Answers | None,
    progress: Progress | None = None,
    tool: str = "",
) -> Result:
    """Call a tool with the answers to its questions, through `send` (which opens or uses
    a session and calls `send_call`). 2026-07-28: the server's own `input_required` and
    state. 2025-11-25: the call stays open while its question waits
    (agent/mcp/open_calls.py); its answer goes to that open call, or, made again (see
    `again`), to the same question asked by the new call. CallClosed: no such open call."""
    responses, state = answers if answers is not None else ({}, None)
    if state is not None and state.startswith(SERVER):  # the server's, exactly as it sent it
        answers = (responses, state.removeprefix(SERVER))
    elif state is not None and state.startswith(OPEN):
        response = responses.get(state)
        if not isinstance(response, mt.ElicitResult):
            response = mt.ElicitResult(action="cancel")
        return await calls.answer(state.removeprefix(OPEN), response, progress)
    prepared: dict[str, mt.ElicitResult] = {}
    if state is not None and state.startswith(AGAIN):
        earlier = json.loads(state.removeprefix(AGAIN))
        prepared = {key: mt.ElicitResult.model_validate(v) for key, v in earlier.items()}
        answers = None
    return await calls.call(lambda call: send(call, answers), prepared, progress, tool)


async def send_call(
    session: ClientSession,
    call: OpenCall,
    answers: Answers | None,
    *,
    tool: str,
    args: dict[str, Any],
) -> Result:
    """One `tools/call` on `session` for the open call `call`."""
    call.session = session  # its server's questions are this call's
    if is_modern(session):  # stateless: the server keeps nothing open
        responses, state = answers if answers is not None else ({}, None)
        try:
            return await session.call_tool(
                tool,
                args,
                input_responses=responses or None,
                request_state=state,
                progress_callback=call.progress,
                allow_input_required=True,
            )
        except ValidationError as exc:  # no resultType: complete, as 2026-07-28 says
            if (result := await completed(session, tool, exc)) is None:
                raise
            return result
    return await session.call_tool(tool, args, progress_callback=call.progress)


def again(resume: Mapping[str, Any], answers: Answers) -> Answers:
    """The answers for the same call made again, its open call being gone: each answer
    given to the question it was given for, should the new call ask it."""
    responses, _ = answers
    prints = resume.get("prints") or {}
    given = {
        prints[key]: response.model_dump(mode="json", by_alias=True)
        for key, response in responses.items()
        if key in prints and isinstance(response, mt.ElicitResult)
    }
    return {}, AGAIN + json.dumps(given)


def task_of(answers: Answers | None) -> tuple[str, mt.InputResponses] | None:
    """The task a question was asked for (`TaskQuestion`) and the answers to give it."""
    if answers is None or answers[1] is None or not answers[1].startswith(TASK):
        return None
    return answers[1].removeprefix(TASK), answers[0]
