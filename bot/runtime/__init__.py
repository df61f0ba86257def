"""The runtime: the delivery machinery under every feature (inbox, workers, locks and leases,
due work, sessions and decisions, outbox and journal, streaming) — every piece that keeps
events and replies durable in Redis."""
