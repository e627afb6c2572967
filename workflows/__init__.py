"""Editor-agnostic core of margin: manuscript model, readability, LLM layer and pipelines."""
