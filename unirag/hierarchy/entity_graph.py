"""Entity and relationship texts for the vector indices, and the merged graph
as an :class:`~unirag.hierarchy.communities.EntityGraph` for the hierarchy builders.

Survey §5: on a KG the node index embeds the entity *name*; on a TKG/RKG it
embeds name + description; the relationship index embeds the two endpoints
with the relation's description and keywords.
"""

from __future__ import annotations

import numpy as np

from unirag.graph.merge import MergedGraph
from unirag.hierarchy.communities import EntityGraph


def entity_name_texts(graph: MergedGraph) -> tuple[list[str], list[str]]:
    ids = list(graph.entities)
    return ids, [graph.entities[i].name for i in ids]


def entity_full_texts(graph: MergedGraph) -> tuple[list[str], list[str]]:
    """``name: description`` per entity (the name alone when it has none)."""
    ids = list(graph.entities)
    texts = []
    for entity_id in ids:
        entity = graph.entities[entity_id]
        description = " ".join(entity.description.split())
        texts.append(f"{entity.name}: {description}" if description else entity.name)
    return ids, texts


def relationship_texts(graph: MergedGraph) -> tuple[list[str], list[str]]:
    """``source relation target: description (keywords)`` per relationship."""
    entities = graph.entities
    ids = list(graph.relationships)
    texts = []
    for rel in graph.relationships.values():
        text = f"{entities[rel.source].name} {rel.relation} {entities[rel.target].name}".strip()
        description = " ".join(rel.description.split())
        if description:
            text += f": {description}"
        if rel.keywords:
            text += f" ({', '.join(rel.keywords)})"
        texts.append(text)
    return ids, texts


def to_entity_graph(graph: MergedGraph, vectors: np.ndarray | None = None) -> EntityGraph:
    """The merged graph as arrays; ``vectors`` rows must follow ``graph.entities`` order."""
    ids = list(graph.entities)
    row = {entity_id: i for i, entity_id in enumerate(ids)}
    rels = list(graph.relationships.values())
    edges = np.array([(row[r.source], row[r.target]) for r in rels], dtype=np.int64).reshape(-1, 2)
    if len(edges):
        edges.sort(axis=1)
    entities = [graph.entities[i] for i in ids]
    return EntityGraph(
        ids=ids,
        names=[e.name for e in entities],
        types=[e.type for e in entities],
        descriptions=[e.description for e in entities],
        chunk_ids=[list(e.chunk_ids) for e in entities],
        edges=edges,
        weights=np.array([float(r.weight) for r in rels], dtype=np.float64),
        relation_texts=[r.description for r in rels],
        vectors=None if vectors is None else np.asarray(vectors, dtype=np.float32),
    )


def copy_entity_graph(graph: EntityGraph, vectors: np.ndarray | None = None) -> EntityGraph:
    """A copy of ``graph`` (its lists and arrays too) with ``vectors``: what :func:`to_entity_graph`
    gives for the same merged graph, without reading it again."""
    return EntityGraph(
        ids=list(graph.ids),
        names=list(graph.names),
        types=list(graph.types),
        descriptions=list(graph.descriptions),
        chunk_ids=[list(chunks) for chunks in graph.chunk_ids],
        edges=graph.edges.copy(),
        weights=graph.weights.copy(),
        relation_texts=list(graph.relation_texts),
        vectors=None if vectors is None else np.asarray(vectors, dtype=np.float32),
    )
