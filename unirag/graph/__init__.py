"""Graphs from the corpus: ingest (documents -> chunks), extraction (LLM or NLP), merging
into the graph types of survey Table 2 and their store, the RAPTOR tree, the layered
summary loop and the carry of a hierarchy's membership across corpus changes, export."""
