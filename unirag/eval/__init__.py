"""Evaluation: benchmark datasets, the eval runner, metrics, the LLM judge (:mod:`unirag.eval.judge`),
token-budget sweeps and reports."""
