"""The graph indexes of `rag_graph` (GraphRAG's method) and `rag_hippo` (HippoRAG's), built with networkx.

Entity graph (shared by both). The corpus' passages are grouped into text units of at most UNIT_CHARS
(consecutive passages of one file); one model call per unit (structured output, EXTRACT_SCHEMA) names
its entities and the facts relating them as "subject | relation | object" triples (HippoRAG's OpenIE).
Entities become nodes (merged by case-folded name), triples weighted edges; a node is linked to the
passages of its unit that mention it (all the unit's passages when none does) and described by the
sentences that mention it. A unit whose call failed adds nothing, and such an index is not cached.

Communities (`rag_graph`). Louvain communities of the entity graph (`networkx.community.
louvain_communities`, weighted, seed 0); the MAX_SUMMARIES largest with two or more entities get a
summary written by the model (structured output: title, summary), the others a summary made of their
entities' sentences and relations (no model call). Retrieval embeds the summaries with MiniLM, picks the
communities closest to the query and returns their summaries with the passages that mention most of
their entities.

Personalized PageRank (`rag_hippo`). Synonym edges join entities whose MiniLM name embeddings have
cosine >= SYNONYM_COSINE; the question's entities (named by the model) are matched to their nearest
node; `networkx.pagerank` runs with a personalization vector on those nodes (each weighted by its
specificity, 1 / the number of its passages) and damping HIPPO_DAMPING; a passage scores the sum of
its nodes' PageRank.

Every model call of a build is made by the `Indexer` (systems/rag_index.py): metered on the indexing
trace, never on a task's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core import Message
from ..core.safe_load import load_json
from ..tools.documents import embed
from .rag_index import Corpus, Indexer, Passage, index_key

if TYPE_CHECKING:
    import networkx as nx

# imported on first use, and before units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = ("networkx", "networkx.algorithms.community", "numpy")


_SENTENCE = re.compile(r"(?<=[.!?])\s+")

UNIT_CHARS = 4000  # one extraction call per text unit of up to this many characters
MAX_ENTITIES = 10  # per unit
MAX_RELATIONS = 10
MAX_SUMMARIES = 5  # communities summarized by the model; the others from their entities' descriptions
EXTRACT_TOKENS, SUMMARY_TOKENS = 192, 160  # output caps of the indexing calls
SYNONYM_COSINE = 0.8
HIPPO_DAMPING = 0.5  # HippoRAG's damping factor

GRAPH_VERSION = "1"
EXTRACT_SYSTEM = """You build a knowledge graph from company documents. From the text, list its important named \
entities (organizations, programs, policies, metrics, products, regions, teams, time periods), written as the text \
writes them, and the facts that relate them as triples written "subject | relation | object" (for example \
"Gold tier | requires | 12 orders a year")."""
COMMUNITY_VERSION = "1"
SUMMARY_SYSTEM = """You write a report on one community of a knowledge graph extracted from company documents: \
a short title and a summary of what its entities are and how they relate. Keep every number, threshold and rule \
the entity descriptions and relations state."""

# Flat lists of short strings: the embedded model's grammar-constrained decoding is several times faster on them
# than on lists of objects, and HippoRAG's OpenIE writes its triples this way too.
EXTRACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 60},
            "maxItems": MAX_ENTITIES,
        },
        "triples": {"type": "array", "items": {"type": "string", "maxLength": 140}, "maxItems": MAX_RELATIONS},
    },
    "required": ["entities", "triples"],
    "additionalProperties": False,
}
SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"title": {"type": "string", "maxLength": 80}, "summary": {"type": "string", "maxLength": 600}},
    "required": ["title", "summary"],
    "additionalProperties": False,
}


def graph_settings() -> dict[str, Any]:
    """What the entity graph's cache key depends on besides corpus and model."""
    return {
        "version": GRAPH_VERSION,
        "prompt": EXTRACT_SYSTEM,
        "schema": EXTRACT_SCHEMA,
        "unit_chars": UNIT_CHARS,
        "max_tokens": EXTRACT_TOKENS,
    }


def community_settings() -> dict[str, Any]:
    return {
        **graph_settings(),
        "communities": COMMUNITY_VERSION,
        "summary_prompt": SUMMARY_SYSTEM,
        "max_summaries": MAX_SUMMARIES,
        "summary_tokens": SUMMARY_TOKENS,
    }


# ---------------------------------------------------------------- entity graph


def text_units(passages: list[Passage], limit: int = UNIT_CHARS) -> list[list[Passage]]:
    """Consecutive passages of one source, packed into units of at most `limit` characters."""
    units: list[list[Passage]] = []
    for passage in passages:
        last = units[-1] if units else None
        if last and last[0].source == passage.source and sum(len(p.text) for p in last) + len(passage.text) <= limit:
            last.append(passage)
        else:
            units.append([passage])
    return units


def node_key(name: str) -> str:
    return " ".join(name.casefold().split())


