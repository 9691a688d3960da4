"""`compare models --prices-from-openrouter`: the alias table's prices from OpenRouter's model list.

OpenRouter's `GET /models` gives each model's USD price per token (`pricing.prompt`,
`pricing.completion`, as decimal strings); the alias table keeps USD per million tokens. Only the
`price:` line of each `provider: openrouter` alias whose `model_id` is listed changes: the file's
comments, order and other keys stay as they are, so the change reads as a one-line diff per alias.
The table written is the one `compare` reads: the shipped `configs/models.yaml` (in a checkout, the
repository's file, reviewable with `git diff`), or the file given with `--models-file`. Runs keep
the prices they used in their manifest, so refreshing never changes a finished run's costs.

Only `id` and `pricing` of each listed model are read (not the SDK's strict `Model` type): a field
OpenRouter adds or drops elsewhere in the list must not stop a price refresh.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import httpx

from ..core.model import Price
from ..providers.openrouter import OPENROUTER_KEY_ENV, openrouter_base_url
from .config import ConfigError, check_base_url, load_model_table


class PriceRefreshError(Exception):
    """OpenRouter's model list could not be read (the message says why; never the key)."""


@dataclass(frozen=True)
class PriceChange:
    alias: str
    model_id: str
    old: Price | None
    new: Price


def shipped_models_file() -> Path:
    return Path(str(importlib.resources.files("data_agent_compare") / "configs" / "models.yaml"))


def openrouter_key() -> str:
    key = os.environ.get(OPENROUTER_KEY_ENV)
    if not key:
        raise ConfigError(
            f"--prices-from-openrouter reads OpenRouter's model list with your key: set {OPENROUTER_KEY_ENV} "
            "(nothing was changed)"
        )
    override = os.environ.get("OPENROUTER_BASE_URL")
    if override:  # a password or a key in it would go out beside the key (issue 19): refused first
        check_base_url(override, "OPENROUTER_BASE_URL")
    return key


def fetch_prices(key: str, base_url: str | None = None, timeout_s: float = 30.0) -> dict[str, Price]:
    """Model id -> price per million tokens, from `GET {base_url}/models` (OpenRouter's by default)."""
    url = (base_url or openrouter_base_url()).rstrip("/") + "/models"
    try:
        reply = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout_s)
    except httpx.HTTPError as error:
        detail = f"{type(error).__name__}: {error}".replace(key, "[redacted]")
        raise PriceRefreshError(f"cannot read {url}: {detail}") from None
    if reply.status_code != 200:
        detail = reply.text[:300].replace(key, "[redacted]")
        raise PriceRefreshError(f"{url} answered HTTP {reply.status_code}: {detail}")
    try:
        models = reply.json()["data"]
    except (ValueError, KeyError, TypeError):
        raise PriceRefreshError(f"{url} did not answer a model list (JSON with 'data')") from None
    return {entry["id"]: price for entry in models if (price := _price(entry)) is not None}


# OpenRouter's per-token price of each token class (`pricing`), and the alias table's rate it sets.
_CLASSES = {
    "input_cache_read": "cached_input_per_mtok",
    "input_cache_write": "cache_write_per_mtok",
    "internal_reasoning": "reasoning_per_mtok",
}


def _price(entry: Any) -> Price | None:
    """The entry's price per million tokens of each class it lists (its request fee per request); None when
    it has none (a router with variable prices: -1)."""
    try:
        pricing = entry["pricing"]
        per_token = float(pricing["prompt"]), float(pricing["completion"])
        extra = {rate: float(pricing[name]) for name, rate in _CLASSES.items() if pricing.get(name) is not None}
        fee = float(pricing.get("request") or 0)
    except (KeyError, TypeError, ValueError):
        return None
    if min(per_token) < 0 or min(extra.values(), default=0) < 0 or fee < 0:
        return None
    return Price(
        input_per_mtok=round(per_token[0] * 1e6, 6),
        output_per_mtok=round(per_token[1] * 1e6, 6),
        **{rate: round(value * 1e6, 6) for rate, value in extra.items()},
        request_fee_usd=fee,
        checked=date.today().isoformat(),
        source="OpenRouter's model list",
    )


