"""Adapters for external frameworks, semantic-operator systems and RAG pipelines (none yet).

Each adapter subclasses `compare.System`, is registered by name in pyproject.toml (entry points
`data_agent_compare.systems`), and points its framework at `RunContext.openai_endpoint()`, so
the framework's model calls are metered like our workflows'. Keep a framework's imports inside
`run` (or a helper it calls): `compare systems` imports every system module to list it.
"""
