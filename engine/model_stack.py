"""The models one unit talks to (the system's, and the judge's on report tasks), built in one place, layer
by layer from the inside out:

    the registered provider (or, under --replay, the recorded run's replies)
    → each request journaled before it is sent (`providers/journal.py`: calls.jsonl's `sent` lines)
    → the run's rate limits (`providers/rate_limit.py`, under the cache: a cached call takes no capacity)
    → the response cache (`CachingProvider`) or none (`KeyedProvider`): each call keyed
    → the unit's trace recorder (`UnitRecorder`: budgets, journal of finished calls)
    → the metered model a system or the judge calls (`MeteredModel`).

`build_unit_models` is the only place that knows this order; `units.py` asks it once per unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..core.limits import RateLimiter
from ..core.model import GenerationSettings, MeteredModel, ModelConfig, ModelProvider, RetrySettings
from ..core.runlog import UnitKey
from ..core.trace import Budgets
from ..providers.cache import CachingProvider, KeyedProvider, ResponseCache
from ..providers.journal import AttemptJournal, SentJournal, UnitRecorder
from ..providers.rate_limit import RateLimitedProvider
from ..providers.replay import ReplayLog


@dataclass(frozen=True)
class ModelLayers:
    """What a run puts around every model it calls: the registered providers of its models, a recorded
    run's replies instead (--replay), its rate limits, its response cache, and the metered model's retries."""

    providers: Mapping[str, ModelProvider]
    replay: ReplayLog | None
    limiter: RateLimiter | None
    cache: ResponseCache | None
    retries: RetrySettings


@dataclass(frozen=True)
class ModelRole:
    """One role's model in a unit: "system" or "judge", its model, budgets and sampling settings."""

    name: str
    model: ModelConfig
    budgets: Budgets
    generation: GenerationSettings | None


@dataclass
class UnitModel:
    """One role's model for a unit: what it calls and what records it."""

    metered: MeteredModel
    recorder: UnitRecorder


@dataclass
class UnitModels:
    """A unit's models by role: the system's, and the judge's when a judge scores the unit."""

    by_role: dict[str, UnitModel]

    @property
    def system(self) -> UnitModel:
        return self.by_role["system"]

    @property
    def judge(self) -> UnitModel | None:
        return self.by_role.get("judge")

    @property
    def recorders(self) -> list[UnitRecorder]:
        return [model.recorder for model in self.by_role.values()]

    @property
    def replay_missed(self) -> str | None:
        """Why the unit is no replay of the recorded one: a request (the system's or the judge's) the
        recorded unit never made; None when every request was served (or nothing is replayed)."""
        return next((r.provider.missed for r in self.recorders if r.provider.missed), None)


def build_unit_models(
    key: UnitKey, roles: list[ModelRole], layers: ModelLayers, journal: AttemptJournal | None = None
) -> UnitModels:
    """The metered models of unit `key`, one per role, each with its own trace; with a `journal`, each
    call is journaled when sent and when finished."""
    built = {}
    for role in roles:
        provider = _keyed_provider(key, role, layers, journal)
        recorder = UnitRecorder.for_unit(key, role.name, role.model.alias, role.budgets, provider, journal)
        name = key[1] if role.name == "system" else "judge"
        metered = MeteredModel(
            role.model, provider, recorder, system=name, retries=layers.retries, generation=role.generation
        )
        built[role.name] = UnitModel(metered, recorder)
    return UnitModels(built)


def _keyed_provider(
    key: UnitKey, role: ModelRole, layers: ModelLayers, journal: AttemptJournal | None
) -> KeyedProvider:
    """The provider layers of the module docstring, innermost first; the outermost says whether the
    innermost takes a per-attempt deadline (the embedded model does not: its own pace bounds its calls)."""
    if layers.replay is not None:
        return layers.replay.provider(key, "judge" if role.name == "judge" else "system")
    base = inner = layers.providers[role.model.provider]
    if journal is not None:  # innermost: a cached call or a rate limit's refusal sends nothing
        inner = SentJournal(inner, journal, key, role.name)
    if layers.limiter is not None and layers.limiter.applies_to(role.model):
        inner = RateLimitedProvider(inner, layers.limiter)
    keyed = CachingProvider(inner, layers.cache, key[3]) if layers.cache is not None else KeyedProvider(inner)
    # per instance, over the class's defaults: MeteredModel reads these from the outermost layer
    keyed.attempt_deadline = base.attempt_deadline  # type: ignore[misc]
    keyed.bills_nothing = base.bills_nothing  # type: ignore[misc]
    return keyed
