"""The Parley service: configuration, composition root, CLI, HTTP, inbox, workers."""
