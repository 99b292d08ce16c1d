"""Retrievers for other frameworks: LangChain (:mod:`unirag.integrations.langchain`) and
LlamaIndex (:mod:`unirag.integrations.llama_index`).

Each module imports its framework at its top (a retriever subclasses the framework's base
class), so this package imports neither: ``import unirag`` never loads them, and a missing
framework is one line naming the extra that installs it (``pip install 'unirag[langchain]'``).
Both read their context through :mod:`unirag.integrations.source`, in process or over HTTP.
"""
