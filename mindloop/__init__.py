"""mindloop: a local-first runtime for teams of LLM agents."""
