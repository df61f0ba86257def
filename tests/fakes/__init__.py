"""Local servers that speak external HTTP APIs, for the real SDKs to talk to."""
