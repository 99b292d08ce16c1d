"""Summary hierarchies over the merged graph and the chunks (survey §4-5).

One module per hierarchy, each declaring a :class:`~unirag.hierarchy.spec.HierarchySpec`
(GraphRAG, ArchRAG with its C-HNSW, HyGRAG, LeanRAG), the RAPTOR tree's
clustering, and what they share: the layered loop (``layered``), attaching new
leaves on a corpus change (``attach``, ``incremental``) and the community store.
It sits above ``graph`` (extraction and merging) and ``index`` (vector and
lexical primitives) and below ``artifacts`` (the registry that builds them).
"""
