"""The final answer prompt as ``generate.style`` and ``generate.language`` ask for it.

Why variants in files rather than a phrase swapped in code: every word a model
is shown lives in a prompt file with a version (and can be shadowed by a
workspace's own file), and the short style keeps the packaged prompts exactly as
they were, so benchmark answers and their cached replies do not move.
"""

from __future__ import annotations

from dataclasses import replace

from unirag.prompts.prompt import Prompt, PromptLibrary, is_prompt_path

LANGUAGE_PROMPT = "answer_language"


def answer_prompt(prompts: PromptLibrary, name: str, style: str = "short", language: str | None = None) -> Prompt:
    """Prompt ``name`` in ``style`` (its ``NAME_STYLE`` file when one exists, else ``name`` as
    it is) with the language sentence appended when ``language`` is set. The appended
    sentence is part of the template, so the prompt's cache version changes with it."""
    styled = f"{name}_{style}"
    use_variant = style != "short" and not is_prompt_path(name) and prompts.has(styled)
    prompt = prompts.load(styled if use_variant else name)
    if language:
        sentence = prompts.load(LANGUAGE_PROMPT).messages(language=language.strip())[-1]["content"]
        prompt = replace(prompt, user=f"{prompt.user.rstrip()}\n{sentence}\n")
    return prompt
