"""Documents as text for the model: plain text and source files decoded, PDFs read with pypdf.

Errors::

    UnreadableDocument        carries a sentence for the chat
    ├── PasswordProtected     an encrypted PDF that opens with no empty password
    ├── DamagedDocument       a PDF pypdf cannot parse
    ├── TooComplex            a PDF too big or slow to read within the bounds
    └── Unsupported           neither text nor PDF (binary)
"""

from __future__ import annotations

import io
import logging
from pathlib import PurePosixPath

log = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset(
    {
        ".txt", ".text", ".md", ".markdown", ".rst", ".csv", ".tsv", ".json", ".jsonl", ".yaml",
        ".yml", ".toml", ".ini", ".cfg", ".conf", ".log", ".xml", ".html", ".htm", ".css", ".py",
        ".pyi", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".java", ".kt", ".kts", ".scala", ".go", ".rs",
        ".rb", ".php", ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".swift", ".m", ".sh", ".bash",
        ".zsh", ".ps1", ".sql", ".r", ".lua", ".pl", ".dart", ".ex", ".exs", ".erl", ".hs", ".clj",
        ".vue", ".svelte", ".tf", ".proto", ".graphql", ".gradle", ".env", ".diff", ".patch"
    }
)  # fmt: skip
TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/x-yaml", "application/yaml",
     "application/javascript", "application/x-sh", "application/sql", "application/toml"}
)  # fmt: skip


class UnreadableDocument(Exception):
    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence


class PasswordProtected(UnreadableDocument):
    pass


class DamagedDocument(UnreadableDocument):
    pass


class Unsupported(UnreadableDocument):
    pass


TOO_MUCH = "{name} was too much for me to read, so I left it unread."


class TooComplex(UnreadableDocument):
    pass


def is_pdf(name: str, mime_type: str, head: bytes) -> bool:
    return head.startswith(b"%PDF-") or mime_type == "application/pdf" or _suffix(name) == ".pdf"


def looks_textual(name: str, mime_type: str) -> bool:
    return (
        _suffix(name) in TEXT_SUFFIXES or mime_type.startswith("text/") or mime_type in TEXT_TYPES
    )


def read_text(name: str, data: bytes) -> str:
    """A text file's content; raises Unsupported for binary data."""
    if b"\x00" in data[:8192]:
        raise Unsupported(f"{name} isn't a text file, so I can't read it.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def read_pdf(name: str, data: bytes, max_chars: int) -> tuple[str, int]:
    """The text of a PDF's pages, stopping once past `max_chars`; (text, page count)."""
    from pypdf import PdfReader  # only the PDF child process needs it

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise PasswordProtected(f"{name} is password-protected, so I can't read it.")
        pages = len(reader.pages)
        parts: list[str] = []
        size = 0
        for page in reader.pages:
            text = page.extract_text() or ""
            parts.append(text)
            size += len(text)
            if size > max_chars:
                break
    except UnreadableDocument:
        raise
    except MemoryError:  # past the reading process's memory limit
        raise TooComplex(TOO_MUCH.format(name=name)) from None
    except Exception as exc:  # pypdf raises many kinds of error on damaged files
        log.info("could not read a PDF (%s)", type(exc).__name__)
        raise DamagedDocument(f"{name} looks damaged: I couldn't read it as a PDF.") from exc
    text = "\n\n".join(part.strip() for part in parts if part.strip())
    if not text:
        raise Unsupported(f"{name} has no text I can read (perhaps it is scanned images).")
    return text, pages


def _suffix(name: str) -> str:
    return PurePosixPath(name.lower()).suffix
