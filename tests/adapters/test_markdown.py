"""Model-style Markdown rendered for Telegram (HTML) and Slack (mrkdwn) through markdown-it-py:
the constructs a model really writes, splitting with balanced markup, and Slack mentions."""

from __future__ import annotations

import html as html_text
import re

from adapters.base import OutboundMessage
from adapters.slack.format import SECTION_LIMIT, messages
from adapters.telegram.format import split_html

ANSWER = """## Options compared

Here's the ***short version***: pick **B** unless cost matters.

| Option | Cost | Notes |
|--------|-----:|-------|
| A | $10 | needs *setup* |
| B & C | $125 | fastest |

> Note: prices are from the vendor's page
> and may change.

1. Read [the spec](https://en.wikipedia.org/wiki/Foo_(bar))
2. Then decide
   - with the team
   - by Friday

---

```python
if a < b and c & d:
    print("<ok>")
```

Keep `snake_case_names` and 2 * 3 as they are.
"""


def slack_text(markdown: str, **kwargs: object) -> str:
    fallback_and_blocks = messages(OutboundMessage(text=markdown, **kwargs))  # type: ignore[arg-type]
    return "\n\n".join(
        block["text"]["text"] for _, blocks in fallback_and_blocks for block in blocks
    )


def test_telegram_renders_what_models_write() -> None:
    [html] = split_html(ANSWER)
    assert "<b>Options compared</b>" in html
    assert "<i><b>short version</b></i>" in html
    assert (
        "<blockquote>Note: prices are from the vendor's page\nand may change.</blockquote>" in html
    )
    assert '<a href="https://en.wikipedia.org/wiki/Foo_(bar)">the spec</a>' in html
    assert "1. Read" in html and "2. Then decide" in html and "    • with the team" in html
    # A table becomes aligned columns in a <pre>, cells escaped.
    table = re.search(r"<pre>(Option.*?)</pre>", html, re.S)
    assert table is not None
    assert "B &amp; C" in table.group(1)
    rows = html_text.unescape(table.group(1)).split("\n")  # as the reader sees it
    assert rows[0].split("|")[0].strip() == "Option"
    assert len({re.search(r"[|+]", row).start() for row in rows}) == 1  # type: ignore[union-attr]
    assert '<pre><code class="language-python">if a &lt; b and c &amp; d:' in html
    assert "print(&quot;" not in html and 'print("&lt;ok&gt;")' in html
    assert "<code>snake_case_names</code>" in html and "2 * 3" in html
    assert "***" not in html and "|---" not in html


def test_slack_renders_what_models_write() -> None:
    text = slack_text(ANSWER)
    assert "*Options compared*" in text
    assert "_*short version*_" in text
    assert "> Note: prices are from the vendor's page\n> and may change." in text
    assert "<https://en.wikipedia.org/wiki/Foo_(bar)|the spec>" in text
    assert "    • with the team" in text
    assert "```\nOption | Cost | Notes" in text and "B &amp; C" in text
    assert "if a &lt; b and c &amp; d:" in text
    assert "***" not in text and "|---" not in text


def test_raw_html_from_a_model_stays_text() -> None:
    [html] = split_html('Click <a href="javascript:x">here</a> <script>1</script>')
    assert "<a " not in html and "<script>" not in html and "&lt;script&gt;" in html
    assert "href" not in split_html("[x](javascript:alert(1))")[0]
    assert "<javascript" not in slack_text("[x](javascript:alert(1))")


def test_long_answers_split_with_balanced_markup() -> None:
    code = "```python\n" + "\n".join(f"value_{i} = {i} < {i + 1}" for i in range(800)) + "\n```"
    quote = "\n".join(f"> line {i} with **bold** words" for i in range(400))
    markdown = f"Intro.\n\n{code}\n\n{quote}\n\nThe end."
    parts = split_html(markdown)
    assert len(parts) > 2 and all(len(p) <= 4096 for p in parts)
    for part in parts:
        for tag in ("pre", "code", "b", "blockquote"):
            opened = len(re.findall(rf"<{tag}[ >]", part))
            assert opened == part.count(f"</{tag}>"), (tag, part[:80])
    joined = "".join(parts)
    assert all(f"value_{i} = {i} &lt; {i + 1}" in joined for i in range(800))
    assert parts[0].startswith("Intro.") and parts[-1].endswith("The end.")
    sections = slack_text(markdown).split("\n\n")
    assert all(len(s) <= SECTION_LIMIT for s in sections)
    assert all(s.count("```") % 2 == 0 for s in sections)


def test_model_written_mentions_ping_nobody_unless_allowed() -> None:
    text = "FYI <!channel> <!here> <!everyone> <@U999> <!subteam^S123|@oncall> in <#C42|general>"
    out = slack_text(text)
    for pinging in ("<!channel>", "<!here>", "<!everyone>", "<@U999>", "<!subteam^S123"):
        assert pinging not in out
    assert "@\u2060channel" in out and "@\u2060here" in out and "@\u2060oncall" in out
    assert "<#C42|general>" in out  # a channel link pings nobody
    allowed = slack_text(text, allowed_mentions=frozenset({"<!here>", "<@U999>"}))
    assert "<!here>" in allowed and "<@U999>" in allowed and "<!channel>" not in allowed


def test_mentions_inside_links_and_code_do_not_ping() -> None:
    out = slack_text("see [<!channel>](https://x.example) and `<!here>`\n\n```\n<@U1>\n```")
    assert "<!channel>" not in out and "<!here>" not in out and "<@U1>" not in out


def test_a_reference_link_defined_in_another_block_is_a_link() -> None:
    # the blocks are rendered from one parse of the whole answer, which knows every reference
    text = (
        "See [the guide][g] and [the spec].\n\nMore below.\n\n"
        "[g]: https://example.org/guide\n[the spec]: https://example.org/spec"
    )
    (message,) = split_html(text)
    assert message == (
        'See <a href="https://example.org/guide">the guide</a> and '
        '<a href="https://example.org/spec">the spec</a>.\n\nMore below.'
    )
