"""Model providers behind the core's one model interface, and the gateway's HTTP face.

    openai_http.py      OpenRouter and any OpenAI-compatible server (httpx)
    local.py            the embedded Gemma 3 270M, run by llama.cpp, grammar-constrained
    scripted.py         a scripted test model (responses from a Python function)
    openai_protocol.py  OpenAI chat-completions JSON ⇄ the core's messages, both directions
    endpoint.py         the metered model served as an OpenAI-compatible endpoint on loopback
    http_limits.py      what the gateway and the MCP server take from a client (body cap, timeouts, caps)
    cache.py            every unit's provider wrapper: request keys, and the response cache (--cache)
    journal.py          a unit's calls journaled when sent and when finished (calls.jsonl), its trace recorder
    rate_limit.py       the run's rate limits (`limits:`) around a unit's provider
    replay.py           a recorded run's responses served again, with no model (--replay)

Providers are registered by name in pyproject.toml (entry points `data_agent_compare.providers`).
"""
