"""The conversation: what an event means for its session, the chat commands, the sentences
Parley says, limits, and what comes with a message (thread context, files)."""
