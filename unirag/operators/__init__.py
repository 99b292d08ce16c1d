"""The operator pool (survey §6): retrieval operators as registered functions."""
