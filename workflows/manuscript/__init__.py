"""The manuscript model and its LaTeX and Markdown parsers."""
