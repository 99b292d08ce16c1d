"""The stop check of a ``repeat`` block: does the context gathered so far answer the question?

ToG's reasoning step (Sun et al. 2024): after each exploration round the LLM
is shown the question and what was retrieved, and says whether that is
enough to answer; exploration goes deeper only when it says no. The reply is
read with the gleaning check's YES/NO reader; a reply that says neither
counts as "not yet", so an unreadable reply costs at most the remaining
rounds, never a missed hop.
"""

from __future__ import annotations

from unirag.generate.direct import fitted_context
from unirag.operators.context import QueryState
from unirag.text.replies import read_yes_no

# The reply is one word; a little room for a model that explains itself first.
REPLY_TOKENS = 32


def context_suffices(state: QueryState, prompt: str) -> bool:
    """Ask prompt ``prompt`` (fields ``question``, ``context``) whether ``state.items`` answer the question."""
    if not state.items:
        return False
    settings = state.resources.settings
    template = state.prompt(prompt)
    context = fitted_context(state, template, REPLY_TOKENS)
    request = state.request(template, "query.until", max_tokens=REPLY_TOKENS, temperature=settings.chat.temperature,
                            question=state.question, context=context)
    return read_yes_no(state.models.chat.complete(request).text) is True
