"""Question conversion (survey §6.2-6.3): turn the question into what operators use.

* ``embedding``: the question's vector (every VDB operator);
* ``entities``: the named entities of the question (HippoRAG, ToG, DALK: the
  input of ``node.link``), by the LLM, falling back to its capitalised phrases;
* ``keywords``: LightRAG's low-level keywords (-> entities) and high-level
  keywords (-> relationships), by the LLM, falling back to the question's
  content words (low) and the question itself (high);
* ``entities_nlp`` / ``keywords_nlp``: the same two without any model call, read
  by spaCy as the nlp extractor reads passages (:meth:`NlpExtractor.read_question`).

A reply that cannot be read never fails the query: the fallback is used.

Which of the two paths runs is :func:`question_path`: a spec asks for ``entities``
or ``keywords``; ``retrieval.question_path`` (auto: the LLM only when a real chat
endpoint is configured, never the embedded SmolLM2) may answer with the ``*_nlp``
twin, and the query result says which conversions ran.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, Any

from unirag.config import Settings
from unirag.errors import QuestionError, UniragError
from unirag.graph.extract_nlp import NlpExtractor
from unirag.operators.context import QueryState
from unirag.operators.spec import ConversionSpec
from unirag.text.clean import REPLACEMENT, replace_unencodable
from unirag.text.replies import first_object, repair_json
from unirag.text.tokenizer import get_tokenizer

if TYPE_CHECKING:
    from unirag.graph.extract_nlp import QuestionTerms

_CAPITALISED = re.compile(r"\b[A-Z][\w'’.-]*(?:(?:\s+(?:of|the|de|von|van|du|la|le|del))*\s+[A-Z][\w'’.-]*)*")
_WORD = re.compile(r"[^\W_][\w'’-]*", re.UNICODE)
_MAX_ITEM_CHARS = 120
# Capitalised only because they start the question (or are function words), never entities on their own.
_QUESTION_WORDS = frozenset((
    "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is", "are", "was", "were", "do",
    "does", "did", "can", "could", "should", "would", "will", "has", "have", "had", "in", "on", "at", "of", "for",
    "from", "to", "by", "with", "the", "a", "an", "and", "or", "if", "name", "list", "give", "tell", "please",
))


def check_question(question: str, settings: Settings) -> str:
    """``question`` as it is asked (a lone surrogate replaced by U+FFFD); else a
    :class:`QuestionError` in one line.

    An empty question would be answered from arbitrary passages, and so would one of
    only control or invisible characters (NUL bytes a client sent); one far longer than
    any question (a pasted document) would crowd the context out of every prompt or
    overflow the model's window: all are refused before any retrieval. A lone surrogate
    (a terminal's undecodable byte, a JSON ``\\ud800``) cannot be hashed, cached or sent
    to a model as UTF-8, so it is replaced as in documents (:mod:`unirag.text.clean`).
    """
    if not isinstance(question, str) or not question.strip():
        raise QuestionError("the question is empty: ask something")
    question, _ = replace_unencodable(question)
    if not any(ch != REPLACEMENT and unicodedata.category(ch)[0] not in "CZ" for ch in question):
        raise QuestionError("the question has no text, only control, invisible or invalid characters "
                            "(such as NUL): ask something")
    limit = settings.retrieval.max_question_tokens
    if len(question.encode("utf-8")) <= limit:
        return question  # a BPE token is at least one byte: no need to load the tokenizer (~0.3 s cold)
    tokens = get_tokenizer(settings.chunking.encoding).count(question)
    if tokens > limit:
        raise QuestionError(f"the question is {tokens} tokens long, more than retrieval.max_question_tokens "
                            f"({limit}); shorten it or raise that setting (UNIRAG_RETRIEVAL_MAX_QUESTION_TOKENS)")
    return question


def embed_question(state: QueryState) -> None:
    """The question's embedding, for every VDB operator."""
    state.query_vector = state.models.embedder.embed([state.question], stage="query.embed").vectors[0]


def _ask(state: QueryState, prompt_name: str, stage: str, max_tokens: int) -> str:
    request = state.request(state.prompt(prompt_name), stage, max_tokens=max_tokens, json_mode=True,
                            question=state.question)
    return state.models.chat.complete(request).text


def _strings(value: Any) -> list[str]:
    """Non-empty, de-duplicated (case-insensitive) strings of a parsed list."""
    if isinstance(value, str):
        value = re.split(r"[,;\n]", value)
    if not isinstance(value, list):
        return []
    out: dict[str, str] = {}
    for item in value:
        if isinstance(item, dict):
            item = item.get("name") or item.get("entity") or item.get("keyword") or ""
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            item = str(item)
        if not isinstance(item, str):
            continue
        text = " ".join(item.split()).strip(" \"'`.,;:")
        if text and len(text) <= _MAX_ITEM_CHARS:
            out.setdefault(text.casefold(), text)
    return list(out.values())


def _parsed(reply: str) -> Any:
    """The reply's first JSON object, else its first JSON list, else None."""
    obj = first_object(reply)
    if obj is not None:
        return obj
    start = reply.find("[")
    return repair_json(reply[start:]) if start >= 0 else None


def parse_entities(reply: str) -> list[str]:
    """Entity names from ``{"entities": [...]}`` or a bare JSON list; [] when unreadable."""
    value = _parsed(reply)
    if isinstance(value, dict):
        value = next((v for k, v in value.items() if k.lower() in ("entities", "named_entities", "entity")),
                     next((v for v in value.values() if isinstance(v, list)), None))
    return _strings(value)


def capitalised_phrases(question: str) -> list[str]:
    """Runs of capitalised words of the question, minus leading question / function words."""
    found: dict[str, str] = {}
    for match in _CAPITALISED.finditer(question):
        words = match.group(0).split()
        while words and words[0].lower().strip("'’") in _QUESTION_WORDS:
            words.pop(0)
        phrase = " ".join(words).rstrip(".,'’-")
        if phrase:
            found.setdefault(phrase.casefold(), phrase)
    return list(found.values())


def content_words(question: str) -> list[str]:
    """The question's words minus English stop words, in order, de-duplicated."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    found: dict[str, str] = {}
    for word in _WORD.findall(question):
        word = re.sub(r"['’]s$", "", word).strip("'’-")  # "Egypt's" -> "Egypt"
        key = word.casefold()
        if word and key not in ENGLISH_STOP_WORDS and key not in _QUESTION_WORDS:
            found.setdefault(key, word)
    return list(found.values())


def extract_entities(state: QueryState) -> None:
    """The named entities of the question (stage ``query.entities``) into
    ``state.question_entities``; when the reply names none or cannot be read,
    the question's capitalised phrases, else the whole question."""
    entities = parse_entities(_ask(state, "question_entities", "query.entities", 200))
    question = " ".join(state.question.split())
    state.question_entities = entities or capitalised_phrases(question) or ([question] if question else [])


def parse_keywords(reply: str) -> tuple[list[str], list[str]]:
    """(low-level, high-level) keywords from ``{"low_level": [...], "high_level": [...]}``
    (LightRAG's ``low_level_keywords`` / ``high_level_keywords`` also read)."""
    value = _parsed(reply)
    if not isinstance(value, dict):
        return [], []
    low: list[str] = []
    high: list[str] = []
    for key, item in value.items():
        name = str(key).lower().replace("-", "_").replace(" ", "_")
        if name.startswith("low"):
            low = low or _strings(item)
        elif name.startswith("high"):
            high = high or _strings(item)
    return low, high


def extract_keywords(state: QueryState) -> None:
    """LightRAG's keywords (stage ``query.keywords``) into ``state.keywords_low``
    and ``state.keywords_high``; a list the reply lacks falls back to the
    question's content words (low) or the question itself (high)."""
    low, high = parse_keywords(_ask(state, "question_keywords", "query.keywords", 200))
    question = " ".join(state.question.split())
    whole = [question] if question else []
    state.keywords_low = low or content_words(question) or whole
    state.keywords_high = high or whole


def question_terms(state: QueryState) -> QuestionTerms | None:
    """The question read by the nlp extractor's spaCy model (loaded once per process);
    None, with a warning on the result, when spaCy or its model is not installed."""
    reader = state.resources.derived("question_reader", QuestionReader)
    try:
        return reader.read(state.question)
    except UniragError as exc:
        state.warn(f"question read without spaCy ({exc}); capitalised phrases used instead")
        return None


def extract_entities_nlp(state: QueryState) -> None:
    """The question's entities without a model call (HippoRAG's query NER, §3.2): the names
    the nlp extractor would make nodes of; else its noun phrases, its capitalised
    phrases, the whole question. Same names as the graph's, so ``node.link`` finds them."""
    terms = question_terms(state)
    question = " ".join(state.question.split())
    found = (terms.entities or terms.phrases) if terms else []
    state.question_entities = found or capitalised_phrases(question) or ([question] if question else [])


def extract_keywords_nlp(state: QueryState) -> None:
    """LightRAG's two keyword levels without a model call.

    LightRAG (Guo et al. 2024, §3.2) matches *low-level* keywords against entities
    ("specific entities, details") and *high-level* keywords against relationships
    ("overarching concepts or themes"); its keyword prompt's example gives named things
    and concrete details as low-level, and the question's general noun phrases
    ("international trade", "global economic stability") as high-level. So: low = the
    question's entities (NER + proper-noun chunks, the extractor's names), high = its
    common-noun phrases (head + modifiers). Fallbacks as for the LLM path: content
    words (low), the question itself (high); a question without names uses its noun
    phrases for both levels."""
    terms = question_terms(state)
    question = " ".join(state.question.split())
    whole = [question] if question else []
    entities = terms.entities if terms else capitalised_phrases(question)
    phrases = terms.phrases if terms else []
    state.keywords_low = entities or phrases or content_words(question) or whole
    state.keywords_high = phrases or whole


class QuestionReader:
    """One spaCy pipeline per process for questions, used by one thread at a time
    (a served process answers queries concurrently)."""

    def __init__(self) -> None:
        import threading

        self._extractor = NlpExtractor()
        self._lock = threading.Lock()

    def read(self, question: str) -> QuestionTerms:
        with self._lock:
            return self._extractor.read_question(question)


LLM_CONVERSIONS = {"entities": "entities_nlp", "keywords": "keywords_nlp"}
"""Each conversion that asks the chat model, and its zero-LLM twin."""


def real_chat(settings: Settings) -> bool:
    """Whether a real chat endpoint is configured (the resolved provider is ``openai``): the
    embedded SmolLM2-135M proves the pipeline but cannot judge entities or facts."""
    return settings.chat.resolved_provider == "openai"


def question_path(settings: Settings) -> str:
    """``llm`` or ``nlp``: how ``entities``/``keywords`` are read. ``retrieval.question_path``
    decides; ``auto`` is ``llm`` only when a real chat endpoint is configured (the resolved
    chat provider is ``openai``): the embedded SmolLM2-135M names a question's entities
    worse than spaCy does."""
    chosen = settings.retrieval.question_path
    if chosen != "auto":
        return chosen
    return "llm" if real_chat(settings) else "nlp"


def conversions_to_run(requested: list[str], settings: Settings) -> list[str]:
    """The conversions a spec's ``question`` list runs under these settings: on the
    ``nlp`` path each LLM conversion becomes its ``*_nlp`` twin; a spec naming a
    twin (or ``embedding``) gets it whatever the path."""
    if question_path(settings) != "nlp":
        return list(requested)
    return list(dict.fromkeys(LLM_CONVERSIONS.get(name, name) for name in requested))


CONVERSIONS = (
    ConversionSpec("embedding", embed_question, "embed the question with the index's embedding model"),
    ConversionSpec("entities", extract_entities, "the named entities of the question (LLM; HippoRAG, ToG, DALK)"),
    ConversionSpec("keywords", extract_keywords, "low- and high-level keywords of the question (LLM; LightRAG)"),
    ConversionSpec("entities_nlp", extract_entities_nlp,
                   "the entities of the question by spaCy, named as the nlp extractor names nodes (zero-LLM)",
                   provides="entities"),
    ConversionSpec("keywords_nlp", extract_keywords_nlp,
                   "LightRAG's low-level (entities) and high-level (noun phrases) keywords by spaCy (zero-LLM)",
                   provides="keywords"),
)
