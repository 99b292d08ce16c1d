"""Abstract (global sensemaking) questions for a corpus: GraphRAG's Algorithm 1.

GraphRAG (Edge et al. 2024 §3.2, Algorithm 1) has no gold questions for sensemaking
either, so it asks an LLM, from a description of the corpus, for K personas of
potential users, N tasks per user and M questions per (user, task) that need an
understanding of the whole corpus rather than the retrieval of a fact (K = N =
M = 5: 125 questions). The survey (Zhou et al. 2025 appendix A.4, Figure 18) does the
same in a single prompt; we keep GraphRAG's three steps as separate calls, so a
small model answers three short lists instead of one 125-line document, and a
failed step loses only its own part.

The description is either a text the caller wrote or a sample of chunk texts
(:func:`sample_texts`), cut to a token budget (:func:`describe_corpus`).

Decisions: a reply that lists more items than asked is cut to the number
asked; one that lists fewer is kept as it is, never padded, and a note says
what is missing (:attr:`QuestionSet.notes`). Repeated items (same words,
ignoring case and spacing) are dropped and noted. A reply with no readable
list counts in :attr:`QuestionSet.unparsed`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from unirag.eval.judge.shared import clip, make_key, require_chat
from unirag.eval.judge.parse import parse_list
from unirag.prompts.prompt import load_prompt
from unirag.llm.base import ChatModel
from unirag.llm.batch import complete_all
from unirag.progress import Progress
from unirag.text.tokenizer import get_tokenizer

STAGE = "eval.judge.questions"
#: An excerpt of the corpus sample shorter than this says too little to be worth its place.
MIN_EXCERPT_TOKENS = 48
_EXCERPT_OVERHEAD = 8


@dataclass(frozen=True)
class GeneratedQuestion:
    """One generated question with the persona and task it was written for.

    ``id`` (``u1t2q3-<hash of the question>``) is positional and checks the
    text, so results of another generation run never join by accident.
    """

    kind: ClassVar[str] = "question"

    id: str
    user: str
    task: str
    question: str
    user_index: int
    task_index: int

    @property
    def key(self) -> str:
        return make_key("question", self.id)


@dataclass
class QuestionSet:
    """The questions plus what the model returned on the way and what fell short."""

    questions: list[GeneratedQuestion]
    users: list[str]
    tasks: list[list[str]]
    requested: tuple[int, int, int]
    notes: list[str] = field(default_factory=list)
    unparsed: int = 0

    def __len__(self) -> int:
        return len(self.questions)

    def __iter__(self) -> Iterator[GeneratedQuestion]:
        return iter(self.questions)

    @property
    def complete(self) -> bool:
        k, n, m = self.requested
        return len(self.questions) == k * n * m


def sample_texts(texts: Sequence[str], n: int, seed: int = 0) -> list[str]:
    """``n`` of ``texts`` drawn with a seeded generator, in their corpus order."""
    if n >= len(texts):
        return list(texts)
    chosen = sorted(random.Random(seed).sample(range(len(texts)), n))
    return [texts[i] for i in chosen]


def describe_corpus(corpus: str | Sequence[str], max_tokens: int = 1500, encoding: str = "cl100k_base") -> str:
    """The corpus description for the prompts: a text as it is, or numbered excerpts of
    sample texts, each cut to an equal share of ``max_tokens``; all within ``max_tokens``."""
    tokenizer = get_tokenizer(encoding)
    if isinstance(corpus, str):
        return clip(corpus.strip(), max_tokens, tokenizer)
    texts = [" ".join(t.split()) for t in corpus if t and t.strip()]
    if not texts:
        return ""
    header = "Excerpts from the dataset:"
    used = tokenizer.count(header)
    # each excerpt also carries its number, the clip mark and a newline
    share = max(MIN_EXCERPT_TOKENS, (max_tokens - used) // len(texts) - _EXCERPT_OVERHEAD)
    excerpts = []
    for number, text in enumerate(texts, start=1):
        excerpt = f"[{number}] {clip(text, share, tokenizer)}"
        cost = tokenizer.count(excerpt) + 1
        if used + cost > max_tokens:
            break
        excerpts.append(excerpt)
        used += cost
    return "\n".join([header, *excerpts])


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _is_placeholder(item: str) -> bool:
    """A small model often copies the reply format's ``<...>`` slot instead of filling it."""
    text = item.strip()
    return not text or (text.startswith("<") and text.endswith(">")) or text in ("...", "…")


