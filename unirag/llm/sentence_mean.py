"""Long texts embedded as the mean of their sentences: each sentence embedded once for all.

Entity descriptions, relationship descriptions, community summaries and reports, RAPTOR's tree
summaries: on the zero-LLM path all of them are made of the corpus's own sentences, and one
sentence is cited by dozens of them (a sentence naming n entities describes up to n(n-1)/2
relationships). Embedding each text whole read the same sentences again and again: the whole
2Wiki pipeline embedded 30x its corpus.

A mean-pooling model (all-MiniLM, wordllama) makes a text's vector from the mean of its tokens'
vectors, so a text's vector is close to the mean of its segments' vectors weighted by their
lengths (exact when the tokens did not see each other; MiniLM's attention makes it an
approximation: cosine 0.95 for relationship texts, 0.96 for entity texts, measured on 2Wiki;
docs: Performance). :class:`SentenceMeanEmbedder` embeds each text as

    normalise(sum over segments s of words(s) * v(s))

with the segments of :func:`unirag.text.sentences.text_segments` (each sentence, with a short
``Label:`` before one and the items of a ``;`` list apart) and ``v`` the wrapped model's
normalised vector, every distinct segment embedded once per call and, through the model cache,
once per workspace. The vector covers the
whole text, where the model alone read its first 256 word pieces.

Queries, chunks and names are embedded whole: the artifact layer wraps the embedder only for
the long texts, and only when ``index.long_texts: sentences`` asks: it is opt-in. On the dev sets
it cost most graph methods 0.02-0.12 of their evidence recall against the whole texts' vectors
(docs: Performance, "Embed what is needed, once"): the pair a relationship names, or the entity
a description is about, is in every token of the whole text's vector (attention), and only in
its label's share of a sentence mean.
"""

from __future__ import annotations

import numpy as np

from unirag.config import Settings
from unirag.llm.base import EmbeddingBatch, EmbeddingModel, normalise_rows
from unirag.llm.factory import Models
from unirag.text.sentences import text_segments

#: Appended to the wrapped model's name: vectors of the two ways are never mixed in one index.
NAME_SUFFIX = "+sentence-mean"


def base_model(name: str) -> str:
    """The model that made vectors named ``name``: a sentence mean's vectors are that model's,
    comparable with its vector of a question."""
    return name.removesuffix(NAME_SUFFIX)


def segment_weights(segments: list[str]) -> list[int]:
    """Each segment's weight: its words (at least 1), the share of the text's tokens it holds."""
    return [max(1, len(segment.split())) for segment in segments]


class SentenceMeanEmbedder:
    """An embedding model whose vector of a text is the word-weighted mean of its segments'
    vectors (module docstring); a text of one segment gets the wrapped model's own vector."""

    def __init__(self, inner: EmbeddingModel, batch_size: int | None = None) -> None:
        self.inner = inner
        self.name = f"{inner.name}{NAME_SUFFIX}"
        self._batch_size = batch_size  # segments per call of ``inner`` (an endpoint's request size)

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        if not texts:
            return self.inner.embed([], stage=stage)
        segments = [text_segments(text) or [text] for text in texts]
        row: dict[str, int] = {}
        for parts in segments:
            for part in parts:
                row.setdefault(part, len(row))
        distinct = list(row)
        size = self._batch_size or len(distinct)
        batches = [self.inner.embed(distinct[start:start + size], stage=stage) for start in range(0, len(distinct), size)]
        vectors = np.concatenate([np.asarray(batch.vectors, dtype=np.float32) for batch in batches])
        out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        for i, parts in enumerate(segments):
            weights = np.asarray(segment_weights(parts), dtype=np.float32)
            out[i] = weights @ vectors[[row[part] for part in parts]]
        sent = [batch.sent_tokens for batch in batches]
        return EmbeddingBatch(normalise_rows(out), prompt_tokens=sum(batch.prompt_tokens for batch in batches),
                              calls=sum(batch.calls for batch in batches),
                              cache_hits=sum(batch.cache_hits for batch in batches),
                              sent_tokens=None if None in sent else sum(s or 0 for s in sent))


def long_text_embedder(models: Models, settings: Settings) -> EmbeddingModel:
    """What embeds the long texts of a build: the models' embedder (``index.long_texts: whole``,
    the default) or its sentence mean (``sentences``, opt-in)."""
    if settings.index.long_texts == "sentences":
        return SentenceMeanEmbedder(models.embedder, settings.embedding.resolved_batch_size)
    return models.embedder