def entity_graph(indexer: Indexer) -> dict[str, Any]:
    """The corpus' entity graph for this model: from the cache, else built (shared by rag_graph and rag_hippo)."""
    key = index_key(indexer.corpus, indexer.setup.model, "entity_graph", graph_settings(), indexer.setup.generation)
    return indexer.obtain("entity_graph", key, build_entity_graph)


def build_entity_graph(indexer: Indexer) -> dict[str, Any]:
    """One extraction call per text unit; the merged graph as plain JSON (nodes, edges)."""
    nodes: dict[str, dict[str, Any]] = {}
    edges: dict[tuple[str, str], dict[str, Any]] = {}
    for unit in text_units(indexer.corpus.passages):
        extracted = extract(indexer, unit)
        if extracted is None:  # the call failed: this unit adds nothing, and the index is not cached
            continue
        for name in extracted.get("entities", []):
            _add_node(nodes, str(name), unit)
        for triple in extracted.get("triples", []):
            parts = [part.strip() for part in str(triple).split("|")]
            if len(parts) != 3 or not all(parts):
                continue
            ends = [_add_node(nodes, name, unit) for name in (parts[0], parts[2])]
            if None in ends or ends[0] == ends[1]:
                continue
            edge = edges.setdefault(tuple(sorted(ends)), {"relations": [], "weight": 0})  # type: ignore[arg-type]
            edge["weight"] += 1
            if len(edge["relations"]) < 5:
                edge["relations"].append(" ".join(parts))
    listed = [{"key": key, **node, "passages": sorted(node["passages"])} for key, node in nodes.items()]
    return {"nodes": listed, "edges": [{"source": a, "target": b, **e} for (a, b), e in edges.items()]}


def extract(indexer: Indexer, unit: list[Passage]) -> dict[str, Any] | None:
    """The unit's entities and triples, or None when the model call failed (noted on the indexer)."""
    text = "\n\n".join(f"{p.heading}\n{p.text}" if p.heading else p.text for p in unit)
    messages = [
        Message(role="system", content=EXTRACT_SYSTEM),
        Message(role="user", content=f"Document: {unit[0].source}\n\n{text}"),
    ]
    reply = indexer.generate(messages, EXTRACT_SCHEMA, EXTRACT_TOKENS)
    return None if reply is None else parse_json(reply)


def parse_json(text: str | None) -> dict[str, Any]:
    """A reply's JSON object, or {} (a model that ignored the schema contributes nothing)."""
    try:
        data = load_json(text or "")
    except ValueError:
        match = re.search(r"\{.*\}", text or "", re.S)
        try:
            data = load_json(match.group(0)) if match else {}
        except ValueError:
            data = {}
    return data if isinstance(data, dict) else {}


def _add_node(nodes: dict[str, dict[str, Any]], name: str, unit: list[Passage]) -> str | None:
    """The node of `name` (created on first sight), linked to the unit's passages that mention it (all of
    the unit's when none does) and described by the sentences that mention it."""
    key = node_key(name)
    if not key:
        return None
    node = nodes.setdefault(key, {"name": name.strip(), "descriptions": [], "passages": set()})
    mentioning = [p for p in unit if key in " ".join(p.text.casefold().split())]
    node["passages"].update(p.id for p in mentioning or unit)
    for passage in mentioning:
        for sentence in _SENTENCE.split(" ".join(passage.text.split())):
            if key in sentence.casefold() and sentence not in node["descriptions"] and len(node["descriptions"]) < 3:
                node["descriptions"].append(sentence[:240])
    return key


def to_networkx(data: dict[str, Any]) -> nx.Graph:
    import networkx as nx

    graph = nx.Graph()
    for node in data["nodes"]:
        graph.add_node(node["key"], **{k: v for k, v in node.items() if k != "key"})
    for edge in data["edges"]:
        graph.add_edge(edge["source"], edge["target"], weight=float(edge["weight"]), relations=edge["relations"])
    return graph


# ---------------------------------------------------------------- communities (GraphRAG)


@dataclass(frozen=True)
class Community:
    id: int
    nodes: list[str]
    title: str
    summary: str
    summarized: bool  # written by the model (else composed from the entities' descriptions)

    def text(self) -> str:
        return f"{self.title}\n{self.summary}"


def detect_communities(graph: nx.Graph) -> list[list[str]]:
    """Louvain communities, largest first (ties by their first member), each sorted."""
    from networkx.algorithms.community import louvain_communities

    if graph.number_of_nodes() == 0:
        return []
    found = louvain_communities(graph, weight="weight", seed=0)
    return sorted((sorted(c) for c in found), key=lambda c: (-len(c), c[0]))


def build_communities(indexer: Indexer, graph_data: dict[str, Any]) -> dict[str, Any]:
    """Communities of the entity graph with their summaries (model calls for the largest ones)."""
    graph = to_networkx(graph_data)
    communities = []
    for number, members in enumerate(detect_communities(graph)):
        if number < MAX_SUMMARIES and len(members) > 1:
            (title, summary), by_model = summarize(indexer, graph, members), True
        else:
            (title, summary), by_model = composed_summary(graph, members), False
        communities.append({"id": number, "nodes": members, "title": title, "summary": summary, "summarized": by_model})
    return {"communities": communities}


