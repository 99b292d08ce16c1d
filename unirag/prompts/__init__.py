"""Prompt files and the one way a prompt becomes a model request.

This package sits below every user of prompts (graph building, indexing,
operators, generation, evaluation): it depends only on ``unirag.errors`` and
the plain request type of ``unirag.llm.base``. Files are grouped by the stage
that asks them, as graphrag does: ``index/`` (extraction, summaries, reports),
``query/`` (question conversion, agents, answers) and ``eval/`` (the judge and
question generation). Prompt names are unique across the three folders.
"""
