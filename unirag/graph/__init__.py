"""Graphs from the chunks: extraction (LLM or NLP), merging into the graph types of
survey Table 2, their store, and export. Never imports a hierarchy."""
