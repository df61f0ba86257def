"""The runtime: inbox, workers, locks and leases, sessions and decisions, outbox and journal,
reminders — every piece that keeps events and replies durable in Redis."""
