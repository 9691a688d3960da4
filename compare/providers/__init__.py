"""Built-in model providers, registered with `compare.model` on import."""

from compare.providers import registry  # noqa: F401
