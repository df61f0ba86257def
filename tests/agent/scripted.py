"""The scripted model now lives in the package (`agent.testing`); kept for older imports."""

from agent.testing import (
    ScriptedModel,
    ScriptExhausted,
    call,
    is_summary_request,
    reply,
    turn,
)

__all__ = ["ScriptExhausted", "ScriptedModel", "call", "is_summary_request", "reply", "turn"]
