"""Measure (issue 36): the bill of a 20-unit run with cached and reasoning tokens, computed by hand from the
published rates, against the suite's total, through `compare` and the OpenRouter provider against a local
OpenRouter-like server that reports token classes but no cost. Prints the figures and their ratio.

    .venv/bin/python tests/app/measure_billed_costs.py [--workflows all --limit 3]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from data_agent_compare.cli.main import app

from helpers import KEY, FakeOpenAIServer, RecordedRequest, tool_call_response

# Published rates, USD per million tokens (configs/models.yaml): input, cached input, output (reasoning = output)
RATES = {"deepseek/deepseek-v3.2": (0.28, 0.028, 0.42), "openai/gpt-5": (1.25, 0.125, 10.0)}


def main() -> None:
    billed: list[tuple[str, dict]] = []
    lock = threading.Lock()

    def respond(request: RecordedRequest):
        body = request.body or {}
        model, messages = body["model"], body["messages"]
        later = any(m["role"] == "tool" for m in messages)
        prompt = sum(len(json.dumps(m)) for m in messages) // 4 + 900
        cached = int(prompt * 0.6) if later else 0  # 60% of later prompts served from the cache
        reasoning = 180 if model == "openai/gpt-5" else 0
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": 60 + reasoning,
            "total_tokens": prompt + 60 + reasoning,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }
        call = ("c2", "answer", '{"answer": "A"}') if later else ("c1", "get_schema_info", "{}")
        reply = tool_call_response([call], usage_body=usage, model=model)
        with lock:
            billed.append((model, usage))
        return reply

    with tempfile.TemporaryDirectory() as folder, FakeOpenAIServer() as fake:
        fake.responder = respond
        os.environ["OPENROUTER_API_KEY"] = KEY
        os.environ["OPENROUTER_BASE_URL"] = fake.base_url
        out = Path(folder) / "run"
        from typer.testing import CliRunner

        flags = ["--models", "deepseek-v3.2,gpt-5", "--limit", "10", "--out", str(out), "--concurrency", "4"]
        flags += sys.argv[1:]  # e.g. `--workflows all --limit 3`: the card's command line
        result = CliRunner().invoke(app, flags)
        assert result.exit_code == 0, result.output
        records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    by_hand = old = 0.0
    for model, usage in billed:
        fresh_rate, cached_rate, out_rate = RATES[model]
        cached = usage["prompt_tokens_details"]["cached_tokens"]
        by_hand += ((usage["prompt_tokens"] - cached) * fresh_rate + cached * cached_rate) / 1e6
        by_hand += usage["completion_tokens"] * out_rate / 1e6
        old += (usage["prompt_tokens"] * fresh_rate + usage["completion_tokens"] * out_rate) / 1e6  # before issue 36
    suite = sum(r["usage"]["cost_usd"] for r in records)
    print(f"units {len(records)}, model calls {len(billed)} (server's count)")
    print(f"bill by hand at published rates: ${by_hand:.8f}")
    print(f"suite's total:                   ${suite:.8f}  ratio {suite / by_hand:.6f}")
    print(f"input and output rates only (the suite before): ${old:.8f}  ratio {old / by_hand:.4f}")


if __name__ == "__main__":
    main()
