"""Model clients (chat and embeddings) and the layers wrapped around every call."""
