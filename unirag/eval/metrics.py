"""Answer- and retrieval-level evaluation metrics, as pure functions.

Every metric takes the model output (``prediction``) and the gold data of one
question and returns a float in [0, 1] (``evidence_recall`` may return None);
averaging over questions is the caller's job.  Definitions follow the papers
this project reproduces, and each docstring says exactly which reading was
chosen where a paper is vague:

* Accuracy / recall for specific QA: ArchRAG (Wang et al. 2025) appendix "Metrics",
  the survey (Zhou et al. 2025) §7.1 and appendix A.4.  Both papers choose
  "gold answer contained in the generation" over exact match because LLM
  output wording is uncontrollable, following Schick et al. 2024, Mallen et
  al. 2022 and Asai et al. 2023 (Self-RAG).
* EM and F1: the SQuAD v1.1 evaluation script (normalisation, token F1,
  max over the gold aliases).
* ALCE / ASQA string metrics: Gao et al. 2023 (ALCE) and the survey's Table 5
  names STRREC, STREM and STRHIT (see :func:`str_rec`).
* BLEU-1, METEOR and ROUGE-L F1: the NarrativeQA metrics ArchRAG reports,
  computed with nltk and rouge-score, offline.
* Multiple-choice accuracy for QuALITY: the chosen option is parsed from the
  free-form output (:func:`parse_choice`).
* Retrieval level (issue 6): gold-evidence recall among the provenance of the
  retrieved items, grounded recall (gold passages whose own text is in the
  context, :func:`grounded_recall`), whether a gold answer appears in the
  context, and the context size in tokens.

Nothing here downloads anything: METEOR reads WordNet from the Debian
``wordnet-base`` files when they exist and otherwise falls back to exact and
Porter-stem matching (see :func:`meteor`, :func:`meteor_uses_wordnet`).
"""

from __future__ import annotations

import io
import re
import string
import threading
import unicodedata
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from unirag.errors import import_optional

if TYPE_CHECKING:
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

YesNoRule = Literal["archrag", "hotpotqa", "none"]

#: Where Debian's ``wordnet-base`` package puts the WordNet 3.0 database.
DEFAULT_WORDNET_DIR = Path("/usr/share/wordnet")

#: Question kinds understood by :func:`score_answer`.
QUESTION_KINDS: tuple[str, ...] = ("short", "long", "asqa", "multiple_choice", "abstract")

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = frozenset(string.punctuation)
_WORD = re.compile(r"\w+")


# --------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------


def _is_punct(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 answer normalisation.

    In the SQuAD script's order: lowercase; delete punctuation (characters
    are removed, not replaced by a space, so ``"U.S."`` becomes ``"us"``);
    replace the whole words ``a``/``an``/``the`` by a space; collapse runs of
    whitespace and strip.  One deliberate extension: besides ASCII
    ``string.punctuation`` we also delete Unicode punctuation (categories P*,
    e.g. curly quotes and dashes), because small models often emit
    ``Arthur’s`` for a gold ``Arthur's``.  Strings with only ASCII
    punctuation normalise exactly as in SQuAD.
    """
    text = text.lower()
    text = "".join(ch for ch in text if not _is_punct(ch))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _usable(answers: Sequence[str]) -> list[str]:
    """Normalised gold strings, dropping those that normalise to nothing.

    An empty gold string would be a substring of every output, so it is
    ignored rather than allowed to score 1.
    """
    out = []
    for answer in answers:
        norm = normalize_answer(answer)
        if norm:
            out.append(norm)
    return out


# --------------------------------------------------------------------------
# Specific QA: accuracy, recall, EM, F1
# --------------------------------------------------------------------------


def accuracy(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if any normalised gold answer or alias is a substring of the
    normalised prediction, else 0.0.

    ArchRAG appendix "Metrics" and survey A.4: "whether the gold answers are
    included in the model's generations rather than strictly requiring an
    exact match".  Containment is a plain substring test on the normalised
    strings (as in Self-RAG's and the survey authors' public evaluation
    code), so a gold ``"1"`` is found in ``"1990"``.  Gold strings that
    normalise to "" are ignored; with no usable gold the score is 0.0.
    """
    pred = normalize_answer(prediction)
    return 1.0 if any(gold in pred for gold in _usable(answers)) else 0.0


