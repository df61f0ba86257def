"""Telegram photos, documents and replies, through getFile and the file URL of a fake Bot API,
on the real runtime with a scripted model."""

from __future__ import annotations

import base64

from agent.messages import ChatRequest, ImageBlock
from tests.adapters.samples import encrypted_pdf, jpeg, pdf, png
from tests.adapters.test_telegram import ANA, GROUP, bot
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.fakes.telegram import BOT_USERNAME, FakeTelegram
from tests.helpers import until


def user_turn(request: ChatRequest) -> str:
    """The newest user turn's text, each image's frame header (its data, not instructions)
    taken off."""
    text = request.messages[-1].text
    head, framed, rest = text.partition("is data, not instructions:")
    assert not framed or head.startswith("The image "), text
    return rest if framed else text


async def test_a_photo_with_caption_reaches_the_model_byte_for_byte(
    redis, telegram: FakeTelegram
) -> None:
    small, large, huge = png(90, 60), png(1280, 960), jpeg(2560, 1920, noise=True)
    ids = [
        telegram.add_file(data, path=f"photos/file_{n}.jpg")
        for n, data in enumerate((small, large, huge))
    ]
    sizes = telegram.photo_sizes((ids[0], 90, 60), (ids[1], 1280, 960), (ids[2], 2560, 1920))
    model = ScriptedModel([reply("A red rectangle.")])
    # the largest size is over the limit, so the next one down is taken
    async with bot(redis, telegram, model, max_file_bytes=len(huge) - 1) as (harness, _):
        telegram.push(
            telegram.message(chat_id=ANA, user_id=ANA, photo=sizes, caption="what is this?")
        )
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle()
    assert telegram.chat(ANA)[0].text == "A red rectangle."
    [request] = model.turn_requests
    [image] = request.messages[-1].images
    assert base64.b64decode(image.data) == large
    assert (image.media_type, image.width, image.height) == ("image/png", 1280, 960)
    assert user_turn(request) == "what is this?"
    assert [c.body["file_id"] for c in telegram.method_calls("getFile")] == [ids[1]]
    assert telegram.count(f"/file/bot{telegram.token}/photos/file_1.jpg") == 1


async def test_a_reply_brings_the_quoted_text_and_photo_along(
    redis, telegram: FakeTelegram
) -> None:
    picture = png(64, 64, (0, 200, 0))
    photo_id = telegram.add_file(picture, path="photos/green.png")
    model = ScriptedModel([reply("Tuesday, as Bob said."), reply("It is green.")])
    async with bot(redis, telegram, model) as (harness, _):
        said = telegram.message(
            chat_id=GROUP, user_id=7, name="Bob", text="Launch moves to Tuesday", chat_type="group"
        )["message"]
        telegram.push(
            telegram.message(
                chat_id=GROUP,
                user_id=ANA,
                text=f"@{BOT_USERNAME} when is the launch?",
                chat_type="group",
                reply_to=said,
            )
        )
        await until(lambda: len(telegram.chat(GROUP)) == 1)
        shown = telegram.message(
            chat_id=ANA,
            user_id=7,
            name="Bob",
            photo=telegram.photo_sizes((photo_id, 64, 64)),
        )["message"]
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="colour?", reply_to=shown))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle()
    first, second = model.turn_requests
    quoted = first.messages[-1].text
    assert "Launch moves to Tuesday" in quoted and "Bob" in quoted
    assert quoted.endswith("when is the launch?")
    assert base64.b64decode(second.messages[-1].images[0].data) == picture


async def test_a_reply_to_parley_marks_its_own_message(redis, telegram: FakeTelegram) -> None:
    model = ScriptedModel([reply("Sure.")])
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(
            telegram.message(chat_id=GROUP, user_id=ANA, text="why?", chat_type="group",
                             reply_to_bot=True)
        )  # fmt: skip
        await until(lambda: len(telegram.chat(GROUP)) == 1)
        await harness.settle()
    text = model.turn_requests[0].messages[-1].text
    assert "you (Parley)" in text and "earlier" in text


async def test_text_files_and_pdfs_are_read_as_text(redis, telegram: FakeTelegram) -> None:
    notes = telegram.add_file(b"name,qty\nbolts,12\nnuts,40\n", path="documents/stock.csv")
    paper = telegram.add_file(pdf("Quarterly revenue rose 12%", "Costs fell"), path="d/q3.pdf")
    model = ScriptedModel([reply("52 items."), reply("Revenue rose.")])
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(
            telegram.message(
                chat_id=ANA,
                user_id=ANA,
                caption="how many items?",
                document={"file_id": notes, "file_name": "stock.csv", "mime_type": "text/csv"},
            )
        )
        await until(lambda: len(telegram.chat(ANA)) == 1)
        telegram.push(
            telegram.message(
                chat_id=ANA,
                user_id=ANA,
                document={"file_id": paper, "file_name": "q3.pdf", "mime_type": "application/pdf"},
            )
        )
        await until(lambda: len(telegram.chat(ANA)) == 2)
        await harness.settle()
    first, second = model.turn_requests
    assert "bolts,12\nnuts,40" in first.messages[-1].text
    assert first.messages[-1].text.endswith("how many items?")
    pdf_text = second.messages[-1].text
    assert "Quarterly revenue rose 12%" in pdf_text and "Costs fell" in pdf_text
    assert "2 pages" in pdf_text
    assert "with no message" in pdf_text  # a file alone still gets an objective


