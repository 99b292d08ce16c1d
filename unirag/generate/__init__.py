"""Generation: the answer modes (direct, map-reduce, adaptive filtering) that turn the
retrieved context into the last model call of a query."""