def _has_yes_no_token(normalised: str) -> bool:
    return not {"yes", "no"}.isdisjoint(normalised.split())


def _hotpotqa_zero(pred: str, gold: str) -> bool:
    special = ("yes", "no", "noanswer")
    return (pred in special or gold in special) and pred != gold


def token_recall(
    prediction: str, answers: Sequence[str], *, yes_no_rule: YesNoRule = "archrag"
) -> float:
    """Token recall of the gold answer in the prediction, max over aliases.

    For one gold alias: ``|gold ∩ pred| / |gold|`` over the whitespace tokens
    of the normalised strings, with multiset counting (a gold token that
    occurs twice must occur twice in the prediction to count twice).  The
    score is the maximum over the usable aliases (0.0 if none).

    ``yes_no_rule`` (default ``"archrag"``) implements ArchRAG's appendix
    sentence "if the golden answer or the generated output contains 'yes' or
    'no', the recall for that question is set to 0", read literally:

    * "contains" is a whole-word test on the normalised text (the token
      ``yes`` or ``no``), not a substring test (which would zero every
      output containing "know", "not" or "November");
    * "the golden answer" is every gold string passed in (answer and
      aliases), so a gold ``"No Doubt"`` also scores 0;
    * the rule holds whether or not the output is right: a yes/no question
      always scores recall 0, which is why the paper notes recall is "not
      perfectly correlated with accuracy".

    ``"hotpotqa"`` is the rule of the official HotpotQA F1 script (also used
    by HippoRAG and by the survey authors' public code, which ArchRAG cites
    for the rule): per alias, the score is 0 when the whole normalised
    prediction or gold is ``yes``/``no``/``noanswer`` and the two differ.
    ``"none"`` disables any rule.
    """
    pred = normalize_answer(prediction)
    golds = _usable(answers)
    if not golds:
        return 0.0
    if yes_no_rule == "archrag":
        if _has_yes_no_token(pred) or any(_has_yes_no_token(g) for g in golds):
            return 0.0
    elif yes_no_rule not in ("hotpotqa", "none"):
        raise ValueError(f"unknown yes_no_rule {yes_no_rule!r}")
    pred_counts = Counter(pred.split())
    best = 0.0
    for gold in golds:
        if yes_no_rule == "hotpotqa" and _hotpotqa_zero(pred, gold):
            continue
        gold_counts = Counter(gold.split())
        common = sum((gold_counts & pred_counts).values())
        best = max(best, common / sum(gold_counts.values()))
    return best


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """SQuAD exact match: 1.0 if the normalised prediction equals any
    normalised gold alias, else 0.0 (0.0 when no gold is usable)."""
    pred = normalize_answer(prediction)
    return 1.0 if pred in _usable(answers) else 0.0


def f1(prediction: str, answers: Sequence[str]) -> float:
    """SQuAD token F1, max over the gold aliases.

    Precision ``c/|pred|`` and recall ``c/|gold|`` where ``c`` is the
    multiset overlap of the normalised whitespace tokens; F1 is their
    harmonic mean (0.0 when ``c`` is 0, for an empty prediction, or when no
    gold is usable).  No yes/no rule: this is SQuAD's F1, not HotpotQA's.
    """
    pred_tokens = normalize_answer(prediction).split()
    if not pred_tokens:
        return 0.0
    pred_counts = Counter(pred_tokens)
    best = 0.0
    for gold in _usable(answers):
        gold_tokens = gold.split()
        common = sum((Counter(gold_tokens) & pred_counts).values())
        if common == 0:
            continue
        precision = common / len(pred_tokens)
        recall = common / len(gold_tokens)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


# --------------------------------------------------------------------------
# ALCE (ASQA) string metrics
# --------------------------------------------------------------------------


def _set_hits(prediction: str, qa_pairs: Sequence[Sequence[str]]) -> list[bool]:
    """For each short-answer set with at least one usable alias: whether any
    alias is a substring of the normalised prediction (ALCE's
    ``exact_presence``).  Sets with no usable alias are left out."""
    pred = normalize_answer(prediction)
    hits = []
    for aliases in qa_pairs:
        golds = _usable(aliases)
        if golds:
            hits.append(any(gold in pred for gold in golds))
    return hits


