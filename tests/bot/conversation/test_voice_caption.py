"""An audio file or video with a caption where no transcriber is set up: the caption is
answered, and one line says the audio itself was not heard."""

from __future__ import annotations

from typing import Any

from bot.conversation.texts import VOICE_CAPTION_ONLY, VOICE_NOT_SET_UP
from tests.adapters.test_slack import slack_bot
from tests.agent.scripted import ScriptedModel, reply
from tests.bot.conversation.test_voice import (
    ANA,
    FakeTranscriber,
    api,
    telegram_bot,
    voice_settings,
)
from tests.fakes import slack as fs
from tests.fakes.telegram import FakeTelegram
from tests.helpers import until

# python-telegram-bot's own test audio (tests/_files/test_audio.py, TestAudioBase: the file,
# its duration, performer, title, type and size); its caption "Test *audio*" sent with
# parse_mode Markdown, which Telegram delivers as "Test audio".
PTB_CAPTION = "Test audio"
__all__ = ["api"]  # the fake transcription API fixture, shared with test_voice.py


def ptb_audio(fake: FakeTelegram) -> dict[str, Any]:
    file_id = fake.add_file(b"ID3" + bytes(122_917), path="music/telegram.mp3")
    return {
        "audio": {
            "file_id": file_id,
            "file_unique_id": "adc3145fd2e84d95b64d68eaa22aa33e",
            "duration": 3,
            "performer": "Leandro Toledo",
            "title": "Teste",
            "file_name": "telegram.mp3",
            "mime_type": "audio/mpeg",
            "file_size": 122920,
        },
        "caption": PTB_CAPTION,
    }


async def test_a_captioned_audio_without_a_transcriber_answers_its_caption(
    redis, api: FakeTranscriber
) -> None:
    model = ScriptedModel([reply("It is a test of audio.")])
    async with telegram_bot(redis, model, voice_settings(None)) as (harness, telegram):
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, extra=ptb_audio(telegram)))
        await until(lambda: len(telegram.chat(ANA)) == 2, within=15)
        await harness.settle()
    assert [p.text for p in telegram.chat(ANA)] == [VOICE_CAPTION_ONLY, "It is a test of audio."]
    assert model.turn_requests[0].messages[-1].text == PTB_CAPTION
    assert not telegram.method_calls("getFile")  # nothing downloaded that nobody can hear
    assert not api.uploads


async def test_a_slack_video_with_a_comment_without_a_transcriber_answers_the_comment(
    redis, api: FakeTranscriber
) -> None:
    model = ScriptedModel([reply("Looks like a demo.")])
    async with slack_bot(redis, model) as s:
        video = s.fake.add_file(b"\x00\x00\x00\x18ftypmp42" + bytes(64), "demo.mp4", "video/mp4")
        await s.event(fs.dm_event("UANA", "what is this about?", files=[video]))
        await until(lambda: len(s.fake.in_channel("DANA")) == 2, within=15)
        await s.harness.settle()
    assert [p.text for p in s.fake.in_channel("DANA")] == [
        VOICE_CAPTION_ONLY,
        "Looks like a demo.",
    ]
    assert model.turn_requests[0].messages[-1].text == "what is this about?"
    assert not api.uploads


async def test_audio_alone_without_a_transcriber_is_still_one_sentence(
    redis, api: FakeTranscriber
) -> None:
    model = ScriptedModel([])
    async with telegram_bot(redis, model, voice_settings(None)) as (harness, telegram):
        audio = ptb_audio(telegram)
        del audio["caption"]
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, extra=audio))
        await until(lambda: len(telegram.chat(ANA)) == 1, within=15)
        await harness.settle()
    assert [p.text for p in telegram.chat(ANA)] == [VOICE_NOT_SET_UP]
    assert model.turn_requests == []
