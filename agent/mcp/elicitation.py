"""An MCP server's questions during a tool call (elicitation), asked in the chat.

The 2026-07-28 shape is used throughout: a call that needs input returns `input_required`;
Parley raises `InputRequired` (the run waits as for any question, durably, nothing held
open), and once the requester answers, makes the same call again with the responses and the
server's `requestState`. A form is asked one field at a time: a boolean as Yes / No, an enum
as one button per value, anything else as a typed reply; every question offers Decline, and
an unanswered one (it expires) is simply never retried, which is what the specification asks
of a client that stops. The server's name heads each question so it cannot pose as Parley.
A field that asks for a secret, or a URL-mode request, is refused without asking anyone.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Iterator, Mapping
from typing import Any

import mcp.types as mt
from mcp import ClientSession
from mcp.client.session import ClientRequestContext
from mcp.shared.dispatcher import ProgressFnT

from agent.observations import clean
from agent.tools import InputRequired, ToolError

log = logging.getLogger(__name__)

# what a retried call carries: the answers to its server's questions and the server's state
Answers = tuple[mt.InputResponses, str | None]
Progress = ProgressFnT  # the SDK's: (progress, total, message)

YES, NO, DECLINE = "Yes", "No", "Decline"
MAX_MESSAGE = 500  # characters of a server's question shown
MAX_VALUES = 10  # enum values offered as buttons
_SECRET = re.compile(
    r"pass(word|phrase|code)?|\bpwd\b|secret|token|api[\s_-]?key|private[\s_-]?key|credential|"
    r"\bpin\b|\botp\b|2fa|mfa|cvv|card[\s_-]?number|ssn|"
    r"(verification|security|one[\s_-]?time|login|sign[\s_-]?in|auth\w*)[\s_-]?code",
    re.IGNORECASE,
)
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
    for key, request in (result.input_requests or {}).items():
        if not isinstance(request, mt.ElicitRequest):
            raise ToolError(UNSUPPORTED.format(server=server, why=request.method))
        params = request.params
        if isinstance(params, mt.ElicitRequestURLParams):
            raise ToolError(URL_REFUSED.format(server=server))
        message = clean(params.message, MAX_MESSAGE)
        schema = params.requested_schema or {}
        required = set(schema.get("required") or [])
        for name, field in (schema.get("properties") or {}).items():
            asks.append(_ask(server, key, message, str(name), field, name in required))
        if not schema.get("properties"):  # nothing to fill in: a plain confirmation
            asks.append({"key": key, "message": message, "field": None, "kind": "confirm"})
    resume: dict[str, Any] = {"server": server, "state": result.request_state, "asks": asks}
    resume |= {"at": 0, "answers": {}}
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
    if any(_SECRET.search(text) for text in asked) or field.get("format") == "password":
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
    }


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
    if ask["kind"] in ("boolean", "confirm"):
        options = [YES, NO, DECLINE]
    elif ask["kind"] == "enum":
        options = [*ask["values"], DECLINE]
    else:
        text += "\n(Reply with your answer.)"
        options = [DECLINE]
    return InputRequired(text, options=options, resume=resume)


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
            responses[key] = mt.ElicitResult(action="accept", content=fields)
    return responses, state.get("state")


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
    session: ClientSession,
    live: LiveQuestions,
    tool: str,
    args: dict[str, Any],
    answers: Answers | None,
    progress: Progress | None = None,
) -> mt.CallToolResult | mt.InputRequiredResult:
    """Call a tool with the answers to its questions; a question asked mid-call (2025-11-25)
    comes back as an `input_required` result, as a 2026-07-28 server would send it."""
    responses, state = answers if answers is not None else ({}, None)
    prepared: dict[str, mt.ElicitResult] = {}
    if state is not None and state.startswith(LIVE):  # ours: answers given in earlier rounds
        earlier = json.loads(state.removeprefix(LIVE))
        prepared = {key: mt.ElicitResult.model_validate(v) for key, v in earlier.items()}
        state = None
    modern: mt.InputResponses = {}
    for key, response in responses.items():
        if key.startswith(LIVE) and isinstance(response, mt.ElicitResult):
            prepared[key.removeprefix(LIVE)] = response
        else:
            modern[key] = response
    with live.during(prepared) as heard:
        result = await session.call_tool(
            tool,
            args,
            input_responses=modern or None,
            request_state=state,
            progress_callback=progress,
            allow_input_required=True,
        )
    if not heard:
        return result
    given = {key: answer.model_dump(mode="json") for key, answer in prepared.items()}
    return mt.InputRequiredResult(
        input_requests={
            LIVE + key: mt.ElicitRequest(params=params) for key, params in heard.items()
        },
        request_state=LIVE + json.dumps(given),
    )


LIVE = "live:"  # a 2025-11-25 question, asked mid-call: answered when the call is made again


class LiveQuestions:
    """The elicitation callback of one connection. A mid-call question cannot wait for a
    person (a restart would lose the open call), so it is cancelled and noted for the calls
    in flight; made again with the answer, the call gets it when the server asks the same
    question. While several calls are in flight each hears the others' questions."""

    def __init__(self) -> None:
        self._calls: list[tuple[dict[str, mt.ElicitResult], dict[str, mt.ElicitRequestParams]]]
        self._calls = []

    @contextlib.contextmanager
    def during(
        self, prepared: dict[str, mt.ElicitResult]
    ) -> Iterator[dict[str, mt.ElicitRequestParams]]:
        heard: dict[str, mt.ElicitRequestParams] = {}
        entry = (dict(prepared), heard)
        self._calls.append(entry)
        try:
            yield heard
        finally:
            self._calls.remove(entry)

    async def __call__(
        self, context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        key = _fingerprint(params)
        for prepared, _ in self._calls:
            if key in prepared:
                return prepared[key]
        for _, heard in self._calls:
            heard[key] = params
        return mt.ElicitResult(action="cancel")


def _fingerprint(params: mt.ElicitRequestParams) -> str:
    shown = params.model_dump(mode="json", exclude={"meta"}, by_alias=True)
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()[:16]