def str_rec(prediction: str, qa_pairs: Sequence[Sequence[str]]) -> float:
    """String recall (survey STRREC): the fraction of ASQA short-answer sets
    (``qa_pairs``; one set of aliases per disambiguated sub-question) with at
    least one alias contained in the normalised output.

    This is the metric ALCE (Gao et al. 2023, §3 "Correctness", ASQA) calls
    STR-EM / "exact match recall": "whether the short answers are exact
    substrings of the generation".  The survey (Zhou et al. 2025, §7.1, citing ALCE
    [17]) reports three string metrics, STRREC, STREM and STRHIT, without
    defining them; in all but one row of its Tables 5 and 12 they satisfy
    STRHIT >= STRREC >= STREM, which fixes the reading used here:
    STRREC = ALCE's STR-EM (this fraction), STREM = all sets matched (the
    value ALCE's code returns as "STR-EM-HIT", :func:`str_em`), STRHIT = at
    least one set matched (:func:`str_hit`).

    Sets whose aliases all normalise to "" are ignored (ALCE's code would
    count them as matched); with no usable set the score is 0.0, as in
    ALCE's code for an item without ``qa_pairs``.
    """
    hits = _set_hits(prediction, qa_pairs)
    return sum(hits) / len(hits) if hits else 0.0


def str_em(prediction: str, qa_pairs: Sequence[Sequence[str]]) -> float:
    """String exact match (survey STREM): 1.0 if every usable short-answer
    set has an alias in the normalised output, else 0.0.

    Equals ALCE's per-item "STR-EM-HIT" (``int(mean(set hits) == 1)`` in the
    ALCE and survey-authors' code).  Note the naming: ALCE's own "STR-EM" is
    the *fraction* of sets matched, which is :func:`str_rec` here.
    See :func:`str_rec` for why the survey's names map this way.
    """
    hits = _set_hits(prediction, qa_pairs)
    return 1.0 if hits and all(hits) else 0.0


def str_hit(prediction: str, qa_pairs: Sequence[Sequence[str]]) -> float:
    """String hit (survey STRHIT): 1.0 if at least one usable short-answer
    set has an alias in the normalised output, else 0.0.

    See :func:`str_rec` for the reading of the survey's metric names.
    """
    return 1.0 if any(_set_hits(prediction, qa_pairs)) else 0.0


