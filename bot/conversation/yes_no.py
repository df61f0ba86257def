"""What a typed reply to "may I?" says: a clear yes, a clear no, or something else.

Only a reply made of nothing but yes-words (and politeness) is a yes: "yes", "ok, go ahead",
"yes please 👍". A yes with anything more ("yes, but to Carol") is not, since approving
it would run something other than what the person asked for; like any unclear reply it is a
rejection with the text as the reason. The console and the chat platforms read replies with
this one function.
"""

from __future__ import annotations

import re

YES = {
    "y",
    "yes",
    "yeah",
    "yea",
    "yep",
    "yup",
    "sure",
    "ok",
    "okay",
    "k",
    "approve",
    "approved",
    "go",
    "do",
    "proceed",
    "confirm",
    "confirmed",
    "lgtm",
    "absolutely",
    "definitely",
    "fine",
    "good",
    "👍",
    "✅",
    "👌",
}
NO = {
    "n",
    "no",
    "nope",
    "nah",
    "not",
    "reject",
    "rejected",
    "don't",
    "dont",
    "stop",
    "cancel",
    "deny",
    "denied",
    "never",
    "👎",
    "❌",
    "🚫",
}
# Words that add only politeness or emphasis to a yes or a no.
FILLER = {
    "please",
    "pls",
    "thanks",
    "thank",
    "you",
    "ahead",
    "it",
    "that",
    "sounds",
    "now",
    "thing",
}
_WORD = re.compile(r"[\w']+|[^\w\s]", re.UNICODE)
# Emoji variation selectors and skin tones: 👍🏽 is 👍.
_MODIFIERS = dict.fromkeys([0xFE0F, *range(0x1F3FB, 0x1F400)])
_PUNCTUATION = set(".,!?;:…-–—\"'()")


def verdict(text: str) -> bool | None:
    """True for a clear yes, False for a clear no, None for anything else."""
    words = [w for w in _WORD.findall(text.lower().replace("’", "'")) if w not in _PUNCTUATION]
    words = [w.translate(_MODIFIERS) for w in words]
    words = [w for w in words if w]
    if not words or any(w not in YES | NO | FILLER for w in words):
        return None
    yes, no = any(w in YES for w in words), any(w in NO for w in words)
    if yes == no:
        return None  # both ("don't do it" reads either way) or neither
    return yes
