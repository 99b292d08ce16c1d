"""Test doubles for the model protocols, plus a small corpus with known facts.

Nothing here touches the network or loads a real model: ``ScriptedChat``
answers from the prompt it is given, ``HashEmbedder`` embeds by hashing words.
Both are deterministic across runs and machines (hashlib, not ``hash()``).
``RecordingProgress`` remembers the bars a step opened.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from unirag.config import Settings, load_settings
from unirag.llm.base import ChatRequest, ChatResponse, EmbeddingBatch, RerankScores, normalise_rows
from unirag.llm.factory import ModelStack, build_stack
from unirag.progress import Progress

_WORD = re.compile(r"[a-z0-9]+")
_FIRST_SOURCE = re.compile(r"^\[1\] \(chunk: (.*?)\)$", re.MULTILINE)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


_PASSAGE = re.compile(r"^\[(P\d+)\] (.*?)(?=^\[P\d+\] |\Z)", re.MULTILINE | re.DOTALL)
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)*")


def scripted_extraction(user: str) -> str:
    """A deterministic extraction reply: capitalised phrases of each passage are
    entities; consecutive ones in a passage are related. Only passages after the
    "Passages:" header count (the prompt's example has its own [P1])."""
    body = user.split("Passages:", 1)[-1]
    entities, relationships = [], []
    for label, text in _PASSAGE.findall(body):
        names = list(dict.fromkeys(_CAPITALISED.findall(text)))
        entities += [{"passage": label, "name": n, "type": "concept", "description": f"{n} appears in {label}."}
                     for n in names]
        relationships += [
            {"passage": label, "source": a, "target": b, "relation": "next to",
             "description": f"{a} is mentioned before {b}.", "keywords": ["order"], "strength": 5}
            for a, b in zip(names, names[1:])
        ]
    return json.dumps({"entities": entities, "relationships": relationships})


class RecordingProgress(Progress):
    """Progress that draws nothing and remembers each bar: (label, total) in opening
    order, and how far each label advanced."""

    def __init__(self) -> None:
        super().__init__(enabled=False)
        self.tasks: list[tuple[str, int | None]] = []
        self.advanced: Counter[str] = Counter()

    @contextmanager
    def task(self, description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
        self.tasks.append((description, total))

        def advance(n: int = 1) -> None:
            self.advanced[description] += n

        yield advance


class ScriptedChat:
    """A deterministic chat model that answers by the kind of prompt.

    * the user message holds ``Context:`` -> the title of passage ``[1]``;
    * the user message asks to work "step by step" -> ``Reasoning...\\nAnswer: scripted``;
    * anything else -> ``scripted answer``.

    ``answers={prompt_name: fn(user_message) -> reply}`` adds or overrides
    replies for named prompts (tests of one index module script its prompt).
    ``fail_on={n: exc}`` raises ``exc`` on the n-th call (1-based). ``delay``
    sleeps inside each call; ``max_in_flight`` records the most concurrent calls.

    ``stream`` yields the same reply in pieces of ``stream_piece`` characters (so
    tests can check order), then the whole response; ``streamed`` counts those calls.
    """

    def __init__(
        self,
        name: str = "scripted-chat",
        fail_on: Mapping[int, BaseException] | None = None,
        delay: float = 0.0,
        answers: Mapping[str, Callable[[str], str]] | None = None,
    ) -> None:
        self.name = name
        self.answers = dict(answers or {})
        self.fail_on = dict(fail_on or {})
        self.delay = delay
        self.requests: list[ChatRequest] = []
        self.glean_answer = "NO"
        self.finish_reason = "stop"  # "length": every reply reports it was cut at max_tokens
        self.in_flight = 0
        self.max_in_flight = 0
        self.stream_piece = 3
        self.streamed = 0
        self._lock = threading.Lock()

    @property
    def calls(self) -> int:
        return len(self.requests)

    @staticmethod
    def user_message(request: ChatRequest) -> str:
        return next(m["content"] for m in reversed(request.messages) if m["role"] == "user")

    def answer_for(self, request: ChatRequest) -> str:
        user = self.user_message(request)
        kind = request.prompt_version.split("@")[0]
        if kind in self.answers:
            return self.answers[kind](user)
        if kind == "extract_graph":
            return scripted_extraction(user)
        if kind == "extract_glean_check":
            return self.glean_answer
        if kind == "extract_glean":
            return json.dumps({"entities": [{"passage": "P1", "name": "Gleaned Thing", "type": "concept",
                                             "description": "found on a second look"}], "relationships": []})
        if kind in ("summarize_descriptions", "summarize_cluster"):
            return f"summary of {len(user.splitlines())} lines"
        if "Context:" in user:
            match = _FIRST_SOURCE.search(user)
            return match.group(1) if match else "no context"
        if "step by step" in user:
            return "Reasoning...\nAnswer: scripted"
        return "scripted answer"

    def complete(self, request: ChatRequest) -> ChatResponse:
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                time.sleep(self.delay)
            if number in self.fail_on:
                raise self.fail_on[number]
            text = self.answer_for(request)
            prompt_tokens = sum(len(m["content"].split()) for m in request.messages)
            return ChatResponse(text=text, prompt_tokens=prompt_tokens, completion_tokens=len(text.split()),
                                finish_reason=self.finish_reason)
        finally:
            with self._lock:
                self.in_flight -= 1

    def stream(self, request: ChatRequest) -> Iterator[str | ChatResponse]:
        response = self.complete(request)
        with self._lock:
            self.streamed += 1
        text = response.text
        for start in range(0, len(text), self.stream_piece):
            yield text[start:start + self.stream_piece]
        yield response


class TokenCountedChat(ScriptedChat):
    """The scripted model replaying its replies as an OpenAI-compatible server reports them:
    prompt and completion tokens counted with our tokenizer (ScriptedChat counts words), so
    a cost estimate's prompt tokens compare with what a paid endpoint would bill."""

    def complete(self, request: ChatRequest) -> ChatResponse:
        from unirag.text.tokenizer import get_tokenizer

        count = get_tokenizer().count
        response = super().complete(request)
        return ChatResponse(text=response.text, prompt_tokens=sum(count(m["content"]) for m in request.messages),
                            completion_tokens=count(response.text), finish_reason=response.finish_reason)


class LoggedChat(ScriptedChat):
    """A :class:`ScriptedChat` for other processes (a Ray worker builds its own): each call it
    serves appends the request's cache key to the file ``log``, so a test counts the calls
    every process made, and sees any made twice."""

    def __init__(self, log: str) -> None:
        super().__init__()
        self.log = log

    def complete(self, request: ChatRequest) -> ChatResponse:
        response = super().complete(request)
        with open(self.log, "a", encoding="utf-8") as handle:
            handle.write(request.cache_key(self.name) + "\n")
        return response


class FailsOnce:
    """An executor task (squares its item) that fails the first time it meets ``item``: it raises
    (``how="raise"``) or kills its worker process (``how="die"``). A marker file under
    ``marker_dir`` remembers the failure across processes, so the retry succeeds."""

    def __init__(self, marker_dir: str, item: int, how: str = "raise") -> None:
        self.marker_dir, self.item, self.how = marker_dir, item, how

    def __call__(self, item: int) -> int:
        marker = Path(self.marker_dir) / f"failed-{item}"
        if item == self.item and not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
            if self.how == "die":
                import os

                os._exit(1)
            raise RuntimeError(f"task for item {item} failed once")
        return item * item


class HashEmbedder:
    """Bag-of-words hashed into ``dim`` buckets (sha256 per word), L2-normalised.

    ``fail_after_calls=n`` raises :class:`KeyboardInterrupt` on call n+1, as a
    kill in the middle of embedding would. ``calls`` and ``embedded_texts``
    count only the calls that returned.
    """

    def __init__(self, name: str = "hash-bow-64", dim: int = 64, fail_after_calls: int | None = None) -> None:
        self.name = name
        self.dim = dim
        self.fail_after_calls = fail_after_calls
        self.calls = 0
        self.embedded_texts = 0
        self.batches: list[list[str]] = []
        self._lock = threading.Lock()

    def vector(self, text: str) -> np.ndarray:
        out = np.zeros(self.dim, dtype=np.float32)
        for word in _words(text):
            digest = hashlib.sha256(word.encode("utf-8")).digest()
            out[int.from_bytes(digest[:4], "big") % self.dim] += 1.0
        return out

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        with self._lock:
            if self.fail_after_calls is not None and self.calls >= self.fail_after_calls:
                raise KeyboardInterrupt
            self.calls += 1
            self.embedded_texts += len(texts)
            self.batches.append(list(texts))
        raw = np.stack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dim), dtype=np.float32)
        tokens = sum(len(_words(t)) for t in texts)
        return EmbeddingBatch(normalise_rows(raw), prompt_tokens=tokens, calls=1)


