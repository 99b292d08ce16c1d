"""Text: loaders, offline token counting, chunking, stable ids."""
