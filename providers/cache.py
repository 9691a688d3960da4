"""A content-addressed cache of model responses, shared across runs, as a provider wrapper.

    request_key(request, config)    sha256 of provider, model id, endpoint, params and the request
    ResponseCache(folder)            the store: <folder>/<key[:2]>/<key>.json, written atomically
    CachingProvider(inner, cache, epoch)    one unit's provider: cache hits, else the model (then stored)

A cache entry is keyed by the request key *and* its sample: the epoch and how many identical requests
the unit already got an answer to. So epochs keep their own sampled responses (a re-run of a run
reproduces each epoch, never epoch 1 everywhere), and a loop that repeats a request gets its next
recorded answer, as it did. Errors are never cached.

A cached call costs nothing: its `usage.cost_usd` is 0 with `cost_source` "cached", and the trace step
says so (`ModelCallStep.cached`, with the original cost for reference). Its tokens are kept, so budgets
stop a cached run exactly where the original stopped.

`KeyedProvider` is what every unit's provider is (plain, cached or replayed): it computes the request
key of each call, and `annotate(step)` puts key and cache marks into the trace step. `MeteredModel`
records each call in the thread that made it, right after `complete` returns or raises, so the
call's details are handed over through a thread-local slot.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..core.model import CallContext, Message, ModelConfig, ModelError, ModelProvider, ModelRequest, ModelResponse
from ..core.redaction import redact_credentials
from ..core.trace import CachedCall, ModelCallStep, Usage, utc_now

CACHE_FORMAT = 1
log = logging.getLogger(__name__)


def request_key(request: ModelRequest, config: ModelConfig) -> str:
    """What identifies a model call: provider, model id, endpoint (credentials masked), provider
    parameters and the whole request (messages, tools, tool choice, schema, sampling settings, options)."""
    model = {
        "provider": config.provider,
        "model_id": config.model_id,
        "base_url": redact_credentials(config.base_url) if config.base_url else None,
        "params": config.params,
    }
    digest = hashlib.sha256(json.dumps(model, sort_keys=True, default=str).encode("utf-8"))
    # pydantic's own serializer: 2-3x faster than json.dumps on long conversations; its field order is
    # the model's, and the dicts inside keep the order their producer gave them, as in the recorded run.
    # top_p, seed and the options only when set: the keys of requests recorded before they existed stay the same.
    # Options at their protocol default (`logprobs: false`, `n: 1`) ask for nothing and leave the key as it was.
    unset = {name for name in ("top_p", "seed") if getattr(request, name) is None}
    asked = request.asked_options() if request.options else {}
    if not asked:
        unset.add("options")
    elif asked != request.options:
        request = request.model_copy(update={"options": asked})
    digest.update(b"\n" + request.model_dump_json(exclude=unset).encode("utf-8"))
    return digest.hexdigest()


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/data-agent-compare/responses` (~/.cache/... by default): one cache for every
    run of this user, whatever the working directory."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "data-agent-compare" / "responses"


class ResponseCache:
    """Responses on disk by key. Safe across threads and processes: an entry is written to a
    temporary file and renamed, so a reader sees a whole entry or none."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> ModelCallStep | None:
        """The recorded call of `key`, or None (also for an entry that cannot be read)."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            return ModelCallStep.model_validate(data["step"]) if data.get("format") == CACHE_FORMAT else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, step: ModelCallStep) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"format": CACHE_FORMAT, "key": key, "stored_at": utc_now(), "step": step.model_dump(mode="json")}
        temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            temporary.write_text(redact_credentials(json.dumps(entry, ensure_ascii=False)), encoding="utf-8")
            temporary.replace(path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise


@dataclass
class PendingCall:
    """What `complete` knows about a call and the trace step needs."""

    request_key: str
    request: ModelRequest | None = None  # as sent, for the run's request store
    response: ModelResponse | None = None
    cached: CachedCall | None = None
    store_as: str | None = None  # the cache key to store the step under, once priced


def response_of(step: ModelCallStep) -> ModelResponse:
    """A recorded call's response as a provider returns it, at no cost (the step keeps what it cost)."""
    usage = Usage(
        input_tokens=step.usage.input_tokens,
        output_tokens=step.usage.output_tokens,
        reasoning_tokens=step.usage.reasoning_tokens,
        cached_tokens=step.usage.cached_tokens,
        cache_write_tokens=step.usage.cache_write_tokens,
        cost_usd=0.0,
        cost_source="provider",  # not priced again by MeteredModel; `annotate` marks it "cached"
    )
    message = Message(role="assistant", content=step.content, tool_calls=step.tool_calls or None)
    return ModelResponse(
        message=message,
        usage=usage,
        finish_reason=step.finish_reason,
        provider_model=step.provider_model,
        logprobs=step.logprobs,
    )


