"""What a server reported is what the meter keeps (counts it left out are unknown, never 0, issue 25), and what a
model wrote is read within the depth limit (issue 26)."""

from data_agent_compare.providers.openai_protocol import usage_from_openai, usage_to_openai


def test_a_response_without_usage_has_unknown_tokens_not_zero() -> None:
    usage = usage_from_openai(None)
    assert usage.input_tokens is None and usage.output_tokens is None
    assert not usage.tokens_known


def test_reported_counts_are_kept_and_zero_stays_zero() -> None:
    usage = usage_from_openai({"prompt_tokens": 0, "completion_tokens": 7})
    assert (usage.input_tokens, usage.output_tokens) == (0, 7)


def test_frameworks_behind_the_gateway_still_get_integer_counts_for_unknown_usage() -> None:
    served = usage_to_openai(usage_from_openai({}))
    assert served["prompt_tokens"] == 0 and served["completion_tokens"] == 0


def test_tool_arguments_nested_20000_deep_are_kept_raw_not_a_recursion_error() -> None:
    from data_agent_compare.providers.openai_protocol import RAW_ARGUMENTS_KEY, parse_arguments

    bomb = '{"a": ' * 20_000 + "1" + "}" * 20_000
    assert parse_arguments({"name": "execute_sql", "arguments": bomb}) == {RAW_ARGUMENTS_KEY: bomb}
