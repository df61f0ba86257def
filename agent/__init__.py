"""The platform-free agent core: ReAct loop, tools, prompts and LLM providers."""