def refresh_table(path: Path, prices: dict[str, Price]) -> list[PriceChange]:
    """Write the new prices of the OpenRouter aliases of the table at `path`; the changes made."""
    table = load_model_table(path)
    changes = []
    for alias, model in table.items():
        if model.provider != "openrouter" or model.model_id not in prices:
            continue
        new = _merged(model.price, prices[model.model_id])
        if model.price is None or model.price.rates != new.rates:
            changes.append(PriceChange(alias, model.model_id, model.price, new))
    if not changes:
        return []
    text = path.read_text(encoding="utf-8")
    new_text = _with_prices(text, {change.alias: change.new for change in changes})
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(new_text, encoding="utf-8")
    try:
        written = load_model_table(temporary)
        if any(
            written[c.alias].price != c.new for c in changes
        ):  # never leave a table that says otherwise
            raise PriceRefreshError(f"{path}: could not rewrite the prices in place; nothing was changed")
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)
    return changes


_ALIAS = re.compile(r"^  (?P<alias>[^\s#][^:]*):\s*(#.*)?$")


def _with_prices(text: str, prices: dict[str, Price]) -> str:
    """The table's text with each alias's `price:` (flow or block style) replaced, or added after its model_id."""
    lines = text.splitlines(keepends=True)
    for start, end, alias in reversed(_alias_blocks(lines)):  # from the end: earlier indices stay valid
        if alias not in prices:
            continue
        new = f"    price: {_flow(prices[alias])}\n"
        keys = {line.split(":", 1)[0].strip(): i for i in range(start, end) if (line := lines[i]).startswith("    ")}
        if "price" in keys:
            first = last = keys["price"]
            while last + 1 < end and lines[last + 1].startswith("      "):  # a block-style price mapping
                last += 1
            lines[first : last + 1] = [new]
        else:
            lines.insert(keys["model_id"] + 1, new)
    return "".join(lines)


def _merged(old: Price | None, listed: Price) -> Price:
    """The listed rates over the table's: a class the list does not price (a cache rate) keeps the table's."""
    if old is None:
        return listed
    return old.model_copy(update={**listed.model_dump(exclude_defaults=True), **_base_rates(listed)})


def _base_rates(price: Price) -> dict[str, float | str | None]:
    return {"input_per_mtok": price.input_per_mtok, "output_per_mtok": price.output_per_mtok}


def _flow(price: Price) -> str:
    """The price as one YAML flow mapping: the rates it sets (never a default), its date and source."""
    fields = price.model_dump(exclude_defaults=True)
    fields.setdefault("input_per_mtok", price.input_per_mtok)
    fields.setdefault("output_per_mtok", price.output_per_mtok)
    shown = [f"{key}: {value:g}" for key, value in fields.items() if isinstance(value, float | int)]
    shown += [f"{key}: {json.dumps(value)}" for key, value in fields.items() if isinstance(value, str)]
    return "{" + ", ".join(shown) + "}"


def _alias_blocks(lines: list[str]) -> list[tuple[int, int, str]]:
    """(first line, end, alias) of every alias under `models:`."""
    blocks: list[tuple[int, int, str]] = []
    for index, line in enumerate(lines):
        match = _ALIAS.match(line)
        ends_block = match is not None or (line.strip() != "" and not line.startswith(" "))
        if ends_block and blocks and blocks[-1][1] == -1:
            blocks[-1] = (blocks[-1][0], index, blocks[-1][2])
        if match:
            blocks.append((index, -1, match.group("alias").strip()))
    if blocks and blocks[-1][1] == -1:
        blocks[-1] = (blocks[-1][0], len(lines), blocks[-1][2])
    return blocks
