"""The features: each one's store, loop and commands together (schedules, reminders, standing
approvals, connected accounts, triggers, followed MCP tasks, agent sessions, Telegram
re-offers of unanswered prompts), built on the delivery machinery in `bot/runtime`."""