# -- corpus -----------------------------------------------------------------

TEXT_FILES = {
    "paris.txt": "Paris is the capital of France. The Eiffel Tower was finished in 1889 on the Champ de Mars.",
    "tokyo.txt": "Tokyo is the capital of Japan. Shibuya crossing is among the busiest pedestrian crossings.",
    "nile.txt": "The Nile is a river in Africa. It flows north through Egypt into the Mediterranean Sea.",
}
JSONL_RECORDS = [
    {"title": "Zanzibar", "text": "Zanzibar is an archipelago off Tanzania, famous for cloves and nutmeg."},
    {"title": "Quokka", "text": "The quokka is a small marsupial that lives on Rottnest Island near Perth."},
    {"title": "Marie Curie", "text": "Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911."},
]
N_DOCUMENTS = len(TEXT_FILES) + len(JSONL_RECORDS)


def small_corpus(tmp_path: Path, name: str = "corpus") -> Path:
    """A directory with three .txt files and one .jsonl of three records (6 documents)."""
    root = tmp_path / name
    root.mkdir(parents=True, exist_ok=True)
    for file, text in TEXT_FILES.items():
        (root / file).write_text(text + "\n", encoding="utf-8")
    with open(root / "facts.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in JSONL_RECORDS)
    return root


def long_text(topic: str, sentences: int = 40) -> str:
    """A document long enough to make several chunks at small chunk sizes."""
    return " ".join(f"Sentence {i} about {topic} tells fact number {i} of the {topic} story." for i in range(sentences))


# -- settings and stacks ------------------------------------------------------


def make_settings(root: Path | None = None, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Settings from ``root/unirag.yaml`` and dotted overrides (``chunking__size=64``); never the real env."""
    flags = {key.replace("__", "."): value for key, value in overrides.items()}
    return load_settings(root, flags, env=dict(env or {}))


def fake_stack(settings: Settings, workspace: Any, chat: Any = None, embedder: Any = None,
               reranker: Any = None) -> ModelStack:
    return build_stack(settings, workspace.cache(), chat=chat or ScriptedChat(), embedder=embedder or HashEmbedder(),
                       reranker=reranker)


def overlap_score(query: str, document: str) -> float:
    """Share of the query's words that the document holds (what the test rerankers score by)."""
    words = set(re.findall(r"\w+", query.lower()))
    return len(words & set(re.findall(r"\w+", document.lower()))) / max(1, len(words))


class OverlapReranker:
    """A deterministic cross-encoder double: scores by :func:`overlap_score`, one call per rerank."""

    name = "overlap-reranker"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], int]] = []

    def rerank(self, query: str, documents: list[str], top_n: int) -> RerankScores:
        self.calls.append((query, list(documents), top_n))
        return RerankScores(tuple(overlap_score(query, document) for document in documents), calls=1)
