"""Telegram: the adapter (`adapter.py`) and the parts it is made of."""

from adapters.telegram.adapter import TelegramAdapter
from adapters.telegram.config import TelegramConfig

__all__ = ["TelegramAdapter", "TelegramConfig"]
