"""LLM extraction: one prompt per chunk (or per group of short passages).

Prompt economy (instructions are paid again on every chunk, so other
frameworks' long ones dominate the prompt): our prompt's own text stays under
600 tokens; short
pre-split passages share a call, each item naming its passage so provenance
survives; a gleaning pass sends the passages and the names already found,
never the whole previous exchange (GraphRAG appendix A.2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

from unirag.graph.merge import normalize_name
from unirag.graph.parse import parse_extraction
from unirag.graph.types import ChunkExtraction
from unirag.config import GraphSettings, config_hash
from unirag.prompts.prompt import Prompt, PromptLibrary
from unirag.llm.base import ChatModel
from unirag.text.replies import read_yes_no
from unirag.text.types import Chunk

_CLAIMS_INSTRUCTION = (
    "- claims: factual statements about an extracted entity. Fields: passage, subject, object, "
    "type, status (TRUE, FALSE or SUSPECTED), date (ISO or empty), description."
)
_CLAIMS_EXAMPLE = (
    ', "claims": [{"passage": "P1", "subject": "Marie Curie", "object": "Nobel Prize in Physics", '
    '"type": "award", "status": "TRUE", "date": "1903", "description": "Marie Curie won the Nobel '
    'Prize in Physics in 1903."}]'
)
_CLAIMS_FIELDS = ', "claims": [{"passage", "subject", "object", "type", "status", "date", "description"}]'


def ground(extraction: ChunkExtraction, text: str) -> None:
    """Drop entities whose name does not occur in the passage, and relations touching them.

    Small models (the embedded SmolLM2-135M most of all) copy the prompt's own
    example (Marie Curie, Warsaw) into every chunk; a name must appear in the
    text (after normalisation) to enter the graph.
    """
    haystack = f" {normalize_name(text)} "
    grounded = {e.name for e in extraction.entities if f" {normalize_name(e.name)} " in haystack}
    dropped = len(extraction.entities) - len(grounded)
    if dropped:
        extraction.entities = [e for e in extraction.entities if e.name in grounded]
        extraction.dropped["ungrounded_entity"] += dropped
    keep = [r for r in extraction.relations if f" {normalize_name(r.source)} " in haystack
            and f" {normalize_name(r.target)} " in haystack]
    if len(keep) != len(extraction.relations):
        extraction.dropped["ungrounded_relation"] += len(extraction.relations) - len(keep)
        extraction.relations = keep
    claims = [c for c in extraction.claims if f" {normalize_name(c.subject)} " in haystack]
    if len(claims) != len(extraction.claims):
        extraction.dropped["ungrounded_claim"] += len(extraction.claims) - len(claims)
        extraction.claims = claims


class HasTokens(Protocol):
    n_tokens: int


Sized = TypeVar("Sized", bound=HasTokens)


def plan_groups(chunks: Sequence[Sized], share_below_tokens: int, max_per_call: int) -> list[list[Sized]]:
    """Which chunks share a call: consecutive short passages, up to a count.

    Deterministic, so a rerun builds the same prompts and hits the cache. Only sizes
    count, so the cost estimate plans the same groups from token counts alone.
    """
    groups: list[list[Sized]] = []
    current: list[Sized] = []
    for chunk in chunks:
        if chunk.n_tokens >= share_below_tokens or max_per_call == 1:
            if current:
                groups.append(current)
                current = []
            groups.append([chunk])
            continue
        current.append(chunk)
        if len(current) == max_per_call or sum(c.n_tokens for c in current) >= share_below_tokens * max_per_call:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


class LlmExtractor:
    """Entities, relationships (and claims) per chunk from the chat model."""

    def __init__(self, chat: ChatModel, settings: GraphSettings, temperature: float = 0.0,
                 prompts: PromptLibrary | None = None) -> None:
        self.chat = chat
        self.settings = settings
        self.temperature = temperature
        prompts = prompts or PromptLibrary()
        self.prompt: Prompt = prompts.load("extract_graph")
        self.check_prompt: Prompt = prompts.load("extract_glean_check")
        self.glean_prompt: Prompt = prompts.load("extract_glean")
        knobs = {
            "types": settings.entity_types,
            "claims": settings.claims,
            "gleaning": settings.gleaning,
            "share": settings.share_call_below_tokens,
            "per_call": settings.max_passages_per_call,
            "max_tokens": settings.extraction_max_tokens,
            "grounding": settings.grounding,
            "prompts": [self.prompt.cache_version, self.check_prompt.cache_version, self.glean_prompt.cache_version],
        }
        self.name = f"llm:{chat.name}:{config_hash(knobs)}"

    def instruction_messages(self) -> tuple[dict[str, str], ...]:
        """The prompt with no passage: its own cost per call (kept under 600 tokens)."""
        return self.prompt.messages(**self._fields(""))

    def call_tokens(self, passage_tokens: int, count: Callable[[str], int]) -> list[int]:
        """Prompt tokens of each call one group makes at most, for passages of ``passage_tokens``
        (labels included): the extraction, then a check and a glean per gleaning pass (a pass
        stops early when the check says no, so this is the upper bound the cost estimate uses)."""
        extract = sum(count(m["content"]) for m in self.instruction_messages())
        check = sum(count(m["content"]) for m in self.check_prompt.messages(passages="", found=""))
        glean = sum(count(m["content"]) for m in self.glean_prompt.messages(**{**self._fields(""), "found": ""}))
        return [extract + passage_tokens] + [check + passage_tokens, glean + passage_tokens] * self.settings.gleaning

    def _fields(self, passages: str) -> dict[str, str]:
        claims = self.settings.claims
        return {
            "entity_types": ", ".join(self.settings.entity_types),
            "claims_instruction": _CLAIMS_INSTRUCTION if claims else "",
            "claims_example": _CLAIMS_EXAMPLE if claims else "",
            "claims_fields": _CLAIMS_FIELDS if claims else "",
            "passages": passages,
        }

    def extract_group(self, group: list[Chunk]) -> list[ChunkExtraction]:
        """One extraction call for the group, then up to ``gleaning`` check + glean passes."""
        labels = {f"P{i}": chunk.id for i, chunk in enumerate(group, start=1)}
        passages = "\n".join(f"[{label}] {chunk.indexed_text}" for label, chunk in zip(labels, group, strict=True))
        fields = self._fields(passages)
        max_tokens = self.settings.extraction_max_tokens
        reply = self.chat.complete(self.prompt.request(
            "build.extract", max_tokens=max_tokens, temperature=self.temperature, json_mode=True, **fields))
        result = parse_extraction(reply.text, labels, with_claims=self.settings.claims)
        merged = result.extractions
        if result.dropped:
            first = merged[group[0].id]
            first.dropped.update({f"call:{k}": v for k, v in result.dropped.items()})
        if reply.finish_reason == "length":
            merged[group[0].id].dropped["truncated_output"] += 1
        for _ in range(self.settings.gleaning):
            found = sorted({e.name for ex in merged.values() for e in ex.entities})
            found_text = ", ".join(found) or "(none)"
            check = self.chat.complete(
                self.check_prompt.request("build.extract.glean_check", max_tokens=3, temperature=self.temperature,
                                          passages=passages, found=found_text)
            )
            if read_yes_no(check.text) is not True:
                break
            more = self.chat.complete(
                self.glean_prompt.request("build.extract.glean", max_tokens=max_tokens, temperature=self.temperature,
                                          json_mode=True, **{**fields, "found": found_text})
            )
            extra = parse_extraction(more.text, labels, with_claims=self.settings.claims)
            for chunk_id, ex in extra.extractions.items():
                target = merged[chunk_id]
                target.entities.extend(ex.entities)
                target.relations.extend(ex.relations)
                target.claims.extend(ex.claims)
                target.dropped.update(ex.dropped)
        if self.settings.grounding:
            for chunk in group:
                ground(merged[chunk.id], chunk.indexed_text)
        return [merged[chunk.id] for chunk in group]

    def extract_groups(self, groups: list[list[Chunk]], concurrency: int) -> Iterator[list[ChunkExtraction]]:
        """Groups in parallel; each group's result is yielded as soon as it is complete."""
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            futures = [pool.submit(self.extract_group, group) for group in groups]
            try:
                for future in futures:
                    yield future.result()
            finally:
                for future in futures:
                    future.cancel()
