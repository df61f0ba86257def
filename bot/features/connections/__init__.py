"""People's own accounts on MCP servers: the encrypted store, the OAuth client cut into steps,
discovery, the `/oauth/callback` endpoint and `/connections`."""
