"""The run's rate limits (`core/limits.py`) as a layer around a unit's provider: each attempt waits for
its share of the limits, and the wait is the reply's (or the error's) queueing, never model latency."""

from __future__ import annotations

import time

from ..core.limits import RateLimiter
from ..core.model import CallContext, ModelConfig, ModelError, ModelProvider, ModelRequest, ModelResponse


class RateLimitedProvider(ModelProvider):
    """`inner` behind the run's rate limits; the wait is the reply's (or the error's) queueing."""

    name = "rate-limited"

    def __init__(self, inner: ModelProvider, limiter: RateLimiter) -> None:
        self.inner = inner
        self.limiter = limiter

    def complete(
        self, request: ModelRequest, config: ModelConfig, *, timeout_s: float, context: CallContext
    ) -> ModelResponse:
        started = time.perf_counter()
        waited, ticket = self.limiter.admit(request, config, max_wait_s=max(0.0, timeout_s - 0.5))
        remaining = max(0.001, timeout_s - (time.perf_counter() - started))
        try:
            response = self.inner.complete(request, config, timeout_s=remaining, context=context)
        except ModelError as error:
            error.queue_s += waited
            self.limiter.settle(ticket, error.usage.total_tokens if error.usage else None)
            raise
        response.queue_s += waited
        self.limiter.settle(ticket, response.usage.input_tokens + response.usage.output_tokens)
        return response

    def prepare(self, config: ModelConfig) -> None:
        self.inner.prepare(config)
