"""A recording's length is measured from its bytes, not taken from what the sender says."""

from __future__ import annotations

import pytest

from bot.conversation.audio_length import measured_seconds
from tests.adapters.samples import flac, mp3, mp4, ogg_vorbis, opus_ogg, wav, webm_opus


def test_an_opus_voice_note_is_measured_by_its_packets_whatever_its_pages_claim() -> None:
    assert measured_seconds(opus_ogg(4.2), 600) == pytest.approx(4.2, abs=0.06)
    # pages claiming 4 seconds of samples over 700 seconds of audio: the audio counts
    assert measured_seconds(opus_ogg(700, granule=4 * 48000), 600) > 600
    assert measured_seconds(opus_ogg(3000), 600) < 602  # counting stops past the limit


def test_a_wav_file_is_measured_by_the_data_it_holds() -> None:
    assert measured_seconds(wav(2.5), 600) == pytest.approx(2.5)
    cut = wav(10)[: 44 + 16000 * 2]  # a header that claims 10 s over 1 s of samples
    assert measured_seconds(cut, 600) == pytest.approx(1.0)


def test_an_mp4_is_measured_by_its_sample_table_not_its_stated_duration() -> None:
    assert measured_seconds(mp4(12.5), 600) == pytest.approx(12.5)
    assert measured_seconds(mp4(700, stated=4), 600) == pytest.approx(700)  # the header lies


def test_an_mp3_is_measured_by_its_frames_not_its_xing_header() -> None:
    assert measured_seconds(mp3(12.0), 600) == pytest.approx(12.0, abs=0.03)
    # a Xing header claiming 4 s of frames over 700 s of them: the frames count
    liar = mp3(700, claimed_frames=round(4 * 44100 / 1152))
    assert measured_seconds(liar, 600) > 600
    assert measured_seconds(mp3(3000), 600) < 601  # counting stops past the limit
    # garbage between frames hides none of them
    frame = mp3(1.0)[20:]
    assert measured_seconds(b"\x00" * 5000 + frame + b"\x13" * 333 + frame, 600) == pytest.approx(
        2.0, abs=0.06
    )


def test_a_flac_file_is_measured_by_its_frames_not_its_streaminfo() -> None:
    assert measured_seconds(flac(8.0), 600) == pytest.approx(8.0, abs=0.3)
    assert measured_seconds(flac(700, stated=4), 600) > 600  # STREAMINFO claims 4 s
    assert measured_seconds(flac(2.0, stated=9000), 600) == pytest.approx(2.0, abs=0.3)


def test_a_webm_recording_is_measured_by_its_opus_blocks_not_its_duration() -> None:
    assert measured_seconds(webm_opus(9.0), 600) == pytest.approx(9.0, abs=0.07)
    assert measured_seconds(webm_opus(700, stated=4), 600) > 600  # Info claims 4 s
    assert measured_seconds(webm_opus(3000), 600) < 601


def test_an_ogg_vorbis_file_is_measured_by_its_packets_not_its_granules() -> None:
    assert measured_seconds(ogg_vorbis(5.0), 600) == pytest.approx(5.0, abs=0.07)
    liar = ogg_vorbis(700, granule=4 * 16000)  # pages claiming 4 seconds
    assert measured_seconds(liar, 600) > 600


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"ID3\x04" + b"\x01" * 64,
        b"\x00\x00\x00\x18ftypmp42" + b"\x02" * 900,
        b"OggS\x00\x02" + bytes(range(256)) * 4,
        b"RIFF\x00",
    ],
)
def test_what_cannot_be_measured_is_not_guessed(data: bytes) -> None:
    assert measured_seconds(data, 600) is None
