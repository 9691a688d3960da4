"""`compare models`: the model aliases, and refreshing their prices from OpenRouter."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from . import common
from .common import fail
from .listing import print_listing

if TYPE_CHECKING:
    from ...core.model import Price


@dataclass(frozen=True)
class ModelsOptions:
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False
    prices_from_openrouter: Annotated[
        bool,
        typer.Option(
            "--prices-from-openrouter",
            help="Refresh the prices of the OpenRouter aliases from OpenRouter's model list (needs "
            "OPENROUTER_API_KEY; OPENROUTER_BASE_URL overrides the address) and write them into the table.",
        ),
    ] = False
    models_file: Annotated[
        Path | None,
        typer.Option("--models-file", help="An alias table of your own: listed over the shipped one, and refreshed."),
    ] = None


def models(options: ModelsOptions) -> None:
    """The model aliases of configs/models.yaml: provider, model id and prices (USD per million tokens)."""
    from ...core.model import PROVIDERS, unpriced
    from ...engine.config import ConfigError, load_model_table

    if options.prices_from_openrouter:
        _refresh_prices(options.models_file)
    try:
        table = load_model_table() | (load_model_table(options.models_file) if options.models_file else {})
    except ConfigError as problem:
        raise fail(str(problem)) from None
    rows = []
    for alias, model in table.items():
        price = model.price
        prices = "– (unknown)" if unpriced(model) else "free" if price is None else _per_mtok(price)
        registered = "" if model.provider in PROVIDERS else " (not registered)"
        rows.append([alias, model.provider + registered, model.model_id, prices])
    print_listing("Models (--models ALIAS)", ["alias", "provider", "model id", "$/Mtok"], rows, options.as_json)
    if not options.as_json:
        common.console.print(
            f"providers: {', '.join(PROVIDERS.names())}; also openai-compatible:<model id> with --base-url",
            highlight=False,
        )
    if not options.as_json and any(row[3] == "– (unknown)" for row in rows):
        common.console.print(
            "– (unknown): no price; such a model's cost is unknown (never $0) unless its provider reports it",
            highlight=False,
        )


def _per_mtok(price: Price) -> str:
    cached = "" if price.cached_input_per_mtok is None else f" / {price.cached_input_per_mtok:g} cached"
    fee = f" + ${price.request_fee_usd:g}/request" if price.request_fee_usd else ""
    return f"{price.input_per_mtok:g} in{cached} / {price.output_per_mtok:g} out{fee}"


def _refresh_prices(models_file: Path | None) -> None:
    """Write OpenRouter's current prices into the alias table (`engine/prices.py` says which and how)."""
    from ...engine.config import ConfigError
    from ...engine.prices import PriceRefreshError, fetch_prices, openrouter_key, refresh_table, shipped_models_file

    path = models_file or shipped_models_file()
    try:
        changes = refresh_table(path, fetch_prices(openrouter_key()))
    except ConfigError as problem:
        raise fail(str(problem)) from None
    except (PriceRefreshError, OSError) as problem:
        raise fail(f"prices not refreshed: {problem}", 1) from None
    console = common.console
    for change in changes:
        old = "–" if change.old is None else f"{change.old.input_per_mtok:g} / {change.old.output_per_mtok:g}"
        new = f"{change.new.input_per_mtok:g} / {change.new.output_per_mtok:g}"
        console.print(f"{change.alias} ({change.model_id}): $/Mtok in/out {old} -> {new}", highlight=False)
    console.print(f"{len(changes)} price(s) changed in {path}", highlight=False)
