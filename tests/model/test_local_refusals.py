"""The embedded model refuses like a provider would: a prompt that does not fit its window and an output cut
at the output-token limit are the system's requests (the unit ends context_overflow / output_limit, a failure
in accuracy); broken output that was not cut is a malformed reply (the provider's, infra_error)."""

from __future__ import annotations

import pytest

from data_agent_compare.core import Message, ModelError, ModelRequest
from data_agent_compare.core.model import failure_status
from data_agent_compare.providers.local import Block, fit_prompt, to_message

REQUEST = ModelRequest(messages=[Message(role="user", content="How many orders?")])
SCHEMA = {"type": "object"}


def test_a_prompt_that_does_not_fit_the_embedded_window_is_a_context_overflow():
    question = Block("How many orders? " * 200, protected=True)  # never dropped: nothing left to elide
    with pytest.raises(ModelError, match="does not fit") as refused:
        fit_prompt([question], len, limit=100)
    assert failure_status(refused.value.kind) == "context_overflow"


@pytest.mark.parametrize(("finish", "status"), [("length", "output_limit"), ("stop", "infra_error")])
def test_incomplete_json_from_the_embedded_model_is_the_systems_only_when_cut_at_the_limit(finish, status):
    with pytest.raises(ModelError, match="not complete JSON") as failed:
        to_message('{"tool": "execute_sql", "arguments": {"sql": "SELECT', REQUEST, SCHEMA, finish)
    assert failure_status(failed.value.kind) == status
