"""Rate limits per provider and per model: requests and tokens per minute (`limits:` in the run config).

Every model call of every system passes through the unit's provider, so the limit is a provider wrapper
(`providers/rate_limit.py`): before each attempt it takes one request from the requests-per-minute bucket and
an estimate of the request's tokens (its text / 4) from the tokens-per-minute bucket, then settles the
token bucket with the tokens the reply reports. Buckets refill continuously at the configured rate and
hold at most `burst_s` seconds of it (at least one request), so a limit of 600 rpm sends 10 requests at
once and then one every 0.1 s. A caller that finds a bucket short reserves its share ahead (the level
goes negative) and sleeps until then: callers are served first come, first served, and the wait is
recorded as the call's queueing (`ModelResponse.queue_s`), never as model latency. A cached or replayed
call never reaches this wrapper and costs no capacity.

A limit keyed by a provider name (`openrouter`) is shared by every model of that provider; one keyed by
a model alias applies to that model; a call must pass both. With several worker processes
(`--executor process`), each worker holds `1/workers` of every limit.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from .model import ModelConfig, ModelError, ModelRequest


class RateLimit(BaseModel):
    """One entry of `limits:` (requests and/or tokens per minute)."""

    model_config = ConfigDict(extra="forbid")

    rpm: float | None = Field(default=None, gt=0)  # requests (attempts) per minute
    tpm: float | None = Field(default=None, gt=0)  # input + output tokens per minute
    burst_s: float = Field(default=1.0, gt=0)  # how many seconds of the rate may go at once


class TokenBucket:
    """A continuously refilled bucket that may go into debt: `reserve` returns how long to wait."""

    def __init__(self, per_minute: float, burst_s: float) -> None:
        self.rate = per_minute / 60.0  # units per second
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self.updated = time.monotonic()

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until `amount` would be covered (0: now)."""
        self._refill(now)
        return max(0.0, (min(amount, self.capacity) - self.level) / self.rate)

    def take(self, amount: float) -> None:
        self.level -= amount

    def give_back(self, amount: float) -> None:
        self.level = min(self.capacity, self.level + amount)


@dataclass
class _Ticket:
    token_buckets: list[TokenBucket]
    estimate: float


class RateLimiter:
    """The buckets of one process, by limit key; thread-safe."""

    def __init__(self, limits: dict[str, RateLimit], share: float = 1.0) -> None:
        self.limits = limits
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._lock = threading.Lock()
        for key, limit in limits.items():
            if limit.rpm:
                self._buckets[(key, "rpm")] = TokenBucket(limit.rpm * share, limit.burst_s)
            if limit.tpm:
                self._buckets[(key, "tpm")] = TokenBucket(limit.tpm * share, limit.burst_s)

    def applies_to(self, config: ModelConfig) -> bool:
        return config.alias in self.limits or config.provider in self.limits

    def admit(self, request: ModelRequest, config: ModelConfig, max_wait_s: float) -> tuple[float, _Ticket]:
        """Reserve capacity for one attempt and sleep until it is there; returns the seconds waited.
        Raises ModelError (nothing sent) when the wait would pass `max_wait_s` (the call's deadline)."""
        keys = [key for key in dict.fromkeys((config.provider, config.alias)) if key in self.limits]
        estimate = float(estimate_tokens(request))
        with self._lock:
            now = time.monotonic()
            requests = [b for k in keys if (b := self._buckets.get((k, "rpm")))]
            tokens = [b for k in keys if (b := self._buckets.get((k, "tpm")))]
            wait = max([0.0, *(b.wait_for(1.0, now) for b in requests), *(b.wait_for(estimate, now) for b in tokens)])
            if wait > max_wait_s:
                raise ModelError(
                    f"rate limit of {'/'.join(keys)}: no capacity within the call's deadline ({wait:.1f} s needed)",
                    attempts=0,
                    kind="rate_limited",
                )
            for bucket in requests:
                bucket.take(1.0)
            for bucket in tokens:
                bucket.take(estimate)
        if wait > 0:
            time.sleep(wait)
        return wait, _Ticket(tokens, estimate)

    def settle(self, ticket: _Ticket, used_tokens: int | None) -> None:
        """Charge the tokens the reply reported instead of the estimate (None: keep the estimate)."""
        if used_tokens is None or not ticket.token_buckets:
            return
        difference = used_tokens - ticket.estimate
        with self._lock:
            for bucket in ticket.token_buckets:
                bucket.take(difference) if difference > 0 else bucket.give_back(-difference)


def estimate_tokens(request: ModelRequest) -> int:
    """The request's input tokens, roughly (four characters a token), before any tokenizer sees it."""
    text = sum(len(m.content or "") for m in request.messages)
    calls = sum(len(json.dumps(c.arguments)) for m in request.messages for c in m.tool_calls or [])
    tools = sum(len(json.dumps(t.parameters)) + len(t.description) for t in request.tools)
    return max(1, (text + calls + tools) // 4)
