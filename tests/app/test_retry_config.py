"""The `retries:` section of the configuration: checked like every setting, and what the provider gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_agent_compare.core import RetrySettings
from data_agent_compare.engine.config import ConfigError, load_run_config


def test_the_shipped_defaults_are_the_policy_the_code_documents() -> None:
    assert load_run_config(None, {}).retries == RetrySettings()


def test_a_config_file_sets_the_policy(tmp_path: Path) -> None:
    config = tmp_path / "fast.yaml"
    config.write_text("retries:\n  max_attempts: 2\n  base_backoff_s: 0.1\n  attempt_timeout_s: 20\n")

    retries = load_run_config(config, {}).retries

    assert (retries.max_attempts, retries.base_backoff_s, retries.attempt_timeout_s) == (2, 0.1, 20.0)
    assert retries.read_timeout_s == RetrySettings().read_timeout_s  # the rest stays as shipped


@pytest.mark.parametrize(
    ("yaml", "named"),
    [
        ("retries:\n  max_attempt: 3\n", "retries.max_attempt"),
        ("retries:\n  max_attempts: 0\n", "retries.max_attempts"),
    ],
)
def test_a_misspelt_or_impossible_setting_is_refused_by_name(tmp_path: Path, yaml: str, named: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(yaml)

    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        load_run_config(config, {})
