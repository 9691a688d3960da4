"""Registers the built-in providers by name (imported lazily so tests need no weights)."""

from compare.model import ModelProvider, register_provider


@register_provider("openrouter")
def _openrouter() -> ModelProvider:
    from compare.providers.openai_http import OpenAIHTTPProvider

    return OpenAIHTTPProvider(name="openrouter")


@register_provider("openai-compatible")
def _openai_compatible() -> ModelProvider:
    from compare.providers.openai_http import OpenAIHTTPProvider

    return OpenAIHTTPProvider(name="openai-compatible")


@register_provider("local")
def _local() -> ModelProvider:
    from compare.providers.local import LocalLlamaProvider

    return LocalLlamaProvider()