def community_facts(graph: nx.Graph, members: list[str]) -> str:
    nodes = graph.nodes
    lines = [f"- {nodes[n]['name']}: {' '.join(nodes[n]['descriptions'])}" for n in members]
    inside = graph.subgraph(members).edges(data=True)
    lines += [f"- {relation}" for _, _, data in inside for relation in data["relations"]]
    return "\n".join(lines)


def summarize(indexer: Indexer, graph: nx.Graph, members: list[str]) -> tuple[str, str]:
    messages = [
        Message(role="system", content=SUMMARY_SYSTEM),
        Message(role="user", content=f"Entities and relations of the community:\n{community_facts(graph, members)}"),
    ]
    data = parse_json(indexer.generate(messages, SUMMARY_SCHEMA, SUMMARY_TOKENS) or "")
    fallback = composed_summary(graph, members)
    return str(data.get("title") or fallback[0]), str(data.get("summary") or fallback[1])


def composed_summary(graph: nx.Graph, members: list[str]) -> tuple[str, str]:
    names = [graph.nodes[n]["name"] for n in members]
    return ", ".join(names[:4]), community_facts(graph, members)


class CommunityIndex:
    """GraphRAG retrieval: community summaries embedded with MiniLM, searched by cosine."""

    def __init__(self, corpus: Corpus, graph: nx.Graph, communities: list[Community]) -> None:
        import numpy as np  # on first use: `compare systems` lists the system without numpy

        self.corpus = corpus
        self.graph = graph
        self.communities = communities
        self.vectors = embed([c.text() for c in communities]) if communities else np.zeros((0, 384), np.float32)

    def search(self, query: str, top_communities: int, top_passages: int) -> tuple[list[Community], list[Passage]]:
        """The communities closest to `query`, and the passages mentioning most of their entities."""
        import numpy as np  # on first use: `compare systems` lists the system without numpy

        if not self.communities:
            return [], []
        scores = self.vectors @ embed([query])[0]
        chosen = [self.communities[i] for i in np.argsort(-scores)[:top_communities]]
        counts: dict[int, int] = {}
        for community in chosen:
            for node in community.nodes:
                for passage in self.graph.nodes[node]["passages"]:
                    counts[passage] = counts.get(passage, 0) + 1
        ranked = sorted(counts, key=lambda p: (-counts[p], p))[:top_passages]
        return chosen, [self.corpus.passages[p] for p in ranked]


# ---------------------------------------------------------------- personalized PageRank (HippoRAG)


class HippoIndex:
    """The entity graph with synonym edges, its nodes' MiniLM embeddings, and PPR over it."""

    def __init__(self, corpus: Corpus, graph: nx.Graph) -> None:
        import numpy as np  # on first use: `compare systems` lists the system without numpy

        self.corpus = corpus
        self.graph = graph
        self.nodes = list(graph.nodes)
        names = [graph.nodes[n]["name"] for n in self.nodes]
        self.vectors = embed(names) if names else np.zeros((0, 384), np.float32)
        self._add_synonym_edges()

    def _add_synonym_edges(self) -> None:
        import numpy as np  # numpy and the embedding model: not for `compare systems`

        if len(self.nodes) < 2:
            return
        similar = self.vectors @ self.vectors.T
        for i, j in zip(*np.nonzero(np.triu(similar, 1) >= SYNONYM_COSINE), strict=True):
            if not self.graph.has_edge(self.nodes[i], self.nodes[j]):
                self.graph.add_edge(self.nodes[i], self.nodes[j], weight=float(similar[i, j]), relations=["synonym"])

    def seeds(self, entities: list[str]) -> dict[str, float]:
        """Each query entity's nearest node, weighted by its specificity (1 / number of its passages)."""
        import numpy as np  # on first use: `compare systems` lists the system without numpy

        if not self.nodes or not entities:
            return {}
        nearest = np.argmax(embed(entities) @ self.vectors.T, axis=1)
        return {self.nodes[i]: 1.0 / max(1, len(self.graph.nodes[self.nodes[i]]["passages"])) for i in nearest}

    def rank(self, seeds: dict[str, float], top_k: int) -> list[tuple[Passage, float]]:
        """Passages by the summed personalized PageRank of their nodes."""
        import networkx as nx

        if not seeds:
            return []
        scores = nx.pagerank(self.graph, alpha=HIPPO_DAMPING, personalization=seeds, weight="weight")
        totals: dict[int, float] = {}
        for node, score in scores.items():
            for passage in self.graph.nodes[node]["passages"]:
                totals[passage] = totals.get(passage, 0.0) + score
        ranked = sorted(totals, key=lambda p: (-totals[p], p))[:top_k]
        return [(self.corpus.passages[p], totals[p]) for p in ranked]