def cached_mark(source: Literal["cache", "replay"], key: str, step: ModelCallStep) -> CachedCall:
    """The mark of a call answered by `step` instead of a model, keeping what the model's call cost."""
    original = step.cached  # a cached call of a cached call still points at what the model cost
    cost = original.original_cost_usd if original else step.usage.cost_usd
    cost_source = original.original_cost_source if original else step.usage.cost_source
    return CachedCall(source=source, key=key, original_cost_usd=cost, original_cost_source=cost_source)


def _same_call(response: ModelResponse | None, step: ModelCallStep) -> bool:
    """Whether `step` records `response` (None: a call that failed, recorded as such)."""
    if response is None:
        return not step.success
    if step.usage is response.usage:
        return True
    return step.content == response.message.content and step.tool_calls == (response.message.tool_calls or [])


class KeyedProvider(ModelProvider):
    """One unit's provider: `inner` (the registered provider), each call keyed (module docstring)."""

    name = "keyed"
    missed: str | None = None  # a request this provider could not serve as recorded (a replay's miss)

    def __init__(self, inner: ModelProvider | None) -> None:
        self.inner = inner
        self._local = threading.local()

    def complete(
        self, request: ModelRequest, config: ModelConfig, *, timeout_s: float, context: CallContext
    ) -> ModelResponse:
        pending = PendingCall(request_key(request, config), request)
        self._local.pending = pending
        response = self.respond(pending, request, config, timeout_s=timeout_s, context=context)
        pending.response = response
        return response

    def respond(
        self,
        pending: PendingCall,
        request: ModelRequest,
        config: ModelConfig,
        *,
        timeout_s: float,
        context: CallContext,
    ) -> ModelResponse:
        if self.inner is None:
            raise ModelError("no model behind this provider")
        return self.inner.complete(request, config, timeout_s=timeout_s, context=context)

    def annotate(self, step: ModelCallStep) -> ModelRequest | None:
        """Put this thread's last call's key (and cache mark) into its trace step; its request, as sent."""
        pending: PendingCall | None = getattr(self._local, "pending", None)
        self._local.pending = None
        if pending is None or not _same_call(pending.response, step):
            return None  # not the call this thread made last (a step recorded elsewhere): leave it unkeyed
        step.request_key = pending.request_key
        if pending.cached is not None:
            step.cached = pending.cached
            step.usage.cost_usd, step.usage.cost_source = 0.0, "cached"
            step.usage.table_cost_usd = 0.0  # nothing was billed now, by either source
        if step.success:
            self.answered(pending, step)
        return pending.request

    def answered(self, pending: PendingCall, step: ModelCallStep) -> None:
        """A call of this unit got its answer (caching providers count and keep it)."""

    def prepare(self, config: ModelConfig) -> None:
        if self.inner is not None:
            self.inner.prepare(config)


class CachingProvider(KeyedProvider):
    """One unit's provider through the response cache (module docstring)."""

    name = "cached"

    def __init__(self, inner: ModelProvider, cache: ResponseCache, epoch: int) -> None:
        super().__init__(inner)
        self.cache = cache
        self.epoch = epoch
        self._answered: Counter[str] = Counter()  # responses this unit got, per request key
        self._lock = threading.Lock()

    def respond(
        self,
        pending: PendingCall,
        request: ModelRequest,
        config: ModelConfig,
        *,
        timeout_s: float,
        context: CallContext,
    ) -> ModelResponse:
        with self._lock:
            sample = self._answered[pending.request_key]
        key = hashlib.sha256(f"{pending.request_key}:epoch={self.epoch}:sample={sample}".encode()).hexdigest()
        hit = self.cache.get(key)
        if hit is not None:
            pending.cached = cached_mark("cache", key, hit)
            response = response_of(hit)
        else:
            response = super().respond(pending, request, config, timeout_s=timeout_s, context=context)
            pending.store_as = key
        return response

    def answered(self, pending: PendingCall, step: ModelCallStep) -> None:
        # Counted when recorded, not per attempt: a call retried inside MeteredModel is one sample.
        with self._lock:
            self._answered[pending.request_key] += 1
        if pending.store_as is None:
            return
        try:
            self.cache.put(pending.store_as, step)
        except OSError as failure:  # a cache that cannot be written costs the next run money, not this run its result
            log.warning("response cache %s not written: %s", self.cache.folder, failure.strerror or failure)
