"""Language-model providers behind the ChatModel protocol."""
