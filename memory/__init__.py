"""Long-term memory on a RedisVL vector index."""
