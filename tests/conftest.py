"""Fixtures shared by every test; helpers live in helpers.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from data_agent_compare.compare import ModelConfig

from helpers import Responder, scripted_provider


@pytest.fixture
def scripted_model() -> Iterator[Callable[[Responder], ModelConfig]]:
    """Install a scripted test model for this test (provider "scripted"); returns its ModelConfig."""
    with scripted_provider() as install:
        yield install
