"""One codec for stored records and one way to read a Redis reply as text; the outbox keys
and event ids Parley makes are named in keys.py and read back there."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

import replies
from adapters.base import ConversationKey
from agent.protocols import JournalEntry
from bot.features.connections.store import PENDING, Pending
from bot.features.schedules.store import Schedule
from bot.features.standing import RECORD as STANDING
from bot.features.standing import Standing
from bot.runtime import keys
from bot.runtime.codec import Codec, as_text
from bot.runtime.records import MARKERS, Live, delivered, live_value, sent_ref, sent_value


def test_a_reply_reads_as_text_whatever_the_client_decodes() -> None:
    assert as_text is replies.as_text  # one function for bot, agent and memory
    assert as_text(b"caf\xc3\xa9") == "café"
    assert as_text("café") == "café"
    assert as_text(None) is None


def test_a_record_comes_back_as_it_went_in() -> None:
    schedule = Schedule(
        id="s1",
        when="every 10 minutes",
        objective="summarise the día",
        timezone="Europe/Madrid",
        owner_id="42",
        owner_name="Ana",
        platform="telegram",
        conversation_id="telegram:-:42:-",
        standing=("send_email",),
        created_at=1.5,
    )
    assert Schedule.decode(schedule.encode()) == schedule
    standing = Standing(id="a", tool="t", digest="d", where="*", expires=2.0)
    assert STANDING.decode(STANDING.encode(standing)) == standing
    journal: Codec[JournalEntry] = Codec(JournalEntry)
    entry = JournalEntry(finished=True, content="done", is_error=False)
    assert journal.decode(journal.encode(entry)) == entry


def test_a_record_written_before_reads_the_same() -> None:
    # as json.dumps(asdict(...)) wrote them: spaces, a list for a tuple, non-ASCII as is
    old = (
        '{"id": "s1", "when": "every 10 minutes", "objective": "día", "timezone": "UTC", '
        '"owner_id": "42", "owner_name": "Ana", "platform": "telegram", '
        '"conversation_id": "telegram:-:42:-", "team_id": null, "is_direct": true, '
        '"standing": ["a"], "anchor": 0, "created_at": 1.0, "state": "paused", "note": "x"}'
    )
    found = Schedule.decode(old)
    assert found.standing == ("a",) and found.state == "paused" and found.objective == "día"
    assert Codec(JournalEntry).decode('{"finished": false}') == JournalEntry(finished=False)
    pending = Pending(
        server="tracker",
        platform="slack",
        user_id="U1",
        user_name="Ana",
        team_id=None,
        conversation_id="slack:T1:C1:-",
        is_direct=False,
        question_id="q1",
        verifier="v",
    )
    assert PENDING.decode(json.dumps(asdict(pending))) == pending
    assert PENDING.decode(PENDING.encode(pending)) == pending


@pytest.mark.parametrize("raw", ["{not json", '{"id": "s1"}', '{"finished": "perhaps"}'])
def test_a_record_that_does_not_fit_is_one_value_error(raw: str) -> None:
    with pytest.raises(ValueError):
        Schedule.decode(raw)


def test_event_ids_read_back_what_they_were_made_of() -> None:
    made = keys.schedule_event("s1", 1_700_000_000)
    assert made == "schedule:s1:1700000000"
    assert keys.schedule_slot_of(made) == ("s1", 1_700_000_000)
    assert keys.trigger_of(keys.trigger_event("deploys", "d:1")) == "deploys"
    assert keys.connected_event("q1") == "connected:q1"
    assert keys.private_press_event("tg:5") == "tg:5:from-private"


def test_outbox_keys_name_one_reply_each() -> None:
    assert keys.reply_key("1-2", "outcome") == "1-2:outcome"
    assert keys.reminder_key("r1") == "reminder:r1"
    assert keys.task_key("k") == "mcptask:k"
    assert keys.task_key("k", "later") == "mcptask:k:later"
    assert len({keys.reply_key("e", s) for s in ("outcome", "reply", "error")}) == 3


def test_what_an_outbox_key_holds_reads_as_it_was_written_before() -> None:
    """A delivered id (text, or a platform's number in older records) and a streamed answer's
    half message, as `json.dumps` wrote them, read the same through the codec; markers are
    none of these."""
    assert delivered(json.dumps("1711.22")) == "1711.22"
    assert delivered(json.dumps(42)) == "42"
    assert delivered(json.dumps({"live": "17"})) == Live("17")
    assert json.loads(sent_value("1711.22")) == "1711.22"
    assert json.loads(live_value("17")) == {"live": "17"}
    for marker in (*MARKERS, b"in-flight:abc", b""):
        with pytest.raises(ValueError):
            delivered(marker)
    chat = ConversationKey(platform="telegram", chat_id="42")
    assert sent_ref(chat, json.dumps(42)).message_id == "42"  # type: ignore[union-attr]
    assert sent_ref(chat, json.dumps({"live": "17"})) is None
    assert sent_ref(chat, b"in-flight:abc") is None
