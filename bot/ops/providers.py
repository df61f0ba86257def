"""Whether the language-model providers answer: the checks `parley doctor` and
`parley console` share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.config import Settings

Status = Literal["ok", "fail", "warn", "not configured"]
CHECK_TIMEOUT = 10.0


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    status: Status
    detail: str
    hint: str = ""

    def line(self) -> str:
        text = f"{self.status:<15} {self.name:<10} {self.detail}"
        return f"{text}\n{'':<26} -> {self.hint}" if self.hint else text


async def check_anthropic(settings: Settings) -> Check:
    if settings.anthropic.api_key is None:
        return Check(
            name="anthropic",
            status="not configured",
            detail="ANTHROPIC_API_KEY is not set",
            hint="set ANTHROPIC_API_KEY to use the hosted model",
        )
    import anthropic

    client = anthropic.AsyncAnthropic(
        api_key=settings.anthropic.api_key.get_secret_value(),
        base_url=settings.anthropic.base_url,
        max_retries=0,
        timeout=CHECK_TIMEOUT,
    )
    try:
        await client.models.retrieve(settings.anthropic.model)
    except anthropic.AuthenticationError:
        return Check(
            name="anthropic",
            status="fail",
            detail="the API key was rejected",
            hint="check ANTHROPIC_API_KEY",
        )
    except anthropic.NotFoundError:
        return Check(
            name="anthropic",
            status="fail",
            detail=f"model {settings.anthropic.model!r} is unknown",
            hint="set ANTHROPIC_MODEL to a model your key can use",
        )
    except anthropic.APIError as exc:
        return Check(
            name="anthropic",
            status="fail",
            detail=f"API not reachable ({type(exc).__name__})",
            hint="check ANTHROPIC_BASE_URL and the network; Ollama will answer meanwhile",
        )
    finally:
        await client.close()
    return Check(
        name="anthropic", status="ok", detail=f"key accepted, model {settings.anthropic.model}"
    )


async def check_ollama(settings: Settings) -> Check:
    import ollama

    client = ollama.AsyncClient(host=settings.ollama.host, timeout=CHECK_TIMEOUT)
    try:
        listed = await client.list()
    except (ConnectionError, ollama.ResponseError, OSError) as exc:
        return Check(
            name="ollama",
            status="not configured",
            detail=f"no Ollama at {settings.ollama.host} ({type(exc).__name__})",
            hint="install Ollama and run `ollama serve`, or set OLLAMA_HOST (it is the fallback model)",
        )
    except Exception as exc:
        return Check(
            name="ollama",
            status="fail",
            detail=f"unexpected answer from {settings.ollama.host} ({type(exc).__name__})",
            hint="check OLLAMA_HOST",
        )
    names = {m.model for m in listed.models if m.model}
    wanted = settings.ollama.model
    if wanted not in names and f"{wanted}:latest" not in names:
        return Check(
            name="ollama",
            status="fail",
            detail=f"reachable, but model {wanted!r} is not pulled",
            hint=f"run `ollama pull {wanted}`, or set OLLAMA_MODEL to one of: {', '.join(sorted(names)) or 'none'}",
        )
    return Check(name="ollama", status="ok", detail=f"reachable, model {wanted} available")
