"""Index construction: vector indices, BM25 (later: TF-IDF, community hierarchies)."""