# --------------------------------------------------------------------------
# NarrativeQA metrics: BLEU-1, METEOR, ROUGE-L
# --------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    """Lowercased ``\\w+`` tokens; punctuation is dropped (as the PTB
    tokenizer of the coco-caption tooling behind NarrativeQA's official
    metrics does).  No punkt model is needed."""
    return _WORD.findall(text.lower())


def bleu1(prediction: str, references: Sequence[str]) -> float:
    """Sentence BLEU-1, max over the references.

    Per reference: nltk ``sentence_bleu`` with ``weights=(1.0,)``, i.e.
    ``BP * p1`` where ``p1`` is the clipped unigram precision of the
    prediction's tokens and ``BP = exp(1 - r/c)`` when the prediction
    (``c`` tokens) is shorter than the reference (``r`` tokens), else 1.
    No smoothing: BLEU-1 is only 0 when no unigram matches, where 0 is the
    right value.  Scoring each reference alone and taking the max (rather
    than nltk's multi-reference clipping) follows the survey authors'
    evaluation code (``metric_max_over_ground_truths``).  Tokens: see
    ``_words``.  Empty prediction or no non-empty reference: 0.0.
    """
    sentence_bleu = import_optional("nltk.translate.bleu_score", "eval", "BLEU").sentence_bleu
    hyp = _words(prediction)
    refs = [r for r in (_words(ref) for ref in references) if r]
    if not hyp or not refs:
        return 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return max(float(sentence_bleu([ref], hyp, weights=(1.0,))) for ref in refs)


@lru_cache(maxsize=1)
def _rouge_l_scorer() -> Any:
    rouge_scorer = import_optional("rouge_score.rouge_scorer", "eval", "ROUGE-L")
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, references: Sequence[str]) -> float:
    """ROUGE-L F-measure (rouge-score package), max over the references.

    rouge-score lowercases, splits on non-alphanumerics and Porter-stems
    tokens longer than 3 characters (``use_stemmer=True``); ROUGE-L is the
    longest common subsequence ``L`` with ``P = L/|pred|``, ``R = L/|ref|``,
    ``F = 2PR/(P+R)``.  Empty prediction or references: 0.0.
    """
    if not prediction.strip():
        return 0.0
    scorer = _rouge_l_scorer()
    best = 0.0
    for ref in references:
        if ref.strip():
            best = max(best, float(scorer.score(ref, prediction)["rougeL"].fmeasure))
    return best


# WordNet 3.0 lexicographer files in file-number order (lexnames(5WN)).
_LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal",
    "noun.artifact", "noun.attribute", "noun.body", "noun.cognition",
    "noun.communication", "noun.event", "noun.feeling", "noun.food", "noun.group",
    "noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon",
    "noun.plant", "noun.possession", "noun.process", "noun.quantity", "noun.relation",
    "noun.shape", "noun.state", "noun.substance", "noun.time", "verb.body",
    "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather",
    "adj.ppl",
)
_LEX_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


class _LockedWordNet:
    """The one method nltk's METEOR uses (``synsets``), serialised by a lock:
    the reader seeks and reads shared file handles, so concurrent calls from
    an evaluation thread pool would interleave reads."""

    def __init__(self, reader: WordNetCorpusReader) -> None:
        self._reader = reader
        self._lock = threading.Lock()

    def synsets(self, lemma: str, *args: Any, **kwargs: Any) -> list[Any]:
        with self._lock:
            return self._reader.synsets(lemma, *args, **kwargs)


class _NoWordNet:
    """Stand-in with no synonyms: METEOR then matches exact words and Porter
    stems only."""

    def synsets(self, lemma: str, *args: Any, **kwargs: Any) -> list[Any]:
        return []


@lru_cache(maxsize=4)
def _load_wordnet(directory: str) -> _LockedWordNet | None:
    """Open a WordNet 3.0 database directory (Debian ``wordnet-base`` layout)
    with nltk, without nltk's downloader; None when it cannot be read.

    Debian ships no ``lexnames`` file, which nltk's reader requires; it is
    the fixed WordNet 3.0 table of the 45 lexicographer files (lexnames(5WN))
    and is served from memory.  nltk 3.10 refuses to read outside its data
    path, so the directory is on ``nltk.data.path`` only while the reader is
    built and its four data files are opened (they then stay open).
    """
    root = Path(directory)
    if not (root / "index.noun").is_file() or not (root / "data.noun").is_file():
        return None
    nltk_data = import_optional("nltk.data", "eval", "METEOR")
    WordNetCorpusReader = import_optional("nltk.corpus.reader.wordnet", "eval", "METEOR").WordNetCorpusReader

    lexnames = "".join(
        f"{i:02d}\t{name}\t{_LEX_CATEGORY[name.split('.')[0]]}\n"
        for i, name in enumerate(_LEXNAMES)
    )

    class _DebianWordNet(WordNetCorpusReader):  # type: ignore[misc]
        def open(self, file: str) -> Any:
            if file == "lexnames":
                return io.StringIO(lexnames)
            return super().open(file)

        def map_wn(self, version: str = "wordnet") -> None:
            # Only the multilingual (OMW) functions use this mapping, and it
            # would load nltk's downloaded "wordnet" corpus.
            return None

    entry = str(root)
    nltk_data.path.append(entry)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader = _DebianWordNet(entry, None)
            for pos in ("n", "v", "a", "r"):
                reader._data_file(pos)
    except (OSError, LookupError, ValueError, PermissionError, AssertionError):
        return None
    finally:
        nltk_data.path.remove(entry)
    return _LockedWordNet(reader)


def meteor_uses_wordnet(wordnet_dir: str | Path = DEFAULT_WORDNET_DIR) -> bool:
    """Whether :func:`meteor` with this ``wordnet_dir`` matches WordNet
    synonyms (True) or falls back to exact + Porter-stem matching (False).
    Loads WordNet on first call (about 2 s); cached afterwards."""
    return _load_wordnet(str(wordnet_dir)) is not None


def meteor(
    prediction: str,
    references: Sequence[str],
    *,
    wordnet_dir: str | Path = DEFAULT_WORDNET_DIR,
) -> float:
    """METEOR (nltk ``meteor_score``), max over the references.

    nltk's METEOR 1.0 (Lavie & Agarwal 2007) with its defaults alpha=0.9,
    beta=3, gamma=0.5: words are aligned in three stages (exact, Porter stem,
    WordNet synonym); with ``m`` matches, ``P = m/|pred|``, ``R = m/|ref|``,
    ``Fmean = P*R / (alpha*P + (1-alpha)*R)`` (= 10PR/(R+9P)), penalty
    ``gamma * (chunks/m)**beta`` and score ``Fmean * (1 - penalty)``.
    nltk runs the synonym stage on the Porter stems left over by the stem
    stage, so a synonym pair matches only when stemming leaves both words
    intact (``car``/``auto`` match; ``film``/``movie`` do not, ``movie``
    having become ``movi``); we keep the library's behaviour as is.

    WordNet is read from ``wordnet_dir`` (Debian ``wordnet-base``); if it is
    missing or unreadable, the synonym stage matches nothing, i.e. METEOR
    with exact + stem matching only, and :func:`meteor_uses_wordnet` returns
    False so reports can say which variant produced the numbers.  Tokens:
    lowercased ``\\w+`` words.  Empty prediction or references: 0.0.
    """
    meteor_score = import_optional("nltk.translate.meteor_score", "eval", "METEOR").meteor_score

    hyp = _words(prediction)
    refs = [r for r in (_words(ref) for ref in references) if r]
    if not hyp or not refs:
        return 0.0
    wordnet: Any = _load_wordnet(str(wordnet_dir)) or _NoWordNet()
    return max(float(meteor_score([ref], hyp, wordnet=wordnet)) for ref in refs)


# --------------------------------------------------------------------------
# Multiple choice (QuALITY)
# --------------------------------------------------------------------------

_ANSWER_MARK = re.compile(
    r"\banswer\b(?:\s+(?:is|would\s+be|should\s+be|=))?\s*[:=\-]?\s*(?:\*\*)?\s*"
    r"(?P<open>[\(\[])?\s*(?P<tok>[A-Za-z]|\d{1,2})(?![A-Za-z0-9])\s*(?P<close>[\)\]])?",
    re.IGNORECASE,
)
_OPTION_MARK = re.compile(
    r"\b(?:option|choice)\s*(?:number\s*|no\.?\s*)?[:#]?\s*[\(\[]?\s*"
    r"(?P<tok>[A-Za-z]|\d{1,2})(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_BRACKETED = re.compile(r"[\(\[]\s*(?P<tok>[A-Za-z])\s*[\)\]]")
_IS_LETTER = re.compile(r"\bis\s*[:\-]?\s*\(?(?P<tok>[A-Z])\)?(?=\s*(?:$|[.,;:!)\n]))")
_LEADING = re.compile(r"^\s*(?:\*\*)?\s*(?P<tok>[A-Za-z]|\d{1,2})\s*[\)\.:](?!\d)")


def _token_index(tok: str, n: int) -> int | None:
    if tok.isdigit():
        k = int(tok)
        return k - 1 if 1 <= k <= n else None
    k = ord(tok.upper()) - ord("A")
    return k if 0 <= k < n else None


def _answer_marked(text: str, n: int) -> int | None:
    for match in _ANSWER_MARK.finditer(text):
        tok = match["tok"]
        rest = text[match.end() :].lstrip()
        bracketed = bool(match["open"] or match["close"])
        ends = not rest or rest[0] in ".,;:)\n"
        # "answer is a dog", "answer: 2 hours": not option labels.
        if (tok.isdigit() or tok.islower()) and not (bracketed or ends):
            continue
        idx = _token_index(tok, n)
        if idx is not None:
            return idx
    return None


def _text_match(text: str, choices: Sequence[str]) -> int | None:
    out = f" {normalize_answer(text)} "
    norms = [normalize_answer(c) for c in choices]
    found = [i for i, c in enumerate(norms) if c and f" {c} " in out]
    # Keep the most specific: drop a choice contained in another found one.
    found = [i for i in found if not any(j != i and norms[i] in norms[j] for j in found)]
    distinct = {norms[i] for i in found}
    return found[0] if len(distinct) == 1 else None


def parse_choice(prediction: str, choices: Sequence[str]) -> int | None:
    """The 0-based option a free-form output picks, or None if unclear.

    Tried in order, first hit wins (labels are ``A``.. for the options, or
    1-based numbers):

    1. the whole output equals an option's text (normalised);
    2. the whole output is a label, e.g. ``"B"``, ``"(c)"``, ``"2."``;
    3. an answer marker: ``"Answer: C"``, ``"the answer is (b)"``,
       ``"The correct answer is B because"``; a lowercase letter or a number
       counts only when bracketed or followed by punctuation/end, so
       ``"the answer is a dog"`` is not option A;
    4. ``"option B"``, ``"choice 3"``;
    5. a bracketed letter anywhere: ``"(D)"``, ``"[a]"``;
    6. ``"is B"`` closing a clause (capital letter, then punctuation or end),
       e.g. ``"The answer to this question is B."``;
    7. a leading label: ``"C) 12 years"``, ``"b. ..."``, ``"2: ..."``;
    8. exactly one option's text appears (whole words, normalised) in the
       output, options contained in another found option ignored.
    """
    n = len(choices)
    text = prediction.strip()
    if not text or n == 0:
        return None
    norm = normalize_answer(text)
    for i, choice in enumerate(choices):
        if norm and norm == normalize_answer(choice):
            return i
    core = text.strip(" \t\r\n()[]{}.,:;*\"'`")
    if (len(core) == 1 and core.isalpha()) or core.isdigit():
        idx = _token_index(core, n)
        if idx is not None:
            return idx
    idx = _answer_marked(text, n)
    if idx is not None:
        return idx
    for pattern in (_OPTION_MARK, _BRACKETED, _IS_LETTER):
        for match in pattern.finditer(text):
            idx = _token_index(match["tok"], n)
            if idx is not None:
                return idx
    match = _LEADING.match(text)
    if match:
        idx = _token_index(match["tok"], n)
        if idx is not None:
            return idx
    return _text_match(text, choices)


def multiple_choice_accuracy(prediction: str, choices: Sequence[str], gold_index: int) -> float:
    """1.0 if :func:`parse_choice` finds the gold option (0-based
    ``gold_index``) in the output, else 0.0 (also when no option can be
    parsed).  The survey authors' code asks an LLM to extract the option
    letter; a deterministic parser keeps evaluation free and reproducible."""
    if not 0 <= gold_index < len(choices):
        raise ValueError(f"gold_index {gold_index} outside the {len(choices)} choices")
    return 1.0 if parse_choice(prediction, choices) == gold_index else 0.0


# --------------------------------------------------------------------------
# Retrieval level
# --------------------------------------------------------------------------


def evidence_recall(retrieved_sources: Sequence[str], gold_evidence: Sequence[str]) -> float | None:
    """Fraction of the distinct gold supporting passages found among the
    provenance of the retrieved items.

    Both sides are passage titles or ids, compared after
    :func:`normalize_answer` (so case, punctuation and articles do not
    matter); duplicates on either side count once.  The caller maps each
    retrieved item (chunk, entity, relation, community) to the passages it
    came from.  None when there is no usable gold evidence (the question
    then does not enter the mean).
    """
    gold = set(_usable(gold_evidence))
    if not gold:
        return None
    found = {normalize_answer(s) for s in retrieved_sources}
    return len(gold & found) / len(gold)


#: Word n-gram length of :func:`grounded_recall`'s matching; also the shortest sentence it counts.
GROUNDING_NGRAM = 4
#: Share of a sentence's words that context n-grams must cover for the sentence to be present.
SENTENCE_COVERAGE = 0.8
#: Share of a gold passage's sentences that must be present for the passage to be grounded.
PASSAGE_SHARE = 0.5

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _word_tokens(text: str) -> list[str]:
    """Lowercased ``\\w+`` words: punctuation and whitespace, which loaders and chunkers may
    alter, never decide whether text is present."""
    return _WORD.findall(text.lower())


def _ngrams(words: Sequence[str], n: int = GROUNDING_NGRAM) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def passage_sentences(passage: str) -> list[list[str]]:
    """The sentences of a passage as word lists, those shorter than :data:`GROUNDING_NGRAM`
    words left out; a passage with no such sentence (a title-like stub) is one unit whole.

    Sentences end at ``.``, ``!`` or ``?`` followed by whitespace. A wrong split (after
    "Dr.") only makes shorter pieces of the same text, and each piece is still present
    exactly where the passage is, so the rule needs no language-aware splitter.
    """
    sentences = [words for part in _SENTENCE_END.split(passage)
                 if len(words := _word_tokens(part)) >= GROUNDING_NGRAM]
    if sentences:
        return sentences
    words = _word_tokens(passage)
    return [words] if words else []


def context_index(context_text: str, stubs: bool = True) -> tuple[set[tuple[str, ...]], frozenset[str]]:
    """The context's word :data:`GROUNDING_NGRAM`-grams and its words; with ``stubs`` also
    its 2- and 3-grams, which only stub passages (no sentence of 4 words) need."""
    words = _word_tokens(context_text)
    grams = _ngrams(words)
    for n in range(2, GROUNDING_NGRAM) if stubs else ():
        grams |= _ngrams(words, n)
    return grams, frozenset(words)


def sentence_coverage(sentence: Sequence[str], context_ngrams: set[tuple[str, ...]],
                      context_words: frozenset[str] = frozenset()) -> float:
    """Share of ``sentence``'s words covered by one of its word 4-grams that also occurs in
    the context. A unit shorter than 4 words (only a stub passage has one) must be found
    whole: as a word, or as a run of 2 or 3 words."""
    n = GROUNDING_NGRAM
    if not sentence:
        return 0.0
    if len(sentence) < n:
        whole = sentence[0] in context_words if len(sentence) == 1 else tuple(sentence) in context_ngrams
        return 1.0 if whole else 0.0
    covered = [False] * len(sentence)
    for i in range(len(sentence) - n + 1):
        if tuple(sentence[i:i + n]) in context_ngrams:
            covered[i:i + n] = [True] * n
    return sum(covered) / len(sentence)


def _grounded(sentences: list[list[str]], index: tuple[set[tuple[str, ...]], frozenset[str]]) -> bool:
    grams, words = index
    present = sum(sentence_coverage(s, grams, words) >= SENTENCE_COVERAGE for s in sentences)
    return bool(sentences) and present >= PASSAGE_SHARE * len(sentences)


def passage_grounded(passage: str, context_text: str) -> bool:
    """Whether a gold passage's own text is in the context (the rule of :func:`grounded_recall`)."""
    return _grounded(passage_sentences(passage), context_index(context_text))


def grounded_recall(context_text: str, gold_passages: Sequence[str]) -> float | None:
    """Fraction of the distinct gold passages whose **text** is in the context; None when
    no gold passage text is known (the question does not enter the mean).

    :func:`evidence_recall` credits a passage as soon as an item of the context came
    from it: an entity or relationship brings every passage it was extracted from,
    though the reader sees only a name and a description. Here the context text must
    hold the passage itself. The rule, and why:

    * **Words, not characters.** Context and passage become lowercased ``\\w+`` words, so
      punctuation, whitespace and case (which loaders, chunkers and joiners change) do not
      matter, and the words do.
    * **Sentences.** The passage is split into sentences (:func:`passage_sentences`);
      sentences under 4 words ("Born 1867.") are ignored: too short to tell quotation
      from coincidence. A stub passage with no longer sentence is one unit.
    * **A sentence is present** when word 4-grams that occur in the context cover at least
      80 % of its words (:func:`sentence_coverage`). A verbatim sentence is covered fully.
      A sentence that a chunk boundary cut, its two halves anywhere in the context (chunks
      come in the method's order, not the document's), is covered fully when each half
      has 4 words or more; a half of 1-3 words matches no 4-gram, and the 20 % allowance
      lets a long sentence (15 words or more) count without that seam fragment. Four
      words in a row is the shortest run that a paraphrase (an entity description) rarely
      repeats by chance, while single common words ("the", "was", "born") are everywhere:
      a bag-of-words overlap would credit any long context.
    * **A passage is grounded** when at least half of its sentences are present: the
      reader then has most of what the passage says, and an entity item quoting one
      sentence of a three-sentence passage does not count.

    The thresholds come from these arguments, not from any measurement.
    """
    texts = list(dict.fromkeys(p for p in gold_passages if p and p.strip()))
    units = [s for s in (passage_sentences(p) for p in texts) if s]
    if not units:
        return None
    index = context_index(context_text, stubs=any(len(s) < GROUNDING_NGRAM for u in units for s in u))
    return sum(_grounded(sentences, index) for sentences in units) / len(units)


def answer_in_context(context_text: str, answers: Sequence[str]) -> float:
    """1.0 if any normalised gold answer or alias is a substring of the
    normalised retrieved context (the :func:`accuracy` test applied to the
    context instead of the output), else 0.0."""
    return accuracy(context_text, answers)


def context_tokens(context_text: str, count_tokens: Callable[[str], int]) -> int:
    """Size of the retrieved context in tokens, as counted by
    ``count_tokens`` (e.g. ``get_tokenizer().count``); 0 for empty text."""
    return int(count_tokens(context_text)) if context_text else 0


# --------------------------------------------------------------------------
# Convenience
# --------------------------------------------------------------------------


def score_answer(
    question_kind: str,
    prediction: str,
    answers: Sequence[str],
    *,
    qa_pairs: Sequence[Sequence[str]] | None = None,
    choices: Sequence[str] | None = None,
    gold_index: int | None = None,
    yes_no_rule: YesNoRule = "archrag",
    wordnet_dir: str | Path = DEFAULT_WORDNET_DIR,
) -> dict[str, float]:
    """The metrics the papers report for one question of a given kind.

    * ``"short"`` (HotpotQA, MuSiQue, 2Wiki, MultiHop-RAG, PopQA):
      ``accuracy``, ``recall`` (:func:`token_recall`), ``em``, ``f1``;
    * ``"long"`` (NarrativeQA; ``answers`` are the reference answers):
      ``bleu1``, ``meteor``, ``rouge_l``;
    * ``"asqa"`` (ALCE; needs ``qa_pairs``): ``str_rec``, ``str_em``,
      ``str_hit``;
    * ``"multiple_choice"`` (QuALITY; needs ``choices`` and ``gold_index``):
      ``accuracy``;
    * ``"abstract"`` (no gold; judged by an LLM): ``{}``.
    """
    if question_kind == "short":
        return {
            "accuracy": accuracy(prediction, answers),
            "recall": token_recall(prediction, answers, yes_no_rule=yes_no_rule),
            "em": exact_match(prediction, answers),
            "f1": f1(prediction, answers),
        }
    if question_kind == "long":
        return {
            "bleu1": bleu1(prediction, answers),
            "meteor": meteor(prediction, answers, wordnet_dir=wordnet_dir),
            "rouge_l": rouge_l(prediction, answers),
        }
    if question_kind == "asqa":
        if qa_pairs is None:
            raise ValueError("question kind 'asqa' needs qa_pairs")
        return {
            "str_rec": str_rec(prediction, qa_pairs),
            "str_em": str_em(prediction, qa_pairs),
            "str_hit": str_hit(prediction, qa_pairs),
        }
    if question_kind == "multiple_choice":
        if choices is None or gold_index is None:
            raise ValueError("question kind 'multiple_choice' needs choices and gold_index")
        return {"accuracy": multiple_choice_accuracy(prediction, choices, gold_index)}
    if question_kind == "abstract":
        return {}
    raise ValueError(f"unknown question kind {question_kind!r}; expected one of {QUESTION_KINDS}")
