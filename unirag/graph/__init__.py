"""Graph building, starting from the corpus: documents -> chunks (later: graphs)."""
