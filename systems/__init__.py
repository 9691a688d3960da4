"""Adapters for external frameworks, semantic-operator systems and RAG pipelines.

Each adapter subclasses `compare.system.System`; importing this package registers them.
"""
