"""Fixtures shared by every test; helpers live in helpers.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from data_agent_compare.core import ModelConfig
from data_agent_compare.core.model import forget_provider

from helpers import Responder, scripted_provider


@pytest.fixture
def scripted_model() -> Iterator[Callable[[Responder], ModelConfig]]:
    """Install a scripted test model for this test (provider "scripted"); returns its ModelConfig."""
    with scripted_provider() as install:
        yield install


@pytest.fixture(scope="session", autouse=True)
def free_the_embedded_model() -> Iterator[None]:
    """Free the embedded model when the session ends, before the interpreter tears down the modules
    llama.cpp's destructor needs (it would print an ignored exception after the test summary)."""
    yield
    forget_provider("local")
