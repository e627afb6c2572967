"""The LLM layer: one client for every pipeline, over any OpenAI-compatible endpoint."""
