"""Wiring: builds processes from settings — the composition root, the worker side, the chat
platforms, the model, memory, MCP servers and the terminal console."""
