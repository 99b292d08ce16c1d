"""unirag: graph-based RAG methods as configurations of one operator pool.

Nothing is imported or computed here on purpose: ``unirag --help`` and a cold
``unirag query`` must start fast, so heavy libraries load lazily where used.
"""

__version__ = "0.1.0"
