"""Direct generation: one prompt, the context cut to fit the model's window."""

from __future__ import annotations

from unirag.generate.plan import AnswerPlan, extract_answer  # noqa: F401 (callers import extract_answer from here)
from unirag.prompts.prompt import Prompt
from unirag.operators.context import ContextItem, QueryState
from unirag.text.tokenizer import get_tokenizer

# Room left in every request for the chat template's own tokens.
MARGIN = 64


def format_context(items: list[ContextItem], budget_tokens: int, encoding: str = "cl100k_base") -> str:
    """Numbered items, best first, truncated so the whole block fits ``budget_tokens``."""
    tokenizer = get_tokenizer(encoding)
    blocks: list[str] = []
    used = 0
    for number, item in enumerate(items, start=1):
        block = f"[{number}] ({item.kind}: {item.source})\n{item.text.strip()}"
        cost = tokenizer.count(block) + 2
        if used + cost > budget_tokens:
            remaining = budget_tokens - used
            if remaining > 32:
                blocks.append(tokenizer.truncate(block, remaining - 2))
            break
        blocks.append(block)
        used += cost
    return "\n\n".join(blocks)


def fitted_context(state: QueryState, template: Prompt, reply_tokens: int) -> str:
    """``state.items`` formatted for ``template``'s ``{context}``, cut so the prompt
    (fields ``question`` and ``context``) leaves ``reply_tokens`` of the window free."""
    settings = state.resources.settings
    tokenizer = get_tokenizer(settings.chunking.encoding)
    overhead = sum(tokenizer.count(m["content"]) for m in template.messages(question=state.question, context=""))
    budget = settings.chat.prompt_window - reply_tokens - overhead - MARGIN
    return format_context(state.items, max(budget, 0), settings.chunking.encoding)


def plan_direct(state: QueryState, prompt: str, use_context: bool = True) -> AnswerPlan:
    """The one request of direct generation: the prompt with the question and the fitted context."""
    settings = state.resources.settings
    template = state.answer_prompt(prompt)
    fields = {"question": state.question}
    if use_context:
        fields["context"] = fitted_context(state, template, settings.chat.max_tokens)
    return AnswerPlan(state.request(template, "query.generate", max_tokens=settings.chat.max_tokens,
                                    temperature=settings.chat.temperature, **fields))
