"""Does a server's question ask for a secret? (passwords, codes sent to the person, keys,
tokens, card numbers): such a question is refused without asking anyone.

The server writes the question, so it is read as a hostile author would write it: the text is
normalised first (Unicode compatibility forms, zero-width and soft-hyphen characters dropped,
look-alike letters from Cyrillic and Greek read as the Latin ones, digits used as letters
read as letters, spaced-out letters joined), then searched for the words many languages use
for these things. The schema counts too: `format: password`, `writeOnly`, or a field that
must be a short run of digits under a question about a code.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# Cyrillic and Greek letters drawn like Latin ones (lower case: the text is casefolded first)
_LOOKALIKES = str.maketrans(
    {
        "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o",
        "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i",
        "ј": "j", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ɡ": "g", "ո": "n", "ս": "u",
        "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o",
        "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ς": "c", "ѵ": "v",
    }
)  # fmt: skip
_DIGITS = str.maketrans(
    {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"}
)
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u2060-\u2064\ufeff\u180e]")
_SPACED = re.compile(r"\b(?:\w[\s.\-_*·]){3,}\w\b")  # "p a s s w o r d", "p.a.s.s.w.o.r.d"

# Words (on word boundaries, in the normalised text) that ask for a secret, in the languages
# Parley's users are most likely to write; scripts without word spaces are matched as is.
_WORDS = [
    # English
    r"pass ?(?:word|phrase|code)s?",
    r"pwd",
    r"secrets?",
    r"(?:access|auth|bearer|refresh|session|api|security) ?tokens?",
    r"tokens?",
    r"api ?keys?",
    r"(?:private|secret|signing|license|recovery|encryption) ?keys?",
    r"seed ?phrase",
    r"mnemonic",
    r"credentials?",
    r"(?:your|the|a|enter|type|bank|card) pin",
    r"pin ?(?:codes?|numbers?)",
    r"otps?",
    r"2fa",
    r"mfa",
    r"totp",
    r"cvv2?",
    r"cvc",
    r"card ?numbers?",
    r"credit ?card",
    r"ssn",
    r"social ?security",
    r"(?:verification|security|one ?time|login|log ?in|sign ?in|auth\w*|confirmation|sms|"
    r"access|backup|recovery|reset|2fa|mfa) ?codes?",
    r"codes? (?:we|i|that was|they) (?:just )?(?:sent|texted|emailed|gave)",
    r"(?:texted|sent|emailed) (?:you )?(?:a |the )?codes?",
    r"codes? (?:from|in) (?:the |your )?(?:sms|text|email|authenticator|app)",
    r"\d[ -]?digit codes?",
    # German, Dutch, Scandinavian
    r"passwort\w*",
    r"kennwort\w*",
    r"\w*(?:bestätigungs|bestatigungs|verifizierungs|sicherheits|anmelde|zugangs)code\w*",
    r"geheimzahl",
    r"(?:api|geheim|privat\w*)[ -]?schlüssel",
    r"wachtwoord\w*",
    r"verificatiecode\w*",
    r"lösenord\w*",
    r"losenord\w*",
    r"adgangskode\w*",
    r"passord\w*",
    r"salasana\w*",
    # Romance languages
    r"contraseñas?",
    r"contrasenas?",
    r"clave(?:s)? (?:de acceso|secreta|api|privada)",
    r"(?:tu|su) clave",
    r"mot(?:s)? de passe",
    r"code(?:s)? (?:de vérification|de verification|de confirmation|d'accès|secret|pin)",
    r"clé(?:s)? (?:api|secrète|secrete|privée|privee)",
    r"código(?:s)? (?:de verificación|de verificacion|de seguridad|de acceso|de confirmação|"
    r"de verificação|de segurança)",
    r"codigo(?:s)? (?:de verificacion|de seguridad|de acceso|de verificacao|de seguranca)",
    r"senhas?",
    r"codice (?:di verifica|segreto|di sicurezza|otp)",
    r"parola d'ordine",
    r"chiave (?:api|segreta|privata)",
    r"parolă",
    # Slavic, Turkish, Hungarian, Greek (read through the look-alike map, so partly Latin)
    r"пароль\w*",
    r"код\w* (?:подтверждения|из смс|из sms)",
    r"токен\w*",
    r"hasł\w*",
    r"hasl[oa]\w*",
    r"heslo\w*",
    r"kod weryfikacyjny",
    r"şifre\w*",
    r"sifre\w*",
    r"jelszó\w*",
    r"jelszo\w*",
    r"κωδικ\w*",
]
# scripts without spaces between words: matched anywhere
_ANYWHERE = [
    "密码", "密碼", "口令", "验证码", "驗證碼", "认证码", "密钥", "密鑰", "令牌",
    "パスワード", "暗証番号", "認証コード", "確認コード", "ワンタイム",
    "비밀번호", "암호", "인증번호", "인증 번호", "인증코드",
    "كلمة المرور", "كلمة السر", "رمز التحقق", "סיסמה", "סיסמא", "קוד אימות",
    "पासवर्ड", "ओटीपी", "รหัสผ่าน", "mật khẩu", "mat khau", "mã xác minh", "ma xac minh",
]  # fmt: skip
_PATTERN = re.compile(r"(?<![\w])(?:" + "|".join(_WORDS) + r")(?![\w])")
# long words that still read as a secret with the spaces and punctuation taken out
_COMPACT = re.compile(
    r"password|passcode|passphrase|apikey|secretkey|privatekey|accesstoken|authtoken|"
    r"verificationcode|securitycode|onetimecode|cardnumber|creditcard|passwort|contrasena|"
    r"motdepasse|wachtwoord|kennwort"
)
_CODE = re.compile(r"(?<!\w)(?:code|pin|tan|código|codigo|kod|kód|код|kode|koodi|codice)s?(?!\w)")
_NOT_A_SECRET_CODE = re.compile(r"(?:zip|postal|post|country|area|dialling|dialing|promo) ?code")
_DIGITS_ONLY = re.compile(r"^\^?(?:\\d|\[0-9\])(?:\{(\d+)(?:,(\d+))?\}|\+)\$?$")


def normalised(text: str) -> list[str]:
    """The forms of `text` that are searched: as written, read without look-alikes and
    invisibles, with digits read as letters, and with spaced-out letters joined."""
    plain = unicodedata.normalize("NFKC", text).casefold()
    plain = _INVISIBLE.sub("", plain)
    latin = plain.translate(_LOOKALIKES)
    letters = latin.translate(_DIGITS)
    joined = _SPACED.sub(lambda m: re.sub(r"[\s.\-_*·]", "", m.group(0)), letters)
    return list(dict.fromkeys([plain, latin, letters, joined]))


def asks_for_secret(text: str) -> bool:
    """The text asks for a password, a code sent to the person, a key, a token or the like."""
    for form in normalised(text):
        if _PATTERN.search(form) or any(word in form for word in _ANYWHERE):
            return True
        if _COMPACT.search(re.sub(r"[^a-zñ]", "", form)):
            return True
    return False


def secret_field(field: dict[str, Any], texts: list[str]) -> bool:
    """A field whose schema marks it secret, or a short run of digits asked for as a code."""
    if field.get("format") == "password" or field.get("writeOnly") is True:
        return True
    if not _digit_code(field):
        return False
    said = " ".join(normalised(" ".join(texts)))
    return bool(_CODE.search(said)) and not _NOT_A_SECRET_CODE.search(said)


def _digit_code(field: dict[str, Any]) -> bool:
    """The field takes 4 to 10 digits and nothing else (a pattern, or an integer's bounds)."""
    pattern = field.get("pattern")
    if isinstance(pattern, str):
        found = _DIGITS_ONLY.match(pattern)
        if found is None:
            return False
        low = int(found.group(1) or 4)
        high = int(found.group(2) or found.group(1) or 10)
        return low >= 4 and high <= 10
    if field.get("type") == "integer":
        least, most = field.get("minimum"), field.get("maximum")
        return isinstance(least, int) and isinstance(most, int) and 1_000 <= most < 10**10
    return False
