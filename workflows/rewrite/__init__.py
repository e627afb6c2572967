"""Rewrites: paragraph simplification (Society of Medical Simplifiers), document simplification (AgentSimp) and
lay articles (JRE-L), as plain async functions over a manuscript and the LLM layer."""
