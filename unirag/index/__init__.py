"""Index primitives the hierarchies and the artifact registry build on: vector indices
(HNSW, pgvector), kNN lists, BM25 and TF-IDF, token counts, synonym edges and
LinearRAG's Tri-Graph."""
