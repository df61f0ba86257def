"""Voice notes, audio files and video notes are heard: transcribed through an OpenAI-compatible
API (a fake one here), said back in one quoted line, and answered as if typed.

Telegram through the real python-telegram-bot against the fake Bot API, Slack through
slack-bolt with signed requests; the transcription API through its real wire format
(multipart `file` + `model`, `{"text": …}`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.config import Settings
from bot.conversation.texts import NOTHING_HEARD, VOICE_TOO_MUCH_TEXT
from bot.conversation.texts import VOICE_FAILED as FAILED
from bot.conversation.texts import VOICE_NOT_SET_UP as NOT_SET_UP
from bot.runtime.inbox import decode
from bot.runtime.locks import ConversationLocks
from tests.adapters.samples import flac, mp3, mp4, ogg_vorbis, opus_ogg, webm_opus
from tests.adapters.test_corpus_findings import corpus
from tests.adapters.test_slack import slack_bot
from tests.adapters.test_telegram import ANA, BOB, GROUP, bot, until
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness
from tests.fakes import slack as fs
from tests.fakes.telegram import FakeTelegram
from tests.fakes.transcribe import FakeTranscriber

OGG = b"OggS\x00\x02" + bytes(range(256)) * 40  # a voice note's bytes, as Telegram stores them
SAID = "Remind me to call Ana at five, and buy oat milk."


@pytest.fixture
async def api() -> AsyncIterator[FakeTranscriber]:
    async with FakeTranscriber() as fake:
        yield fake


def voice_settings(transcriber: FakeTranscriber | None, **voice: Any) -> Settings:
    values = dict(voice)
    if transcriber is not None:
        values.setdefault("PARLEY_TRANSCRIBE_URL", transcriber.url)
    return Settings.load(
        env_file=None, runtime={"PARLEY_RECLAIM_IDLE": 0.5, "PARLEY_LOCK_LEASE": 2}, voice=values
    )


@contextlib.asynccontextmanager
async def telegram_bot(
    redis: aioredis.Redis, model: ScriptedModel, settings: Settings
) -> AsyncIterator[tuple[Harness, FakeTelegram]]:
    async with FakeTelegram() as fake, bot(redis, fake, model, settings=settings) as (harness, _):
        yield harness, fake


def sent_file(
    fake: FakeTelegram, kind: str, data: bytes, path: str, **fields: Any
) -> dict[str, Any]:
    """A message's `kind` of file ("voice", "audio", "video_note") as the Bot API sends it,
    its bytes stored on the fake at `path`."""
    file_id = fake.add_file(data, path=path)
    about = {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": len(data)}
    return {kind: {**fields, **about}}


def voice_note(fake: FakeTelegram, data: bytes = OGG, duration: int = 4) -> dict[str, Any]:
    """A voice note as the Bot API sends it."""
    return sent_file(
        fake, "voice", data, "voice/file_7.oga", duration=duration, mime_type="audio/ogg"
    )


async def ana_sends(telegram: FakeTelegram, posts: int, **fields: Any) -> None:
    """Ana sends Parley a private message; wait until her chat holds `posts` messages."""
    telegram.push(telegram.message(chat_id=ANA, user_id=ANA, **fields))
    await until(lambda: len(telegram.chat(ANA)) == posts, within=15)


async def test_a_telegram_voice_note_is_transcribed_quoted_and_answered(
    redis, api: FakeTranscriber
) -> None:
    model = ScriptedModel([reply("Noted: call Ana at five, oat milk.")])
    api.text = SAID
    settings = voice_settings(
        api,
        PARLEY_TRANSCRIBE_MODEL="whisper-large-v3",
        PARLEY_TRANSCRIBE_API_KEY="sk-voice",
    )
    async with telegram_bot(redis, model, settings) as (harness, telegram):
        await ana_sends(telegram, 2, extra=voice_note(telegram))
        await harness.settle()
    [upload] = api.uploads
    assert upload.data == OGG  # byte for byte what Telegram stored
    assert upload.filename == "voice.oga"
    assert upload.model == "whisper-large-v3"
    assert upload.authorization == "Bearer sk-voice"
    heard, answer = [p.text for p in telegram.chat(ANA)]
    assert heard == f"🎤 “{SAID}”"
    assert answer == "Noted: call Ana at five, oat milk."
    newest = model.turn_requests[0].messages[-1]
    assert newest.role == "user" and newest.text == SAID  # unchanged, and all of the turn


async def test_telegram_audio_files_and_video_notes_are_sent_with_names_the_api_accepts(
    redis, api: FakeTranscriber
) -> None:
    model = ScriptedModel([reply("Got the song."), reply("Got the video note.")])
    mp3, mp4 = b"ID3\x04" + b"\x01" * 900, b"\x00\x00\x00\x18ftypmp42" + b"\x02" * 900
    api.text = "la la la"
    async with telegram_bot(redis, model, voice_settings(api)) as (harness, telegram):
        audio = sent_file(
            telegram,
            "audio",
            mp3,
            "music/file_1",
            duration=31,
            mime_type="audio/mpeg",
            performer="Ana",
            title="Demo",
        )
        await ana_sends(telegram, 2, caption="what is this?", extra=audio)
        note = sent_file(
            telegram, "video_note", mp4, "video_notes/file_2.mp4", duration=6, length=240
        )
        await ana_sends(telegram, 4, extra=note)
        await harness.settle()
    assert [(u.filename, u.data) for u in api.uploads] == [
        ("audio.mp3", mp3),
        ("video_note.mp4", mp4),
    ]
    # The caption is the message, the transcript follows it.
    assert model.turn_requests[0].messages[-1].text == "what is this?\n\nla la la"
    assert model.turn_requests[1].messages[-1].text == "la la la"


async def test_without_a_transcriber_one_sentence_says_voice_is_not_set_up(
    redis, api: FakeTranscriber
) -> None:
    model = ScriptedModel([reply("Hello!")])
    async with telegram_bot(redis, model, voice_settings(None)) as (harness, telegram):
        await ana_sends(telegram, 1, extra=voice_note(telegram))
        await ana_sends(telegram, 2, text="hi")
        await harness.settle()
    assert [p.text for p in telegram.chat(ANA)] == [NOT_SET_UP, "Hello!"]
    assert len(model.turn_requests) == 1
    assert not telegram.method_calls("getFile")  # nothing downloaded for nothing
    assert not api.uploads  # a server that runs but is not configured hears nothing


async def test_a_failing_transcriber_is_one_sentence_and_the_next_voice_note_works(
    redis, api: FakeTranscriber
) -> None:
    model = ScriptedModel([reply("Typed, and heard."), reply("Heard you this time.")])
    api.text = SAID
    async with telegram_bot(redis, model, voice_settings(api)) as (harness, telegram):
        api.status = 500
        await ana_sends(telegram, 1, extra=voice_note(telegram))
        await ana_sends(telegram, 2, text="still there?")
        api.status = 200  # the transcriber is back
        await ana_sends(telegram, 4, extra=voice_note(telegram))
        await harness.settle()
    texts = [p.text for p in telegram.chat(ANA)]
    assert texts == [FAILED, "Typed, and heard.", f"🎤 “{SAID}”", "Heard you this time."]
    assert len(api.uploads) == 2


async def test_a_hanging_transcriber_times_out_into_one_sentence(
    redis, api: FakeTranscriber
) -> None:
    model = ScriptedModel([reply("Here.")])
    api.text = SAID
    api.hang = True
    settings = voice_settings(api, PARLEY_TRANSCRIBE_TIMEOUT=0.5)
    async with telegram_bot(redis, model, settings) as (harness, telegram):
        await ana_sends(telegram, 1, extra=voice_note(telegram))
        await ana_sends(telegram, 2, text="hello?")
        await harness.settle()
    assert [p.text for p in telegram.chat(ANA)] == [FAILED, "Here."]


async def test_limits_are_settings_and_the_refusal_states_them(redis, api: FakeTranscriber) -> None:
    model = ScriptedModel([])
    api.text = SAID
    settings = voice_settings(api, PARLEY_VOICE_MAX_SECONDS=60, PARLEY_VOICE_MAX_MB=0.5)
    async with telegram_bot(redis, model, settings) as (harness, telegram):
        long = voice_note(telegram, duration=95)
        await ana_sends(telegram, 1, extra=long)
        big = voice_note(telegram, data=b"OggS" + b"\x00" * 700_000, duration=20)
        await ana_sends(telegram, 2, extra=big)
        await harness.settle()
    assert [p.text for p in telegram.chat(ANA)] == [
        "That voice message is too long for me (95 s; the limit is 60 s).",
        "That voice message is too large for me (0.7 MB; the limit is 0.5 MB).",
    ]
    assert not api.uploads and not model.turn_requests


async def test_a_voice_note_longer_than_it_declares_is_refused_unheard(
    redis, api: FakeTranscriber
) -> None:
    # The client says 4 seconds; the Opus packets hold 700. Before: transcribed and run.
    model = ScriptedModel([reply("never")])
    api.text = SAID
    async with telegram_bot(redis, model, voice_settings(api)) as (harness, telegram):
        lying = voice_note(telegram, data=opus_ogg(700, granule=4 * 48000), duration=4)
        await ana_sends(telegram, 1, extra=lying)
        await harness.settle()
    [refusal] = [p.text for p in telegram.chat(ANA)]
    assert refusal.startswith("That voice message is too long for me (6")
    assert refusal.endswith("the limit is 600 s).")
    assert not api.uploads and not model.turn_requests


@pytest.mark.parametrize(
    ("kind", "data", "mime"),
    [
        ("m4a", mp4(700, stated=4), "audio/mp4"),  # the header's duration
        ("mp3", mp3(70, claimed_frames=150), "audio/mpeg"),  # a Xing frame count
        ("flac", flac(70, stated=4), "audio/flac"),  # STREAMINFO's total
        ("webm", webm_opus(70, stated=4), "audio/webm"),  # the Segment's Duration
        ("ogg", ogg_vorbis(70, granule=4 * 16000), "audio/ogg"),  # Vorbis pages' granules
    ],
)
async def test_an_audio_file_whose_header_understates_its_length_is_refused_unheard(
    redis, api: FakeTranscriber, kind: str, data: bytes, mime: str
) -> None:
    # Telegram says 4 seconds, and so does the file's own header; its audio plays 70.
    model = ScriptedModel([reply("never")])
    api.text = SAID
    settings = voice_settings(api, PARLEY_VOICE_MAX_SECONDS=60)
    async with telegram_bot(redis, model, settings) as (harness, telegram):
        audio = sent_file(
            telegram, "audio", data, f"music/file_2.{kind}", duration=4, mime_type=mime
        )
        await ana_sends(telegram, 1, extra=audio)
        await harness.settle()
    [refusal] = [p.text for p in telegram.chat(ANA)]
    assert refusal.startswith("That voice message is too long for me (")
    assert refusal.endswith("the limit is 60 s).")
    assert not api.uploads and not model.turn_requests


async def test_a_transcript_is_held_to_the_message_length_limit_like_typed_text(
    redis, api: FakeTranscriber
) -> None:
    # A 4-second note that the transcriber turns into 20,000 characters: typed, that would
    # be refused as too long; heard, it was a 20,000-character message.
    model = ScriptedModel([reply("never")])
    api.text = "call Ana " * 2500
    settings = voice_settings(api)
    settings = settings.model_copy(
        update={"agent": settings.agent.model_copy(update={"max_message_chars": 4096})}
    )
    async with telegram_bot(redis, model, settings) as (harness, telegram):
        note = voice_note(telegram, data=opus_ogg(4), duration=4)
        await ana_sends(telegram, 1, extra=note)
        await harness.settle()
    assert [p.text for p in telegram.chat(ANA)] == [
        VOICE_TOO_MUCH_TEXT.format(length=len(api.text.strip()), limit=4096)
    ]
    assert not model.turn_requests


async def test_silence_gets_a_sentence_not_an_empty_run(redis, api: FakeTranscriber) -> None:
    model = ScriptedModel([])
    api.text = "  "
    async with telegram_bot(redis, model, voice_settings(api)) as (harness, telegram):
        await ana_sends(telegram, 1, extra=voice_note(telegram))
        await harness.settle()
    assert [p.text for p in telegram.chat(ANA)] == [NOTHING_HEARD]
    assert not model.turn_requests


async def test_a_voice_reply_to_parley_in_a_group_is_heard_and_others_are_not(
    redis, api: FakeTranscriber
) -> None:
    model = ScriptedModel([reply("Sure.")])
    api.text = "what's on today?"
    async with telegram_bot(redis, model, voice_settings(api)) as (harness, telegram):
        chatter = voice_note(telegram)  # a voice note to the group, not to Parley
        telegram.push(
            telegram.message(chat_id=GROUP, user_id=BOB, chat_type="group", extra=chatter)
        )
        addressed = voice_note(telegram)
        telegram.push(
            telegram.message(
                chat_id=GROUP,
                user_id=ANA,
                chat_type="group",
                reply_to_bot=True,
                extra=addressed,
            )
        )
        await until(lambda: len(telegram.chat(GROUP)) == 2, within=15)
        await harness.settle()
    assert len(api.uploads) == 1
    assert [p.text for p in telegram.chat(GROUP)] == ["🎤 “what's on today?”", "Sure."]


async def test_a_voice_reply_to_a_pending_approval_counts_as_its_words(
    redis, api: FakeTranscriber
) -> None:
    model = ScriptedModel(
        [turn(call("send_email", to="bob@example.com")), reply("Understood, not sent.")]
    )
    api.text = "no, wait, not Bob"
    async with telegram_bot(redis, model, voice_settings(api)) as (harness, telegram):
        await ana_sends(telegram, 1, text="email bob")
        await harness.settle()
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, extra=voice_note(telegram)))
        await until(lambda: len(telegram.chat(ANA)) >= 3, within=15)
        await harness.settle()
    [result] = [b for b in model.turn_requests[-1].messages[-1].content if b.type == "tool_result"]
    assert "Their reason: no, wait, not Bob" in str(result.content)  # what was said
    assert "🎤 “no, wait, not Bob”" in [p.text for p in telegram.chat(ANA)]


async def test_slack_audio_files_and_clips_are_heard(redis, api: FakeTranscriber) -> None:
    model = ScriptedModel([reply("Clip heard."), reply("File heard.")])
    webm, m4a = b"\x1aE\xdf\xa3" + b"\x03" * 800, b"\x00\x00\x00\x20ftypM4A " + b"\x04" * 800
    api.text = SAID
    async with slack_bot(redis, model, settings={"voice": voice_url(api)}) as s:
        clip = {
            **s.fake.add_file(webm, "audio_message.webm", "audio/webm"),
            "subtype": "slack_audio",
            "filetype": "webm",
            "media_display_type": "audio",
            "duration_ms": 5140,
        }
        await s.event(fs.dm_event("UANA", "", files=[clip], subtype="file_share"))
        await until(lambda: len(s.fake.in_channel("DANA")) == 2, within=15)
        recording = s.fake.add_file(m4a, "Recording 12", "audio/mp4")
        await s.event(fs.mention_event("UANA", "summarise", files=[recording]))
        await until(lambda: len(s.fake.in_channel("CGEN")) == 2, within=15)
        await s.harness.settle()
    assert [(u.filename, u.data) for u in api.uploads] == [
        ("audio_message.webm", webm),
        ("Recording_12.m4a", m4a),
    ]
    assert [p.body for p in s.fake.in_channel("DANA")] == [f"🎤 “{SAID}”", "Clip heard."]
    assert model.turn_requests[1].messages[-1].text.endswith(f"summarise\n\n{SAID}")


async def test_a_transcript_cannot_ping_a_slack_channel(redis, api: FakeTranscriber) -> None:
    model = ScriptedModel([reply("Done.")])
    api.text = "<!channel> lunch is ready <@UBOB>"
    async with slack_bot(redis, model, settings={"voice": voice_url(api)}) as s:
        clip = s.fake.add_file(OGG, "voice.ogg", "audio/ogg")
        await s.event(fs.dm_event("UANA", "", files=[clip], subtype="file_share"))
        await until(lambda: len(s.fake.in_channel("DANA")) == 2, within=15)
        await s.harness.settle()
    heard = s.fake.in_channel("DANA")[0].body
    assert "<!channel>" not in heard and "<@UBOB>" not in heard


def voice_url(api: FakeTranscriber) -> dict[str, Any]:
    return {"PARLEY_TRANSCRIBE_URL": api.url}


async def test_corpus_voice_and_video_notes_in_a_private_chat(redis, api: FakeTranscriber) -> None:
    """Real payload shapes (tgbot's test data): a voice note is heard; a 1,234-second video
    note is over the default limit, and the refusal says so."""
    api.text = SAID
    voice = corpus("telegram", "tgbot__src_types_tests_snapshots_message.json#96")
    video_note = corpus("telegram", "tgbot__src_types_tests_snapshots_message.json#94")
    model = ScriptedModel([reply("Heard.")])
    async with telegram_bot(redis, model, voice_settings(api)) as (harness, telegram):
        for number, update in enumerate((voice, video_note)):
            update["update_id"] = 900 + number
            update["message"]["chat"] = {"id": ANA, "type": "private", "first_name": "Ana"}
            update["message"]["from"] = {"id": ANA, "is_bot": False, "first_name": "Ana"}
        telegram.files["voice-id"] = ("voice/file_9.oga", OGG)
        telegram.push(voice)
        await until(lambda: len(telegram.chat(ANA)) == 2, within=15)
        telegram.push(video_note)
        await until(lambda: len(telegram.chat(ANA)) == 3, within=15)
        await harness.settle()
    assert [(u.filename, u.data) for u in api.uploads] == [("voice.oga", OGG)]
    assert [p.text for p in telegram.chat(ANA)] == [
        f"🎤 “{SAID}”",
        "Heard.",
        "That voice message is too long for me (1234 s; the limit is 600 s).",
    ]


async def test_a_voice_note_replayed_after_a_crash_is_said_back_and_answered_once(
    redis, api: FakeTranscriber
) -> None:
    api.text = SAID
    model = ScriptedModel([reply("Noted."), reply("Noted.")])
    async with telegram_bot(redis, model, voice_settings(api)) as (harness, telegram):
        await ana_sends(telegram, 2, extra=voice_note(telegram))
        await harness.settle()
        # As if the worker had died after posting but before storing what it did:
        conversation = f"telegram:-:{ANA}:-"
        keys = harness.runtime.keys
        session = await harness.runtime.sessions.load(conversation)
        session.last_entry = None
        await redis.set(keys.session(conversation), session.model_dump_json())
        [(entry, fields)] = await redis.xrange(keys.inbox)
        locks = ConversationLocks(redis, keys, lease=5, ttl=60)
        held = await locks.try_acquire(conversation)
        assert held is not None
        await harness.runtime.executor.handle(entry.decode(), decode(fields[b"event"]), held)
        await locks.release(held)
    assert len(api.uploads) == 2 and len(model.turn_requests) == 2  # heard and run again…
    assert [p.text for p in telegram.chat(ANA)] == [f"🎤 “{SAID}”", "Noted."]  # …said once
