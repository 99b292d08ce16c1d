"""Index construction: the artifact registry and what it builds from the graphs and chunks:
vector indices (HNSW, pgvector), BM25 and TF-IDF, the community hierarchies (GraphRAG,
ArchRAG with C-HNSW, HyGRAG, LeanRAG), synonym edges, LinearRAG's Tri-Graph, and the cost
estimate of an indexing run."""
