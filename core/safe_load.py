"""One safe reader of the JSON and YAML the suite reads (configs, model tables, task files).

`yaml.safe_load` builds no objects, but it still expands aliases (a 466-byte "billion laughs"
document became 1.0 GB and a 99 MB manifest) and recurses once per nesting level, like
`json.loads` (a file nested 20,000 deep was a RecursionError traceback). So a document is
checked before it is built: YAML from its event stream (iterative, so no recursion), counting
every node as it would be after alias expansion; JSON by its decoder's own recursion guard and
then an iterative walk. Either problem is a `DocumentTooComplex` naming the limit; callers turn
it into their own one-line error (ConfigError, TaskLoadError).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

MAX_DEPTH = 100  # nesting of mappings and lists; real configs and task files stay under 10
MAX_YAML_NODES = 100_000  # nodes after alias expansion; real model tables hold a few hundred


class DocumentTooComplex(ValueError):
    """A document nested deeper than MAX_DEPTH, or a YAML one whose aliases expand past MAX_YAML_NODES."""


def load_yaml(text: str) -> Any:
    """`yaml.safe_load(text)` once the document is known to be within MAX_DEPTH and MAX_YAML_NODES."""
    check_yaml(text)
    return yaml.load(text, Loader=_LOADER)


def check_yaml(text: str) -> None:
    try:
        _count_nodes(text)
    except yaml.YAMLError as error:  # libyaml's own nesting limit (1000 flow levels)
        if "nesting depth" not in str(error):
            raise
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise DocumentTooComplex(f"nested deeper than {MAX_DEPTH} levels{where}") from None


def _count_nodes(text: str) -> None:
    anchors: dict[str, int] = {}
    stack: list[list[Any]] = []  # [anchor, nodes so far] of each open collection
    total = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append([event.anchor, 1])
            if len(stack) > MAX_DEPTH:
                raise DocumentTooComplex(f"nested deeper than {MAX_DEPTH} levels{_line_of(event)}")
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, size = stack.pop()
        elif isinstance(event, yaml.ScalarEvent):
            anchor, size = event.anchor, 1
        elif isinstance(event, yaml.AliasEvent):
            anchor, size = None, anchors.get(event.anchor or "", 1)
        else:
            continue
        if anchor:
            anchors[anchor] = size
        if stack:
            stack[-1][1] += size
        else:
            total += size
        if total + sum(nodes for _, nodes in stack) > MAX_YAML_NODES:
            raise DocumentTooComplex(
                f"its aliases (*name) expand to more than {MAX_YAML_NODES:,} nodes{_line_of(event)}; "
                "write the values out instead"
            )


def _line_of(event: yaml.Event) -> str:
    """The " (line N)" of a parse event; empty for an event without a position."""
    mark = event.start_mark
    return f" (line {mark.line + 1})" if mark else ""


def load_json(text: str | bytes, **options: Any) -> Any:
    """`json.loads(text, **options)`, refused when nested deeper than MAX_DEPTH."""
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise DocumentTooComplex(f"nested deeper than {MAX_DEPTH} levels") from None
    check_depth(value)
    return value


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Iteratively: a DocumentTooComplex if dicts and lists nest deeper than `limit`."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                raise DocumentTooComplex(f"nested deeper than {limit} levels")
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