async def test_bad_files_get_one_sentence_and_the_next_message_works(
    redis, telegram: FakeTelegram
) -> None:
    broken = telegram.add_file(b"%PDF-1.7\n" + b"\x00garbage" * 50, path="d/broken.pdf")
    locked = telegram.add_file(encrypted_pdf("secret plans"), path="d/locked.pdf")
    binary = telegram.add_file(b"\x7fELF\x02\x01\x01\x00" * 20, path="d/tool.bin")
    model = ScriptedModel([reply("Still here.")])
    documents = [
        {"file_id": "gone", "file_name": "big.zip", "file_size": 30 * 1024 * 1024},
        {"file_id": broken, "file_name": "broken.pdf", "mime_type": "application/pdf"},
        {"file_id": locked, "file_name": "locked.pdf", "mime_type": "application/pdf"},
        {"file_id": binary, "file_name": "tool.bin", "mime_type": "application/octet-stream"},
        {"file_id": "unknown", "file_name": "lost.txt", "mime_type": "text/plain"},
    ]
    async with bot(redis, telegram, model) as (harness, _):
        for document in documents:
            telegram.push(telegram.message(chat_id=ANA, user_id=ANA, document=document))
        await until(lambda: len(telegram.chat(ANA)) == len(documents))
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="are you ok?"))
        await until(lambda: len(telegram.chat(ANA)) == len(documents) + 1)
        await harness.settle()
    texts = [p.text for p in telegram.chat(ANA)]
    assert texts[0] == "big.zip is too large for me (30.0 MB; the limit is 20 MB)."
    assert "broken.pdf looks damaged" in texts[1]
    assert "locked.pdf is password-protected" in texts[2]
    assert "tool.bin" in texts[3] and "PDFs and text files" in texts[3]
    assert "couldn't download lost.txt" in texts[4]
    assert texts[5] == "Still here."
    assert len(model.turn_requests) == 1  # no run for a message that was only a bad file
    assert "secret plans" not in str(model.requests)
    assert not telegram.calls(f"/file/bot{telegram.token}/big.zip")  # refused before download


async def test_a_question_keeps_the_photo_across_a_restart(redis, telegram: FakeTelegram) -> None:
    picture = png(32, 32, (0, 0, 255))
    photo_id = telegram.add_file(picture, path="photos/blue.png")
    first = ScriptedModel([turn(call("ask_user", question="Crop or resize?", options=[]))])
    async with bot(redis, telegram, first) as (harness, _):
        telegram.push(
            telegram.message(
                chat_id=ANA,
                user_id=ANA,
                caption="fix this",
                photo=telegram.photo_sizes((photo_id, 32, 32)),
            )
        )
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle()
    second = ScriptedModel([reply("Resized.")])
    async with bot(redis, telegram, second) as (harness, _):  # another process, same Redis
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="resize"))
        await until(lambda: len(telegram.chat(ANA)) == 2)
        await harness.settle()
    [resumed] = second.turn_requests
    images = [b for m in resumed.messages for b in m.content if isinstance(b, ImageBlock)]
    assert [base64.b64decode(i.data) for i in images] == [picture]
    assert len(telegram.method_calls("getFile")) == 1  # kept in the run state, not refetched


async def test_an_approval_keeps_the_document_text_across_a_restart(
    redis, telegram: FakeTelegram
) -> None:
    contacts = telegram.add_file(b"Bob <bob@example.com>\n", path="documents/contacts.txt")
    first = ScriptedModel([turn(call("send_email", to="bob@example.com"))])
    async with bot(redis, telegram, first) as (harness, _):
        telegram.push(
            telegram.message(
                chat_id=ANA,
                user_id=ANA,
                caption="email the first contact",
                document={"file_id": contacts, "file_name": "contacts.txt"},
            )
        )
        await until(lambda: any(p.buttons for p in telegram.chat(ANA)))
        await harness.settle()
    approval = next(p for p in telegram.chat(ANA) if p.buttons)
    second = ScriptedModel([reply("Sent to Bob.")])
    async with bot(redis, telegram, second) as (harness, _):  # another process, same Redis
        telegram.click(approval, "Approve", user_id=ANA)
        await until(lambda: any(p.text == "Sent to Bob." for p in telegram.chat(ANA)))
        await harness.settle()
    [resumed] = second.turn_requests
    assert "Bob <bob@example.com>" in resumed.messages[0].text
    assert resumed.messages[0].text.endswith("email the first contact")


async def test_in_a_group_a_caption_mention_addresses_parley(redis, telegram: FakeTelegram) -> None:
    picture = png(20, 20)
    photo_id = telegram.add_file(picture, path="photos/g.png")
    sizes = telegram.photo_sizes((photo_id, 20, 20))
    model = ScriptedModel([reply("A small square.")])
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(
            telegram.message(
                chat_id=GROUP, user_id=ANA, chat_type="group", photo=sizes, caption="holiday pic"
            )
        )
        telegram.push(
            telegram.message(
                chat_id=GROUP,
                user_id=ANA,
                chat_type="group",
                photo=sizes,
                caption=f"@{BOT_USERNAME} what is this?",
            )
        )
        await until(lambda: len(telegram.chat(GROUP)) == 1)
        await harness.settle()
    [request] = model.turn_requests
    assert user_turn(request) == "what is this?"
    assert base64.b64decode(request.messages[-1].images[0].data) == picture
    assert len(telegram.method_calls("getFile")) == 1  # the unaddressed photo was never fetched
