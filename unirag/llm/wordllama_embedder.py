"""A faster offline embedder, opt-in: WordLlama ``l2_supercat`` (256-d static token vectors).

``embedding.model: wordllama-l2-supercat-256`` selects it. The PyPI package ``wordllama``
(MIT) ships this model's weights and tokenizer inside its wheel; a text's vector is the mean
of its tokens' vectors, L2-normalised: no network, no attention, 120-180 times MiniLM's
texts per CPU second (tokenising is most of what is left), at a cost in retrieval quality
(README, "A faster embedded model"). It is never the default.

The files are read here, not through ``wordllama.WordLlama.load``: that looks for the
tokenizer under a folder the wheel does not have and then downloads from Hugging Face, and
importing ``wordllama`` at all calls ``logging.basicConfig(level=INFO)``, which would make
every library's INFO lines appear on stderr. The pooling is the package's
(``WordLlamaInference.embed(texts, norm=True)``: Llama-2 tokens without special tokens, mean
over tokens) computed without padding, so a text's vector never depends on its batch-mates.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from unirag.errors import MissingExtraError, UniragError, import_optional
from unirag.llm.base import EmbeddingBatch, normalise_rows

WORDLLAMA_PACKAGE = "wordllama"
EXTRA = "fast-embed"
WEIGHTS_FILE = "weights/l2_supercat_256.safetensors"
TOKENIZER_FILE = "tokenizers/l2_supercat_tokenizer_config.json"
TENSOR_KEY = "embedding.weight"
PURPOSE = "embedding.model wordllama-l2-supercat-256"


def wordllama_dir() -> Path:
    """The installed ``wordllama`` package's folder, found without importing it (module docstring)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(WORDLLAMA_PACKAGE)
    except ImportError:  # present but not importable counts as missing
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(f"{PURPOSE} needs the optional package '{WORDLLAMA_PACKAGE}', which is not "
                                f"installed: pip install 'unirag[{EXTRA}]'")
    return Path(next(iter(spec.submodule_search_locations)))


class WordLlamaEmbedder:
    """Mean of static token vectors (WordLlama l2_supercat, 256-d), L2-normalised.

    Each call is one sparse product: a (texts x vocabulary) matrix counting each text's
    tokens times the (vocabulary x 256) table, so no row is padded and memory stays at the
    table (32 MiB as float32) plus the output, however long the texts.
    """

    dim = 256

    def __init__(self, name: str = "wordllama-l2-supercat-256") -> None:
        self.name = name  # differs from MiniLM's: a workspace switching models re-embeds
        self._table: np.ndarray | None = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> tuple[np.ndarray, Any]:
        """The token table (float32) and the tokenizer, read from the package's files."""
        root = wordllama_dir()
        Tokenizer = import_optional("tokenizers", EXTRA, PURPOSE).Tokenizer
        safe_open = import_optional("safetensors", EXTRA, PURPOSE).safe_open
        tokenizer = Tokenizer.from_file(str(root / TOKENIZER_FILE))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        with safe_open(str(root / WEIGHTS_FILE), framework="np") as weights:
            table = np.ascontiguousarray(weights.get_tensor(TENSOR_KEY), dtype=np.float32)
        if table.shape[1] != self.dim:
            raise UniragError(f"{PURPOSE}: {root / WEIGHTS_FILE} holds {table.shape[1]}-d vectors, not "
                              f"{self.dim}; reinstall it: pip install 'unirag[{EXTRA}]'")
        return table, tokenizer

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        if not texts:
            return EmbeddingBatch(np.zeros((0, self.dim), dtype=np.float32))
        with self._lock:
            if self._table is None:
                self._table, self._tokenizer = self._load()
            table, encodings = self._table, self._tokenizer.encode_batch(texts, add_special_tokens=False)
        token_ids = [encoding.ids for encoding in encodings]
        return EmbeddingBatch(self._pool(token_ids, table), prompt_tokens=sum(map(len, token_ids)), calls=1)

    @staticmethod
    def _pool(token_ids: list[list[int]], table: np.ndarray) -> np.ndarray:
        """Normalised mean of each text's token vectors (a text without tokens: a zero row)."""
        from scipy.sparse import csr_matrix

        lengths = np.array([len(ids) for ids in token_ids], dtype=np.int64)
        flat = np.fromiter((i for ids in token_ids for i in ids), dtype=np.int64, count=int(lengths.sum()))
        np.clip(flat, 0, table.shape[0] - 1, out=flat)  # as the package does for ids past the table
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        counts = csr_matrix((np.ones(len(flat), dtype=np.float32), flat, offsets), shape=(len(token_ids), len(table)))
        summed = np.asarray(counts @ table, dtype=np.float32)
        return normalise_rows(summed / np.maximum(lengths, 1)[:, None].astype(np.float32))
