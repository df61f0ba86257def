"""The conversation engine's rules, table-driven: every event kind × session state × who.

`decide` is pure, so these need no Redis and no adapter: each row is a session, the
decision the event is about, the event, and the effects expected, written compactly.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from adapters.base import (
    Actor,
    Addressing,
    Attachment,
    ConversationKey,
    InboundAction,
    InboundMessage,
    OutboundMessage,
    is_stop,
)
from adapters.slack import ADDRESSING as SLACK_ADDRESSING
from agent.deferred import PendingPlan
from agent.messages import TextBlock
from agent.outcomes import AwaitingAnswer, AwaitingApproval, Finished, Plan, PlanStep, RunTrace
from agent.protocols import RunContext
from agent.state import RunState
from bot.conversation.effects import (
    Admit,
    Admitted,
    Answer,
    CancelTasks,
    CheckOwn,
    Claim,
    Claimed,
    Edit,
    Effect,
    GrantStanding,
    Notify,
    Open,
    OwnChecked,
    OwnRan,
    Prompt,
    Ran,
    Received,
    Resume,
    Run,
    Send,
    Settle,
    TasksCancelled,
)
from bot.conversation.engine import Policy, decide, pending_id
from bot.conversation.render import MEMORY_ACTION
from bot.runtime.decisions import Decision, decision_id_for
from bot.runtime.sessions import Resolution, Session

NOW = 1_000_000.0
ENTRY = "1700000000000-0"
GROUP = ConversationKey(platform="slack", chat_id="C1", team_id="T1")
POLICY = Policy(
    now=NOW, approvers=frozenset({"U9"}), max_message_chars=100, addressing=SLACK_ADDRESSING
)
PEOPLE = {
    "requester": Actor(platform="slack", user_id="U1", name="Ana"),
    "approver": Actor(platform="slack", user_id="U9", name="Bo"),
    "other": Actor(platform="slack", user_id="U7", name="Cy"),
}


def state(*, is_direct: bool = True) -> RunState:
    context = RunContext(
        conversation_id=GROUP.id, platform="slack", user_id="U1", chat_id="C1", is_direct=is_direct
    )
    return RunState(context=context, objective="earlier")


def decision(kind: str = "approval", **fields: object) -> Decision:
    values: dict[str, object] = {
        "id": "D1",
        "kind": kind,
        "conversation_id": GROUP.id,
        "requester_id": "U1",
        "requester_name": "Ana",
        "text": "May I?",
        "options": ["red", "blue"] if kind == "question" else [],
        "message_id": "m1",
        "created_at": NOW - 10,
        "expires_at": NOW + 100,
    }
    return Decision.model_validate({**values, **fields})


SESSIONS = {
    "idle": Session(),
    "idle with history": Session(state=state()),
    "awaiting_answer": Session(status="awaiting_answer", state=state(), decision_id="D1"),
    "awaiting_approval": Session(status="awaiting_approval", state=state(), decision_id="D1"),
    "running (a crash)": Session(status="running", state=state()),
}
PENDING = {
    "none": None,
    "question": decision("question"),
    "approval": decision("approval"),
    "expired": decision("approval", expires_at=NOW - 1),
    "decided": decision("approval", status="approved", decided_by="<@U9>"),
    "foreign": decision("approval", conversation_id="slack:T1:C2:-"),
}


def say(who: str, text: str = "do it", **fields: object) -> InboundMessage:
    return InboundMessage(
        event_id="e1",
        conversation=GROUP,
        actor=PEOPLE[who],
        text=text,
        is_direct=False,
        **fields,  # type: ignore[arg-type]
    )


def press(who: str, choice: str, decision_id: str = "D1") -> InboundAction:
    return InboundAction(
        event_id="e2",
        conversation=GROUP,
        actor=PEOPLE[who],
        decision_id=decision_id,
        choice=choice,
    )


def shown(effects: list[Effect]) -> list[str]:
    """Each effect in a word or two, so a table row reads like what happens."""
    out = []
    for effect in effects:
        match effect:
            case Send(message=message, slot=slot):
                private = " (private)" if message.private_to else ""
                out.append(f"send {slot}{private}: {message.text.splitlines()[0]}")
            case Notify(text=text, alert=alert):
                out.append(f"{'alert' if alert else 'toast'}: {text}")
            case Claim(status=status, by=by):
                out.append(f"claim {status} by {by or '-'}")
            case Settle(abandon=abandon):
                out.append(f"settle ({abandon})" if abandon else "settle")
            case Resume(resolution=resolution):
                parts = resolution.model_dump(exclude={"entry_id"}, exclude_none=True)
                out.append("resume " + " ".join(f"{k}={v}" for k, v in parts.items()))
            case Edit(slot=slot, message=message):
                out.append(f"edit {slot}: {message.text.splitlines()[-1]}")
            case _:  # admit, run, command, forget
                out.append(type(effect).__name__.lower())
    return out


TOO_LONG = "send reply: That message is too long for me (150 characters; my limit is 100). "
TOO_LONG += "Could you shorten it or split it up?"
NOT_ALLOWED = "send not-allowed:U7: Sorry — I'm a private assistant and can't help you here."
TEXT_ONLY = "send reply: I can read text, photos and files (images, PDFs, text files) — not this"
TEXT_ONLY += " kind of message."
BARE = "send reply: Yes? Tell me what you need in a reply here, in this thread — "
BARE += "`/parley help` lists my commands."
STALE = "alert: This button has expired. Send me your request again if you still need it."

# (session, pending, event, effects)
RECEIVED = [
    # --- messages, by kind
    ("idle", "none", say("requester"), ["admit"]),
    ("idle with history", "none", say("other"), ["admit"]),
    ("awaiting_approval", "approval", say("other", kind="not_allowed"), [NOT_ALLOWED]),
    ("idle", "none", say("requester", "", kind="non_text"), [TEXT_ONLY]),
    ("idle", "none", say("requester", "", kind="bare_mention"), [BARE]),
    ("idle", "none", say("requester", "x" * 100, kind="too_long", length=150), [TOO_LONG]),
    ("idle", "none", say("requester", "x" * 150), [TOO_LONG]),
    ("awaiting_answer", "question", say("requester", "", kind="non_text"), [TEXT_ONLY]),
    # --- a thread message that did not mention Parley counts only in its conversations
    ("idle", "none", say("other", mentioned=False), []),
    ("idle", "none", say("other", "", mentioned=False, kind="non_text"), []),
    ("idle with history", "none", say("other", mentioned=False), ["admit"]),
    # --- commands
    (
        "idle",
        "none",
        say("other", command="help"),
        [
            "send reply (private): I'm Parley. Tell me what you need and I'll work on it: I can use tools, I remember what you tell me (ask me to remember something), and I always ask before I do anything with side effects, like setting a reminder."
        ],
    ),  # noqa: E501
    ("idle", "none", say("other", command="status"), ["command"]),
    ("idle", "none", say("other", command="memories"), ["command"]),
    ("idle", "none", say("other", command="forget", args="2"), ["command"]),
    (
        "idle",
        "none",
        say("other", command="nope"),
        ["send reply (private): I don't know the command /parley nope. Try /parley help."],
    ),  # noqa: E501
    (
        "idle",
        "none",
        say("requester", command="cancel"),
        ["endsession", "send reply: There's nothing to cancel."],
    ),
    (
        "awaiting_approval",
        "approval",
        say("requester", command="cancel"),
        ["claim cancelled by <@U1>"],
    ),  # noqa: E501
    (
        "awaiting_answer",
        "question",
        say("approver", command="cancel"),
        ["claim cancelled by <@U9>"],
    ),  # noqa: E501
    (
        "awaiting_approval",
        "approval",
        say("other", command="cancel"),
        ["send reply: Only <@U1> or an approver can cancel what I'm waiting on here."],
    ),  # noqa: E501
    (
        "awaiting_approval",
        "expired",
        say("other", command="cancel"),
        [
            "settle (Not run: the user cancelled.)",
            "send reply: Cancelled. What would you like to do next?",
        ],
    ),  # noqa: E501
    (
        "running (a crash)",
        "none",
        say("requester", command="cancel"),
        [
            "settle (Not run: the user cancelled.)",
            "send reply: Cancelled. What would you like to do next?",
        ],
    ),  # noqa: E501
    # --- button presses
    ("awaiting_approval", "approval", press("requester", "approve"), ["claim approved by <@U1>"]),
    ("awaiting_approval", "approval", press("approver", "reject"), ["claim rejected by <@U9>"]),
    (
        "awaiting_approval",
        "approval",
        press("other", "approve"),
        ["alert: Only <@U1> can approve this."],
    ),  # noqa: E501
    ("awaiting_answer", "question", press("other", "0"), ["alert: Only <@U1> can answer this."]),
    ("awaiting_answer", "question", press("requester", "1"), ["claim answered by <@U1>"]),
    (
        "awaiting_answer",
        "question",
        press("requester", "7"),
        ["alert: I didn't understand that button."],
    ),  # noqa: E501
    (
        "awaiting_approval",
        "approval",
        press("requester", "0"),
        ["alert: I didn't understand that button."],
    ),  # noqa: E501
    ("awaiting_approval", "expired", press("requester", "approve"), ["claim expired by -"]),
    ("idle", "expired", press("other", "approve"), ["claim expired by -"]),
    (
        "idle",
        "decided",
        press("requester", "approve"),
        ["alert: This was already approved by <@U9>."],
    ),  # noqa: E501
    ("idle", "none", press("requester", "approve"), [STALE]),
    ("awaiting_approval", "foreign", press("requester", "approve"), [STALE]),
    (
        "idle",
        "approval",
        press("requester", "approve"),
        ["alert: This request is no longer waiting for a decision."],
    ),  # noqa: E501
    ("idle", "none", press("other", "m-1", decision_id=MEMORY_ACTION), ["forget"]),
]


@pytest.mark.parametrize(("session", "pending", "event", "expected"), RECEIVED)
def test_what_an_event_means(
    session: str, pending: str, event: InboundMessage | InboundAction, expected: list[str]
) -> None:
    before = SESSIONS[session].model_copy(deep=True)
    received = Received(entry_id=ENTRY, event=event)
    assert shown(decide(SESSIONS[session], PENDING[pending], received, POLICY)) == expected
    assert SESSIONS[session] == before  # decide changes nothing it is given


# (session, pending, event, refusal, effects)
ADMITTED = [
    ("idle", "none", say("requester"), None, ["run"]),
    ("idle", "none", say("requester"), "Slow down.", ["send reply: Slow down."]),
    ("awaiting_answer", "question", say("requester", "blue"), None, ["claim answered by <@U1>"]),
    ("awaiting_answer", "question", say("approver", "blue"), None, ["claim answered by <@U9>"]),
    (
        "awaiting_approval",
        "approval",
        say("requester", "not now, after lunch"),
        None,
        ["claim rejected by <@U1>"],
    ),  # noqa: E501
    # A typed reply is read for what it means: only a clear yes approves.
    (
        "awaiting_approval",
        "approval",
        say("requester", "Yes, go ahead 👍"),
        None,
        ["claim approved by <@U1>"],
    ),
    ("awaiting_approval", "approval", say("approver", "ok"), None, ["claim approved by <@U9>"]),
    (
        "awaiting_approval",
        "approval",
        say("requester", "yes, but to Carol"),
        None,
        ["claim rejected by <@U1>"],
    ),
    ("awaiting_approval", "approval", say("requester", "nope"), None, ["claim rejected by <@U1>"]),
    (
        "awaiting_approval",
        "approval",
        say("other", "yes"),
        None,
        ["send reply: I'm waiting for <@U1> to answer first; ask me again once that's settled."],
    ),
    ("awaiting_answer", "question", say("requester", "yes"), None, ["claim answered by <@U1>"]),
    (
        "awaiting_approval",
        "approval",
        say("other"),
        None,
        ["send reply: I'm waiting for <@U1> to answer first; ask me again once that's settled."],
    ),  # noqa: E501
    (
        "awaiting_approval",
        "expired",
        say("other"),
        None,
        ["settle (Not answered: the request expired.)", "run"],
    ),  # noqa: E501
    (
        "awaiting_approval",
        "decided",
        say("requester"),
        None,
        ["settle (Not answered: the request expired.)", "run"],
    ),  # noqa: E501
    ("running (a crash)", "none", say("requester"), None, ["run"]),
]


@pytest.mark.parametrize(("session", "pending", "event", "refusal", "expected"), ADMITTED)
def test_what_an_admitted_message_means(
    session: str, pending: str, event: InboundMessage, refusal: str | None, expected: list[str]
) -> None:
    admitted = Admitted(received=Received(entry_id=ENTRY, event=event), refusal=refusal)
    assert shown(decide(SESSIONS[session], PENDING[pending], admitted, POLICY)) == expected


def decided(kind: str, status: str) -> Decision:
    return decision(kind, status=status, decided_by="<@U1>", decided_at=NOW)


# (session, pending, event, status, won, effects)
CLAIMED = [
    ("awaiting_approval", "approval", press("requester", "approve"), "approved", True,
     ["toast: Approved", "edit decided:D1: ✅ Approved by <@U1>", "resume approved=True"]),
    ("awaiting_approval", "approval", press("approver", "reject"), "rejected", True,
     ["toast: Rejected", "edit decided:D1: ❌ Rejected by <@U1>", "resume approved=False"]),
    ("awaiting_answer", "question", press("requester", "1"), "answered", True,
     ["toast: blue", "edit decided:D1: ↪ Answered by <@U1>: blue", "resume answer=blue"]),
    ("awaiting_approval", "approval", press("requester", "approve"), "approved", False,
     ["alert: This was already approved by <@U9>."]),
    ("awaiting_approval", "expired", press("requester", "approve"), "expired", True,
     ["edit decided:D1: ⌛ Expired — ask me again if you still need this.",
      "settle (Not answered: the request expired.)",
      "alert: This request has expired. Ask me again if you still need it."]),
    ("idle", "expired", press("requester", "approve"), "expired", False,
     ["alert: This request has expired. Ask me again if you still need it."]),
    ("awaiting_answer", "question", say("requester", "blue"), "answered", True,
     ["edit decided:D1: ↪ Answered by <@U1>", "resume answer=blue"]),
    ("awaiting_approval", "approval", say("requester", "not now, after lunch"), "rejected", True,
     ["edit decided:D1: ❌ Rejected by <@U1>",
      "send feedback: Understood — I won't go ahead with that plan. I'll take your message into account.",  # noqa: E501
      "resume approved=False reason=not now, after lunch"]),
    # A typed yes or no decides like a press, and is said back the way a press shows it.
    ("awaiting_approval", "approval", say("requester", "yes please"), "approved", True,
     ["edit decided:D1: ✅ Approved by <@U1>", "send decided: ✅ Approved by <@U1>",
      "resume approved=True"]),
    ("awaiting_approval", "approval", say("requester", "No."), "rejected", True,
     ["edit decided:D1: ❌ Rejected by <@U1>", "send decided: ❌ Rejected by <@U1>",
      "resume approved=False"]),
    ("awaiting_approval", "approval", say("requester", command="cancel"), "cancelled", True,
     ["edit decided:D1: 🚫 Cancelled by <@U1>", "settle (Not run: the user cancelled.)",
      "send reply: Cancelled. What would you like to do next?"]),
]  # fmt: skip


@pytest.mark.parametrize(("session", "pending", "event", "status", "won", "expected"), CLAIMED)
def test_what_a_claim_comes_to(
    session: str,
    pending: str,
    event: InboundMessage | InboundAction,
    status: str,
    won: bool,
    expected: list[str],
) -> None:
    kind = PENDING[pending].kind  # type: ignore[union-attr]
    claimed = Claimed(
        received=Received(entry_id=ENTRY, event=event),
        status=status,  # type: ignore[arg-type]
        decided=decided(kind, status) if won else None,
        current=PENDING["decided"] if not won else None,
    )
    assert shown(decide(SESSIONS[session], PENDING[pending], claimed, POLICY)) == expected


def test_an_unposted_prompt_has_nothing_to_edit() -> None:
    unposted = decided("approval", "approved").model_copy(update={"message_id": None})
    received = Received(entry_id=ENTRY, event=press("requester", "approve"))
    claimed = Claimed(received=received, status="approved", decided=unposted)
    effects = decide(SESSIONS["awaiting_approval"], PENDING["approval"], claimed, POLICY)
    assert shown(effects) == ["toast: Approved", "resume approved=True"]


def test_a_replayed_entry_resumes_as_it_was_resolving() -> None:
    resolving = Resolution(entry_id=ENTRY, approved=False, reason="no")
    session = Session(status="running", state=state(), resolving=resolving)
    received = Received(entry_id=ENTRY, event=say("requester", "no"))
    assert decide(session, None, received, POLICY) == [Resume(resolution=resolving)]
    later = Received(entry_id="1700000000001-0", event=say("requester", "hi"))
    assert shown(decide(session, None, later, POLICY)) == ["admit"]


def test_an_answer_with_files_resumes_with_them() -> None:
    photo = Attachment(ref="file-1", name="photo.jpg", mime_type="image/jpeg")
    event = say("requester", "this one", attachments=(photo,))
    claimed = Claimed(
        received=Received(entry_id=ENTRY, event=event),
        status="answered",
        decided=decided("question", "answered"),
    )
    effects = decide(SESSIONS["awaiting_answer"], PENDING["question"], claimed, POLICY)
    assert isinstance(effects[-1], Resume) and effects[-1].attachments


def test_not_allowed_is_said_once_per_person_and_conversation() -> None:
    received = Received(entry_id=ENTRY, event=say("other", kind="not_allowed"))
    [effect] = decide(Session(), None, received, POLICY)
    assert isinstance(effect, Send) and effect.per_conversation
    again = Received(entry_id="1700000000001-0", event=say("other", kind="not_allowed"))
    assert decide(Session(), None, again, POLICY) == [effect]  # the same key: sent once


@pytest.mark.parametrize(
    ("platform", "direct", "addressing", "line"),
    [
        ("telegram", False, Addressing(mention="@parley_bot"), "“@parley_bot what's on today?”"),
        (
            "telegram",
            False,
            Addressing(),
            "Tell me what you need, or send /help to see my commands.",
        ),
        (
            "telegram",
            True,
            Addressing(),
            "Tell me what you need, or send /help to see my commands.",
        ),
        ("slack", True, SLACK_ADDRESSING, "Tell me what you need, or send `/parley help` to see"),
    ],
)
def test_a_bare_mention_gets_the_platforms_help_line(
    platform: str, direct: bool, addressing: Addressing, line: str
) -> None:
    chat = ConversationKey(platform=platform, chat_id="1")  # type: ignore[arg-type]
    actor = Actor(platform=platform, user_id="1")  # type: ignore[arg-type]
    event = InboundMessage(
        event_id="e", conversation=chat, actor=actor, text="", is_direct=direct,
        kind="bare_mention",
    )  # fmt: skip
    policy = replace(POLICY, addressing=addressing)
    [effect] = decide(Session(), None, Received(entry_id=ENTRY, event=event), policy)
    assert isinstance(effect, Send) and line in effect.message.text


def trace() -> RunTrace:
    return RunTrace()


def test_a_finished_run_settles_and_answers_then_the_note() -> None:
    received = Received(entry_id=ENTRY, event=say("requester"))
    outcome = Finished(answer="Done.", state=state(), trace=trace())
    ran = Ran(received=received, outcome=outcome, note=OutboundMessage(text="I'll remember: x"))
    effects = decide(Session(status="running", state=state()), None, ran, POLICY)
    assert [type(e) for e in effects] == [Settle, Answer, Send]
    assert isinstance(effects[1], Answer) and effects[1].message.text == "Done."


def test_parleys_own_objective_is_checked_then_runs_headed_and_counted() -> None:
    """A schedule's slot: checked by the feature that brings the check, what the check says
    is said through a Send, the run starts with what it was checked with, and its answer is
    headed and counted, with no after-run note (nobody there just spoke to Parley)."""
    policy = replace(POLICY, brought=frozenset({CheckOwn, OwnRan}))
    slot = Received(entry_id=ENTRY, event=say("requester", "report", kind="scheduled"))
    assert decide(Session(), None, Admitted(received=slot), policy) == [CheckOwn()]
    assert decide(Session(), None, Admitted(received=slot), POLICY) == [Run(own=True)]  # unchecked

    skipped = OwnChecked(received=slot, go=False, say="Schedule s1 paused.")
    assert shown(decide(Session(), None, skipped, policy)) == ["send reply: Schedule s1 paused."]
    preface = (TextBlock(text="This is schedule s1."),)
    go = OwnChecked(received=slot, go=True, header="🗓 s1", preface=preface, standing=("t",))
    assert decide(Session(), None, go, policy) == [
        Run(own=True, header="🗓 s1", preface=preface, standing=("t",))
    ]

    outcome = Finished(answer="Done.", state=state(), trace=trace())
    note = OutboundMessage(text="I'll remember: x")
    ran = Ran(received=slot, outcome=outcome, note=note, header="🗓 s1")
    effects = decide(Session(status="running", state=state()), None, ran, policy)
    assert [type(e) for e in effects] == [OwnRan, Settle, Answer]
    assert effects[0] == OwnRan(outcome="finished")
    assert isinstance(effects[2], Answer) and effects[2].message.text == "🗓 s1\n\nDone."
    # a person's run is neither counted nor headed
    theirs = replace(ran, received=Received(entry_id=ENTRY, event=say("requester")), header="")
    effects = decide(Session(status="running", state=state()), None, theirs, policy)
    assert [type(e) for e in effects] == [Settle, Answer, Send]


def test_a_suspended_run_opens_a_decision_and_prompts() -> None:
    received = Received(entry_id=ENTRY, event=say("requester"))
    asked = AwaitingAnswer(
        question="Which?", options=["a", "b"], question_id="q", state=state(), trace=trace()
    )
    effects = decide(Session(status="running"), None, Ran(received=received, outcome=asked), POLICY)
    opened, prompt = effects
    assert isinstance(opened, Open) and isinstance(prompt, Prompt)
    assert opened.decision_id == decision_id_for(GROUP.id, ENTRY)  # the same on a replay
    assert opened.kind == "question" and opened.options == ("a", "b")
    assert prompt.message.decision_id == opened.decision_id
    assert [b.label for b in prompt.message.buttons] == ["a", "b"]

    step = PlanStep(call_id="c1", tool="send_email", args={"to": "bo"}, description="Email Bo")
    plan = Plan(id="p", goal=None, steps=[step], uncertain=[step])
    approval = AwaitingApproval(plan=plan, state=state(), trace=trace())
    effects = decide(Session(), None, Ran(received=received, outcome=approval), POLICY)
    assert [type(e) for e in effects] == [Open, Send, Prompt]
    assert "• Email Bo" in effects[1].message.text  # type: ignore[union-attr]
    assert [b.label for b in effects[2].message.buttons] == ["Approve", "Reject"]  # type: ignore[union-attr]


def test_a_connect_link_goes_privately_where_the_platform_declares_no_ephemeral() -> None:
    """Whether a shared chat can show the Connect link to the requester alone is what the
    adapter declares (`Addressing.ephemeral`), not a platform name the engine knows."""
    received = Received(entry_id=ENTRY, event=say("requester"))
    asked = AwaitingAnswer(
        question="Connect tracker",
        options=[],
        question_id="q",
        state=state(is_direct=False),
        trace=trace(),
        link=("Connect tracker", "http://127.0.0.1/authorize"),
    )
    ran = Ran(received=received, outcome=asked)
    for addressing, private_chat in ((SLACK_ADDRESSING, None), (Addressing(), "U1")):
        policy = replace(POLICY, addressing=addressing)
        *_, prompt = decide(Session(status="running"), None, ran, policy)
        assert isinstance(prompt, Prompt) and prompt.private_chat == private_chat
        assert (prompt.sent is None) == (private_chat is None)
    assert SLACK_ADDRESSING.ephemeral and not Addressing().ephemeral


def test_the_time_comes_only_from_the_policy() -> None:
    session, pending = SESSIONS["awaiting_approval"], PENDING["approval"]
    received = Received(entry_id=ENTRY, event=press("requester", "approve"))
    assert shown(decide(session, pending, received, POLICY)) == ["claim approved by <@U1>"]
    later = replace(POLICY, now=pending.expires_at)  # type: ignore[union-attr]
    assert shown(decide(session, pending, received, later)) == ["claim expired by -"]


# --- the whole matrix: invariants every combination keeps -----------------------------------

KINDS = {
    "text": lambda who: say(who),
    "non_text": lambda who: say(who, "", kind="non_text"),
    "bare_mention": lambda who: say(who, "", kind="bare_mention"),
    "too_long": lambda who: say(who, "x" * 100, kind="too_long", length=500),
    "not_allowed": lambda who: say(who, kind="not_allowed"),
    "/cancel": lambda who: say(who, command="cancel"),
    "/status": lambda who: say(who, command="status"),
    "approve": lambda who: press(who, "approve"),
    "reject": lambda who: press(who, "reject"),
    "option": lambda who: press(who, "0"),
}
MATRIX_PENDING = {**PENDING, "approval in a DM": decision("approval", is_direct=True)}
ANSWERED = (Admit, Claim, Run, Resume)  # effects the executor answers with a follow-up
NEUTRAL = ("non_text", "bare_mention", "too_long", "not_allowed")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("session_name", SESSIONS)
def test_every_kind_state_and_person_keeps_the_rules(kind: str, session_name: str) -> None:
    for pending_name, pending in MATRIX_PENDING.items():
        for who in PEOPLE:
            session = SESSIONS[session_name]
            before = session.model_copy(deep=True)
            event = KINDS[kind](who)
            received = Received(entry_id=ENTRY, event=event)
            rounds = [decide(session, pending, received, POLICY)]
            if isinstance(event, InboundMessage) and rounds[0] == [Admit()]:
                admitted = Admitted(received=received)
                rounds.append(decide(session, pending, admitted, POLICY))
            where = f"{kind} / {session_name} / {pending_name} / {who}"
            assert session == before, where
            for effects in rounds:
                answered = [i for i, e in enumerate(effects) if isinstance(e, ANSWERED)]
                assert answered in ([], [len(effects) - 1]), where  # a follow-up ends a list
                for effect in effects:
                    if isinstance(effect, Claim) and effect.status != "expired":
                        # only the requester, or an approver outside a one-to-one chat
                        assert who == "requester" or (
                            who == "approver" and not pending.is_direct  # type: ignore[union-attr]
                        ), where
                        assert pending is not None and pending.status == "pending", where
                        assert pending.id == session.decision_id, where
                    if isinstance(effect, Resume):
                        assert session.state is not None, where
            if kind in NEUTRAL:
                [effect] = rounds[0]
                assert isinstance(effect, Send), where
                assert effect.per_conversation == (kind == "not_allowed"), where


def test_a_bare_mention_in_a_thread_takes_its_next_reply_as_the_question() -> None:
    thread = replace(GROUP, thread_id="1700000000.000100")
    bare = replace(say("requester", "", kind="bare_mention"), conversation=thread)
    effects = decide(Session(), None, Received(entry_id=ENTRY, event=bare), POLICY)
    assert shown(effects) == [BARE, "follow"]
    reply_in_thread = replace(
        say("requester", "what's on today?", mentioned=False), conversation=thread
    )
    later = Received(entry_id="1700000000001-0", event=reply_in_thread)
    assert shown(decide(Session(), None, later, POLICY)) == []  # not followed: not Parley's
    assert shown(decide(Session(following=True), None, later, POLICY)) == ["admit"]


# --- stops and standing approvals are decisions too --------------------------------------

FOLLOWING = replace(POLICY, brought=frozenset({CancelTasks}))  # MCP tasks are followed


def test_a_stop_first_stops_the_followed_tasks_then_goes_on_as_a_stop() -> None:
    """The executor no longer reads /cancel itself: the rules ask for the tasks to stop, and
    what the answer means is theirs too."""
    stop = Received(entry_id=ENTRY, event=say("requester", "/cancel", command="cancel"))
    assert decide(SESSIONS["idle"], None, stop, FOLLOWING) == [CancelTasks(received=stop)]
    # without followed tasks, or for anything but a stop, nothing is asked of them
    assert shown(decide(SESSIONS["idle"], None, stop, POLICY)) == shown(
        decide(SESSIONS["idle"], None, TasksCancelled(received=stop, count=0), FOLLOWING)
    )
    hello = Received(entry_id=ENTRY, event=say("requester", "hi"))
    assert shown(decide(SESSIONS["idle"], None, hello, FOLLOWING)) == ["admit"]
    # stopped tasks were the thing to cancel: nothing more is said
    assert decide(SESSIONS["idle"], None, TasksCancelled(received=stop, count=2), FOLLOWING) == []
    # a run waiting on an approval is cancelled as well, tasks or none
    waiting = SESSIONS["awaiting_approval"]
    for count in (0, 2):
        after = decide(
            waiting, PENDING["approval"], TasksCancelled(received=stop, count=count), FOLLOWING
        )
        assert after == decide(waiting, PENDING["approval"], stop, POLICY)
        assert isinstance(after[0], Claim) and after[0].status == "cancelled"


def test_a_stop_cut_as_too_long_is_a_stop_for_every_reader_of_it() -> None:
    """/cancel followed by more than a message may hold is a stop all the same, by the one
    predicate (adapters.base.is_stop) the worker, the followed tasks' rule and the decision
    it cancels all read: before, the engine cancelled the run but left its waiting decision
    pending, and the worker did not stop a working run with it."""
    long = say("requester", "x" * 100, command="cancel", kind="too_long", length=500)
    assert is_stop(long)
    waiting = SESSIONS["awaiting_approval"]
    assert pending_id(waiting, long) == "D1"
    stop = Received(entry_id=ENTRY, event=long)
    assert decide(waiting, PENDING["approval"], stop, FOLLOWING) == [CancelTasks(received=stop)]
    after = decide(waiting, PENDING["approval"], TasksCancelled(received=stop, count=0), FOLLOWING)
    assert isinstance(after[0], Claim) and after[0].status == "cancelled"


def awaiting_always() -> Session:
    step = PlanStep(call_id="c1", tool="send_email", args={}, description="Email Bo", standing="d1")
    run = state()
    run.pending_plan = PendingPlan(id="P1", steps=[step])
    return Session(status="awaiting_approval", state=run, decision_id="D1")


def test_always_is_stored_by_an_effect_before_the_run_goes_on() -> None:
    session = awaiting_always()
    received = Received(entry_id=ENTRY, event=press("requester", "always"))
    claimed = Claimed(received=received, status="approved", decided=decided("approval", "approved"))
    effects = decide(session, PENDING["approval"], claimed, POLICY)
    grants = [e for e in effects if isinstance(e, GrantStanding)]
    assert grants == [GrantStanding(tools=(("send_email", "d1"),))]
    assert effects.index(grants[0]) == len(effects) - 2 and isinstance(effects[-1], Resume)
    # replayed after a crash: stored again (the same grant) before the run resumes
    resolving = Resolution(entry_id=ENTRY, approved=True, standing=True)
    replay = session.model_copy(update={"status": "running", "resolving": resolving})
    assert decide(replay, None, received, POLICY) == [
        GrantStanding(tools=(("send_email", "d1"),)),
        Resume(resolution=resolving),
    ]
    # a plain approval grants nothing
    plain = Claimed(received=received, status="approved", decided=decided("approval", "approved"))
    once = Received(entry_id=ENTRY, event=press("requester", "approve"))
    plain = replace(plain, received=once)
    assert not [
        e
        for e in decide(session, PENDING["approval"], plain, POLICY)
        if isinstance(e, GrantStanding)
    ]
