"""One redaction for every output path (core/redaction.py): URL passwords, credential parameters, Authorization
header values, every registered secret in the forms it is written in (and cut short), and the values a caller
names (a provider's own key) are masked; prose that merely looks like a header stays."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest

from data_agent_compare.core import redaction
from data_agent_compare.core.redaction import redact_credentials, register_secret
from data_agent_compare.providers.http_deadline import redact

PASSWORD = "pw-S3cret-99"
QUOTED_KEY = 'sk-zz-Qw7Er9Ty2Ui4O"p\\l-0123456789abcdef'  # a quote and a backslash: escaped in JSON and CSV


@pytest.fixture(autouse=True)
def no_secrets_registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no secret registered (the registry is the process's)."""
    monkeypatch.setattr(redaction, "_secrets", ())
    monkeypatch.setattr(redaction, "_prefixes", ())
    yield


def test_header_values_and_registered_secrets_are_masked_in_every_form() -> None:
    register_secret(PASSWORD, user="alice")
    basic = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    text = f"auth=Basic {basic}; pw={PASSWORD}; b64={basic.rstrip('=')}; Basic statistics; Bearer sk-zz-1234567890"

    masked = redact_credentials(text)

    assert PASSWORD not in masked and basic.rstrip("=") not in masked and "sk-zz-1234567890" not in masked
    assert "Basic statistics" in masked  # prose stays


def test_a_registered_key_is_masked_escaped_and_cut_short() -> None:
    register_secret(QUOTED_KEY)
    text = " | ".join(
        [QUOTED_KEY, json.dumps(QUOTED_KEY), QUOTED_KEY.replace('"', '""'), QUOTED_KEY[:20] + "…", "sk-zz-Q"]
    )

    masked = redact_credentials(text)

    assert "Qw7E" not in masked, masked  # every form, and the 20-character piece a summary left
    assert masked.endswith("| sk-zz-Q")  # under 8 characters: too short to tell from ordinary text


def test_a_named_value_is_masked_in_every_form_without_being_registered() -> None:
    text = f"echo {QUOTED_KEY} as JSON {json.dumps(QUOTED_KEY)} and in a URL http://h/?x={QUOTED_KEY}"

    masked = redact_credentials(text, QUOTED_KEY, None)

    assert "Qw7E" not in masked and masked.startswith("echo *** as JSON")
    assert redact_credentials(f"key {QUOTED_KEY}") == f"key {QUOTED_KEY}"  # nothing registered: nothing else


def test_a_providers_error_text_goes_through_the_same_redaction_as_the_run_log() -> None:
    register_secret(PASSWORD)
    error = f"HTTP 502: upstream http://bob:{PASSWORD}@proxy/v1?api_key=abc123456 refused sk-own-key-42"

    masked = redact(error, "sk-own-key-42")

    assert masked == "HTTP 502: upstream http://bob:***@proxy/v1?api_key=*** refused ***"
    assert redact("no key here", None) == "no key here"