def _take(items: list[str], wanted: int, what: str, notes: list[str], seen: set[str]) -> list[str]:
    """At most ``wanted`` new items (repeats of ``seen`` and copied placeholders dropped);
    notes say what was cut or missing."""
    fresh = []
    for item in items:
        if _is_placeholder(item):
            notes.append(f"dropped a placeholder copied from the prompt: {item[:80]!r}")
            continue
        if _norm(item) in seen:
            notes.append(f"dropped a repeated {what.rstrip('s')}: {item[:80]!r}")
            continue
        seen.add(_norm(item))
        fresh.append(item)
    if len(fresh) > wanted:
        notes.append(f"kept the first {wanted} of {len(fresh)} {what}")
    elif len(fresh) < wanted:
        notes.append(f"asked for {wanted} {what}, the model gave {len(fresh)}")
    return fresh[:wanted]


def _question_id(user: int, task: int, number: int, question: str) -> str:
    digest = hashlib.sha256(question.encode("utf-8")).hexdigest()[:8]
    return f"u{user + 1}t{task + 1}q{number + 1}-{digest}"


@dataclass(frozen=True)
class _Asker:
    """Sends one list-producing prompt per fill-in and reads the lists back."""

    chat: ChatModel
    concurrency: int
    progress: Progress | None
    max_tokens: int
    temperature: float

    def ask(self, prompt_name: str, fills: list[dict[str, str]], keys: tuple[str, ...],
            label: str) -> list[tuple[list[str], bool]]:
        prompt = load_prompt(prompt_name)
        requests = [prompt.request(STAGE, max_tokens=self.max_tokens, temperature=self.temperature, json_mode=True,
                                   **f) for f in fills]
        replies = complete_all(self.chat, requests, self.concurrency, self.progress, label)
        return [parse_list(reply.text, keys) for reply in replies]


def generate_questions(
    chat: ChatModel | None,
    corpus: str | Sequence[str],
    k_users: int = 5,
    n_tasks: int = 5,
    m_questions: int = 5,
    *,
    concurrency: int = 4,
    progress: Progress | None = None,
    description_tokens: int = 1500,
    max_tokens: int = 1024,
    temperature: float = 0.0,
    encoding: str = "cl100k_base",
) -> QuestionSet:
    """Up to K x N x M questions: K users, then N tasks per user, then M questions per
    (user, task), one call per list (``1 + K + K*N`` calls, stage ``eval.judge.questions``)."""
    if min(k_users, n_tasks, m_questions) < 1:
        raise ValueError("k_users, n_tasks and m_questions must all be >= 1")
    asker = _Asker(require_chat(chat, "question generation"), concurrency, progress, max_tokens, temperature)
    description = describe_corpus(corpus, description_tokens, encoding)
    result = QuestionSet([], [], [], (k_users, n_tasks, m_questions))

    [(users, ok)] = asker.ask("eval_users", [{"description": description, "k": str(k_users)}],
                              ("users", "personas"), "proposing users")
    result.unparsed += not ok
    result.users = _take(users, k_users, "users", result.notes, set())

    fills = [{"description": description, "user": u, "n": str(n_tasks)} for u in result.users]
    seen_tasks: set[str] = set()
    for user, (tasks, ok) in zip(result.users, asker.ask("eval_tasks", fills, ("tasks",), "proposing tasks")):
        result.unparsed += not ok
        result.tasks.append(_take(tasks, n_tasks, f"tasks for user {user[:40]!r}", result.notes, seen_tasks))

    pairs = [(i, j) for i, tasks in enumerate(result.tasks) for j in range(len(tasks))]
    fills = [{"description": description, "user": result.users[i], "task": result.tasks[i][j],
              "m": str(m_questions)} for i, j in pairs]
    seen: set[str] = set()
    replies = asker.ask("eval_questions", fills, ("questions",), "writing questions")
    for (i, j), (questions, ok) in zip(pairs, replies):
        result.unparsed += not ok
        kept = _take(questions, m_questions, f"questions for user {i + 1} task {j + 1}", result.notes, seen)
        result.questions += [GeneratedQuestion(_question_id(i, j, q, text), result.users[i], result.tasks[i][j],
                                               text, i, j) for q, text in enumerate(kept)]
    return result

