"""Settings: one pydantic object, loaded in a documented order.

Precedence, lowest first: defaults (this module) < the workspace's
``unirag.yaml`` (with ``${VAR}`` / ``${VAR:-default}`` interpolation) <
``.env`` files (the working directory's, then the workspace's, which wins) <
``UNIRAG_*`` environment variables < command-line flags. A ``.env`` file only
supplies variables the real environment does not set.

The standard ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``OPENAI_MODEL`` name the
chat endpoint when no layer sets ``chat.base_url``, ``chat.model`` or
``chat.api_key`` (and ``chat.provider`` is not ``embedded``): a key alone means
OpenAI's own endpoint and, without ``OPENAI_MODEL``, :data:`OPENAI_DEFAULT_MODEL`.

Environment names are derived from the field paths at any depth:
``chat.base_url`` is ``UNIRAG_CHAT_BASE_URL``, ``graph.tree.method`` is
``UNIRAG_GRAPH_TREE_METHOD``, ``concurrency`` is ``UNIRAG_CONCURRENCY``; list
and mapping settings take YAML (``UNIRAG_GRAPH_GRAPHS='[kg, tree]'``,
``UNIRAG_INDEX_ARCHRAG='{augment: codicil}'``). API keys
are :class:`pydantic.SecretStr`, so they never appear in a repr, a log line, a
manifest or a cache key.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from unirag.errors import ConfigError

SETTINGS_FILE = "unirag.yaml"
ENV_PREFIX = "UNIRAG_"
# Read by others, not settings: the default workspace, debug output, the demo, the tests, and the
# server's key (unirag serve reads it itself so it never sits in a settings object or a manifest).
NON_SETTING_VARS = frozenset({"UNIRAG_WORKSPACE", "UNIRAG_DEBUG", "UNIRAG_DEMO_WORKSPACE", "UNIRAG_TEST_POSTGRES_URL",
                              "UNIRAG_SERVER_API_KEY"})
EMBEDDED_CHAT_MODEL = "smollm2-135m-instruct"
EMBEDDED_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
# opt-in: static token vectors from the wordllama package (unirag.llm.wordllama_embedder); faster, less exact
FAST_EMBEDDING_MODEL = "wordllama-l2-supercat-256"
#: Texts per embedding call when ``embedding.batch_size`` is unset: an endpoint's request, and the
#: embedded models' call (split into runs of <= 1,024 padded tokens by the model; on 2Wiki's
#: sentence segments 32 texts a call left most runs a quarter full).
ENDPOINT_EMBEDDING_BATCH = 32
EMBEDDED_EMBEDDING_BATCH = 512
DOTENV_FILE = ".env"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
OPENAI_DEFAULT_MODEL = "gpt-4o-mini"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class _ModelEndpoint(_Section):
    """Where a model runs. ``auto``: an OpenAI-compatible endpoint when a base
    URL is set, otherwise the embedded offline model."""

    provider: Literal["auto", "embedded", "openai"] = "auto"
    base_url: str | None = None
    api_key: SecretStr | None = None
    n_threads: int = Field(2, gt=0, description="CPU threads of the embedded model")

    @property
    def resolved_provider(self) -> str:
        if self.provider != "auto":
            return self.provider
        return "openai" if self.base_url else "embedded"


class ChatSettings(_ModelEndpoint):
    """The chat model; embedded is SmolLM2-135M (offline, tiny)."""

    model: str = EMBEDDED_CHAT_MODEL
    timeout: float = Field(120.0, gt=0)
    temperature: float = Field(0.0, ge=0)
    max_tokens: int = Field(512, gt=0)
    # Seconds one reply of the embedded model may take (UNIRAG_CHAT_EMBEDDED_TIME_LIMIT);
    # the text so far is kept. 60: the demo question and ten HotpotQA questions took 3-36 s
    # each on 2 cores shared with four other busy processes (bench/README.md), so this
    # lets the demo finish on a busy machine while no reply holds the CPU for minutes
    # (13 were seen). Remote models have ``timeout`` instead.
    embedded_time_limit: float = Field(60.0, gt=0)
    json_mode: Literal["auto", "on", "off"] = "auto"
    context_window: int = Field(8000, gt=256)
    # Our budgets count tokens with chunking.encoding (cl100k); a model's own tokenizer can
    # count more (SmolLM2's counts ~9% more on community reports), and llama.cpp then cuts the
    # reply to what is left of the window. Prompts are packed to the window less this share.
    count_margin: float = Field(0.1, ge=0, lt=0.5)

    @property
    def prompt_window(self) -> int:
        """The window prompt budgets pack to, in our tokenizer's tokens."""
        return int(self.context_window * (1 - self.count_margin))

    def describe(self) -> str:
        """Which chat model answers, in words for a status line (never the key)."""
        if self.resolved_provider != "openai":
            return f"{self.model} (embedded, offline)"
        from urllib.parse import urlsplit

        host = urlsplit(self.base_url or "").hostname or self.base_url or "?"
        return f"{self.model} at {host}"


class EmbeddingSettings(_ModelEndpoint):
    """The embedding model; embedded is all-MiniLM-L6-v2, or ``wordllama-l2-supercat-256`` (opt-in:
    static token vectors, ~150x faster on CPU, lower recall; the ``fast-embed`` extra)."""

    model: str = EMBEDDED_EMBEDDING_MODEL
    timeout: float = Field(60.0, gt=0)
    batch_size: int | None = Field(
        None, gt=0, le=2048,
        description="texts per embedding call; unset: 32 for an endpoint (a request), 512 for the embedded "
        "models (they split a call into runs of similar length themselves; fewer, fuller runs cost less)")
    int8_kernels: bool = Field(
        False, description="embedded MiniLM only: run its MatMuls on int8 kernels (about 2x faster on CPU; "
        "vectors differ slightly, so an index built without it is embedded again)")

    @property
    def resolved_batch_size(self) -> int:
        if self.batch_size is not None:
            return self.batch_size
        return ENDPOINT_EMBEDDING_BATCH if self.resolved_provider == "openai" else EMBEDDED_EMBEDDING_BATCH


class RerankSettings(_Section):
    """A cross-encoder reranker behind the common rerank HTTP API, for the ``context.rerank``
    operator (``*-rerank`` methods); unset ``base_url``: no reranker, and a method that reranks
    says so at query start. ``api: cohere`` POSTs ``{model, query, documents, top_n}`` to
    ``base_url/rerank`` and reads ``results[].relevance_score`` (Cohere, Jina, vLLM, TEI's
    ``/v1/rerank``); ``api: tei`` POSTs ``{query, texts}`` and reads ``[{index, score}]`` (TEI's
    own ``/rerank``). The key is sent as a Bearer header and never printed."""

    base_url: str | None = Field(None, description="e.g. http://localhost:8080/v1 (POSTs base_url/rerank)")
    model: str = Field("", description="the model name sent with api: cohere (empty: not sent)")
    api_key: SecretStr | None = Field(None, description="from the environment only: UNIRAG_RERANK_API_KEY, or ${VAR} in unirag.yaml")
    api: Literal["cohere", "tei"] = Field(
        "cohere", description="request/response shape: cohere ({documents, top_n} -> results[].relevance_score, "
        "also Jina, vLLM) or tei ({texts} -> [{index, score}])")
    timeout: float = Field(30.0, gt=0)
    batch_size: int = Field(64, gt=0, le=1024, description="documents per rerank call (more: several calls)")

    def describe(self) -> str:
        """Which reranker scores, in words for a message (host only, never the key)."""
        from urllib.parse import urlsplit

        host = urlsplit(self.base_url or "").hostname or self.base_url or "?"
        return f"{self.model or 'reranker'} at {host}"


class ChunkingSettings(_Section):
    """Token chunking. 1200/100 is the survey's setting; 600/100 GraphRAG's.

    ``presplit``: ``auto`` keeps passages of the dataset formats (HotpotQA,
    MuSiQue, 2Wiki) as one chunk each, as the survey does for expert-split
    corpora; ``always``/``never`` force it for every source.
    """

    size: int = Field(1200, gt=0)
    overlap: int = Field(100, ge=0)
    presplit: Literal["auto", "always", "never"] = "auto"
    encoding: Literal["cl100k_base", "o200k_base"] = "cl100k_base"

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingSettings:
        if self.overlap >= self.size:
            raise ValueError(f"chunking.overlap ({self.overlap}) must be smaller than chunking.size ({self.size})")
        return self


class LoaderSettings(_Section):
    """Field names read from .json/.jsonl records."""

    text_field: str = "text"
    title_field: str = "title"
    # A record's own id: with it, re-indexing a changed record replaces the old version and
    # ``unirag delete FILE#ID`` removes just that record.
    id_field: str = "id"
    # Zip-based formats (DOCX): a few hundred KB can inflate to gigabytes of XML (a zip
    # bomb), which the reader would parse and chunk without end. A real DOCX's XML is a few
    # MB even for a long book (images are stored already compressed, ratio ~1), and its
    # XML compresses about 5-20:1, so these bounds refuse only archives no writer makes.
    max_inflated_mb: float = Field(
        200.0, gt=0, description="a DOCX (any zip-based file) whose parts inflate to more MB is skipped")
    max_compression_ratio: float = Field(
        100.0, gt=1, description="a DOCX inflating to over 1 MB at more than this ratio (inflated:stored) is skipped")


class RetrievalSettings(_Section):
    top_k: int = Field(4, gt=0)
    build_wait: float = Field(
        600.0, ge=0, description="seconds a query waits for another process building what it needs (0: fail at once)"
    )
    max_question_tokens: int = Field(
        2000, gt=0, description="longer questions are refused (every prompt must still fit chat.context_window)"
    )
    question_path: Literal["auto", "llm", "nlp"] = Field(
        "auto",
        description="how a method's question entities/keywords are read: llm (the chat model), nlp (spaCy, "
        "zero-LLM: entities_nlp/keywords_nlp); auto = llm when a chat endpoint is configured, else nlp",
    )


class GenerateSettings(_Section):
    """How answers are written (the final prompt of every generation mode).

    ``short`` keeps the packaged prompts' "a few words", which benchmarks score;
    ``paragraph`` and ``report`` ask for fuller answers with their own prompt files
    (``answer_with_context_paragraph.yaml`` ...). ``language`` adds one sentence asking
    for that language; unset, the model answers in the question's language.
    """

    style: Literal["short", "paragraph", "report"] = Field(
        "short", description="short: a few words (benchmarks); paragraph: a few sentences; report: sections"
    )
    language: str | None = Field(
        None, pattern=r"^[^{}\n]{1,60}$",
        description="answer in this language (e.g. French); unset: the question's language",
    )


class TreeSettings(_Section):
    """RAPTOR tree (survey §4 ②): GMM with BIC (RAPTOR) or K-means (RAPTOR-K)."""

    method: Literal["gmm", "kmeans"] = "gmm"
    max_layers: int = Field(4, ge=1)
    min_layer_size: int = Field(3, ge=2)
    threshold: float = Field(0.1, gt=0, lt=1)
    cluster_size: int = Field(8, ge=2)
    summary_max_tokens: int = Field(256, gt=0)
    bic_patience: int = Field(10, ge=0)  # GMM: BIC sweep stops after this many k without improvement (0: all)


class GraphSettings(_Section):
    """Graph building (survey §4; GraphRAG §3.1.2-3.1.3; HyGRAG §3.1).

    ``extractor``: ``llm`` prompts the chat model per chunk; ``nlp`` is the
    zero-LLM extractor (spaCy entities + sentence co-occurrence); ``auto``
    uses ``llm`` when a chat endpoint is configured, else ``nlp``.
    """

    extractor: Literal["auto", "llm", "nlp"] = "auto"
    entity_types: list[str] = Field(
        default_factory=lambda: ["person", "organization", "location", "event", "work", "concept"],
        min_length=1, description="entity types the LLM extractor asks for (part of its cache key)",
    )
    claims: bool = False
    gleaning: int = Field(1, ge=0, le=5, description="extra extraction passes (GraphRAG A.2)")
    share_call_below_tokens: int = Field(
        200, ge=0, description="passages shorter than this may share one extraction call"
    )
    max_passages_per_call: int = Field(4, ge=1)
    extraction_max_tokens: int = Field(1500, gt=0)
    grounding: bool = Field(
        True, description="drop extracted names that do not occur in their passage (small models copy the example)"
    )
    description_max_tokens: int = Field(200, gt=0, description="merged descriptions above this are summarised")
    nlp_processes: int = Field(
        1, ge=0, description="spaCy processes of the nlp extractor (same extractions); 0 = one per core, at most 2. "
        "1 by measurement: on a 2-core machine shared with other work, 2 workers ran 16% slower (serialising docs)",
    )
    nlp_batch_size: int = Field(64, gt=0, description="passages per spaCy batch of the nlp extractor")
    passage_threshold: int = Field(1, ge=1, description="PG: link chunks sharing at least this many entities")
    hybrid_threshold: int = Field(3, ge=0, description="hybrid: link chunks sharing more than l entities")
    graphs: list[Literal["kg", "tkg", "rkg", "pg", "tree", "hybrid"]] = Field(default_factory=list)
    tree: TreeSettings = TreeSettings()

    def resolved_extractor(self, chat: ChatSettings) -> str:
        if self.extractor != "auto":
            return self.extractor
        return "llm" if chat.resolved_provider == "openai" else "nlp"

    def resolved_nlp_processes(self) -> int:
        """Processes for spaCy: the setting, or (0) one per available core up to 2.

        Parsing is ~95% of the extractor's time and splits over workers, but each
        Doc is serialised to and from a worker (~20% more CPU in all), so workers
        pay only where cores are free; past two, each worker's copy of the model
        costs memory a small machine lacks."""
        if self.nlp_processes:
            return self.nlp_processes
        return max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


class IndexSettings(_Section):
    """Community hierarchies and their indices (survey §5).

    Each entry overrides fields of the builder's config (defaults are the
    papers' values; ``unirag stats --json`` shows what was used), e.g.
    ``archrag: {augment: codicil, clustering: spectral}``. Unknown fields are
    a configuration error when the hierarchy is built.
    """

    summarizer: Literal["auto", "llm", "extractive"] = Field(
        "auto",
        description="community summaries/reports: llm, or extractive (zero-LLM: built from member descriptions); "
        "auto = llm when a chat endpoint is configured, else extractive",
    )
    update: Literal["attach", "rebuild"] = Field(
        "attach",
        description="after a corpus change: attach new leaves to the last build's communities and re-summarise "
        "only what changed (attach), or cluster every hierarchy afresh (rebuild)",
    )
    long_texts: Literal["whole", "sentences"] = Field(
        "whole",
        description="how the long texts are embedded (entity and relationship descriptions, community summaries "
        "and reports, tree summaries; never chunks, names or questions): sentences = the word-weighted mean of "
        "their label's and sentences' vectors, each distinct sentence embedded once for every artifact; whole = "
        "each text as one input (the embedded MiniLM reads its first 256 word pieces). sentences embeds about a "
        "quarter of the tokens, but lost 0.02-0.12 of the dev sets' recall for most graph methods (docs: Performance)",
    )
    rebuild_share: float = Field(
        0.2, ge=0, le=1,
        description="with update: attach, cluster afresh once the leaves added or removed since the last full "
        "build exceed this share of it",
    )
    resummarize_share: float = Field(
        0.1, ge=0, le=1,
        description="with update: attach, an upper-level community whose members are the same communities "
        "(some of them changed) keeps its summary while at most this share of the entities beneath it "
        "differ from those its summary was written from (ArchRAG, LeanRAG; the RAPTOR tree counts leaf chunks); "
        "0: re-summarise it",
    )
    graphrag: dict[str, Any] = Field(default_factory=dict, description="hierarchical Leiden + reports")
    archrag: dict[str, Any] = Field(default_factory=dict, description="attributed communities")
    chnsw: dict[str, Any] = Field(default_factory=dict, description="ArchRAG's C-HNSW (m, ef_construction)")
    hygrag: dict[str, Any] = Field(default_factory=dict, description="LSH bucket hierarchy")
    leanrag: dict[str, Any] = Field(default_factory=dict, description="GMM aggregation hierarchy")

    def resolved_summarizer(self, chat: ChatSettings) -> str:
        if self.summarizer != "auto":
            return self.summarizer
        return "llm" if chat.resolved_provider == "openai" else "extractive"


class RaySettings(_Section):
    """Where ``executor: ray`` runs its tasks (``unirag index --executor ray``).

    ``address``: a cluster to join (``ray://host:10001``, ``host:6379``, ``auto`` for one
    started on this machine with ``ray start``); unset, Ray's own rule applies (``RAY_ADDRESS``,
    else a local instance started for the run). ``num_cpus`` sizes a local instance only.
    """

    address: str | None = None
    num_cpus: int | None = Field(None, gt=0, description="CPUs of a local Ray instance (unset: all)")
    batch_size: int = Field(64, gt=0, description="documents or chunks per Ray task (chunking, nlp extraction)")
    max_retries: int = Field(3, ge=0, description="times a task is run again after its worker died or it raised")


class Settings(_Section):
    chat: ChatSettings = ChatSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    rerank: RerankSettings = RerankSettings()
    chunking: ChunkingSettings = ChunkingSettings()
    loader: LoaderSettings = LoaderSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    generate: GenerateSettings = GenerateSettings()
    graph: GraphSettings = GraphSettings()
    index: IndexSettings = IndexSettings()
    concurrency: int = Field(4, gt=0, description="parallel model calls at most")
    executor: Literal["local", "ray"] = Field(
        "local", description="who runs index work: local (threads + this process) or ray (tasks on a Ray cluster)"
    )
    ray: RaySettings = RaySettings()
    max_retries: int = Field(5, ge=0)
    retry_base_delay: float = Field(1.0, ge=0)
    retry_max_delay: float = Field(30.0, ge=0)
    cache: bool = True
    method: str = "vanilla"
    store: str = Field("sqlite", description="where the tables live: sqlite (WS/store.sqlite) or "
                                             "postgresql://user@host:port/db[?schema=NAME]")

    @field_validator("store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        scheme = value.strip().split("://", 1)[0] if "://" in value else value.strip()
        if scheme not in ("", "sqlite", "postgresql", "postgres"):
            raise ValueError("expected sqlite or a postgresql://user@host:port/db URL")
        return value.strip() or "sqlite"

    def public_dict(self) -> dict[str, Any]:
        """Settings as JSON-safe data with secrets masked (for stats/manifests): the API keys
        and a password in the store's URL."""
        data = json.loads(self.model_dump_json())
        data["store"] = mask_url_password(self.store)
        return data


def mask_url_password(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if not parts.password:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"{parts.username}:***@{host}").geturl()


def configured_store(workspace: Path) -> str:
    """The ``store`` setting of the workspace at ``workspace`` (file < .env < environment), read
    without the rest of the settings: what opening the workspace's tables needs."""
    env = environment(workspace)
    value = env.get(f"{ENV_PREFIX}STORE")
    if value is None:
        value = read_settings_file(Path(workspace) / SETTINGS_FILE, env).get("store")
    return str(value or "sqlite").strip() or "sqlite"


def config_hash(data: Any) -> str:
    """A short stable hash of JSON-able data: canonical JSON, sorted keys."""
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def interpolate(value: Any, env: Mapping[str, str], where: str = SETTINGS_FILE) -> Any:
    """Replace ``${VAR}`` and ``${VAR:-default}`` in every string of ``value``."""
    if isinstance(value, str):

        def sub(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise ConfigError(f"{where}: ${{{name}}} is not set in the environment")

        return _VAR.sub(sub, value)
    if isinstance(value, dict):
        return {k: interpolate(v, env, where) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, where) for v in value]
    return value


def _field_paths(model: type[BaseModel] = Settings, prefix: tuple[str, ...] = ()) -> dict[str, tuple[str, ...]]:
    """Map env names to field paths, at any depth: ``UNIRAG_CHAT_BASE_URL`` ->
    (``chat``, ``base_url``), ``UNIRAG_GRAPH_TREE_METHOD`` -> (``graph``, ``tree``, ``method``)."""
    paths: dict[str, tuple[str, ...]] = {}
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            paths.update(_field_paths(annotation, (*prefix, name)))
        else:
            path = (*prefix, name)
            paths[(ENV_PREFIX + "_".join(path)).upper()] = path
    return paths


def _structured(path: tuple[str, ...]) -> bool:
    """Whether the field at ``path`` holds a list or a mapping (read from env as YAML)."""
    model: Any = Settings
    for name in path[:-1]:
        model = model.model_fields[name].annotation
    annotation = model.model_fields[path[-1]].annotation
    origin = getattr(annotation, "__origin__", annotation)
    return origin in (list, dict)


def _env_value(path: tuple[str, ...], value: str, name: str) -> Any:
    """Env values are strings; list and mapping settings are YAML (``[kg, tree]``, ``{m: 16}``)."""
    if not _structured(path):
        return value
    import yaml

    try:
        return yaml.safe_load(value)
    except yaml.YAMLError:
        raise ConfigError(f"{name}: not a YAML list or mapping: {value!r}") from None


def _set_path(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = data
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = value


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def read_settings_file(path: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """Parse a settings YAML file (interpolated); a missing file is empty."""
    if not path.is_file():
        return {}
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{path}: not valid YAML ({first})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    check_env_only_keys(data, path)
    return interpolate(data, env, str(path))


#: Keys a settings file may name only as ``${VAR}``: newer sections hold no secret in a file
#: (a file ends up in backups and commits); the chat and embedding keys predate this rule.
ENV_ONLY_KEYS = (("rerank", "api_key"),)


def check_env_only_keys(data: Mapping[str, Any], path: Path) -> None:
    """A literal value for an :data:`ENV_ONLY_KEYS` key is refused, without ever quoting it."""
    for section, key in ENV_ONLY_KEYS:
        block = data.get(section)
        value = block.get(key) if isinstance(block, Mapping) else None
        if value is not None and not (isinstance(value, str) and _VAR.fullmatch(value.strip())):
            raise ConfigError(f"{path}: {section}.{key} must come from the environment: set "
                              f"{ENV_PREFIX}{section.upper()}_{key.upper()}, or write ${{VAR}} here")


def read_dotenv(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of a ``.env`` file (``export``, quotes and ``#`` comments as
    shells and python-dotenv read them); a missing file is empty."""
    if not path.is_file():
        return {}
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.removeprefix("export ").partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ConfigError(f"{path}:{number}: expected KEY=VALUE")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        else:
            value = value.split(" #", 1)[0].strip()
        values[key] = value
    return values


def environment(workspace: Path | None, cwd: Path | None = None) -> dict[str, str]:
    """The process environment over the ``.env`` files of ``cwd`` and ``workspace`` (the real
    environment wins, then the workspace's file, then the working directory's)."""
    merged = read_dotenv((cwd or Path.cwd()) / DOTENV_FILE)
    if workspace is not None:
        merged.update(read_dotenv(Path(workspace) / DOTENV_FILE))
    merged.update(os.environ)
    return merged


def _openai_defaults(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """``data`` with the chat endpoint of ``OPENAI_*`` when no layer named one (module docstring)."""
    chat = data.get("chat") if isinstance(data.get("chat"), dict) else {}
    named = any(chat.get(key) is not None for key in ("base_url", "model", "api_key"))
    if named or chat.get("provider") == "embedded" or not (env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_KEY")):
        return data
    endpoint = {"base_url": env.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL,
                "model": env.get("OPENAI_MODEL") or OPENAI_DEFAULT_MODEL}
    if env.get("OPENAI_API_KEY"):
        endpoint["api_key"] = env["OPENAI_API_KEY"]
    return _merge(data, {"chat": endpoint})


def load_settings(
    workspace: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Build the settings: defaults < ``workspace/unirag.yaml`` < ``.env`` < env < ``overrides``.

    ``overrides`` uses dotted keys (``{"chat.model": "qwen2.5"}``); ``None``
    values are ignored so unset CLI flags do not mask lower layers. ``env``
    replaces the process environment *and* the ``.env`` files (tests pass their own).
    """
    env = environment(workspace) if env is None else env
    data: dict[str, Any] = {}
    source = "defaults"
    if workspace is not None:
        data = read_settings_file(Path(workspace) / SETTINGS_FILE, env)
        source = str(Path(workspace) / SETTINGS_FILE)
    paths = _field_paths()
    env_layer: dict[str, Any] = {}
    for name, value in env.items():
        if name in paths:
            _set_path(env_layer, paths[name], _env_value(paths[name], value, name))
        elif name.startswith(ENV_PREFIX) and name not in NON_SETTING_VARS:
            raise ConfigError(f"unknown environment variable {name}; known: {', '.join(sorted(paths))}")
    data = _merge(data, env_layer)
    return _validated(_openai_defaults(_with_overrides(data, overrides), env), f"{source}, env or flags")


def override_settings(settings: Settings, overrides: Mapping[str, Any]) -> Settings:
    """``settings`` with ``overrides`` on top (dotted keys, values may be nested mappings;
    ``None`` values ignored), validated like :func:`load_settings`."""
    if not any(value is not None for value in overrides.values()):
        return settings
    return _validated(_with_overrides(settings.model_dump(), overrides), "arguments")


def _with_overrides(data: dict[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    flag_layer: dict[str, Any] = {}
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set_path(flag_layer, tuple(dotted.split(".")), value)
    return _merge(data, flag_layer)


def _validated(data: dict[str, Any], source: str) -> Settings:
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "settings"
        raise ConfigError(f"invalid setting {loc} ({source}): {err['msg']}") from None


DEFAULT_SETTINGS_YAML = """\
# unirag settings for this workspace.
# Precedence: defaults < this file < UNIRAG_* environment variables < CLI flags.
# ${VAR} and ${VAR:-default} are replaced from the environment.

chat:
  # provider: auto uses an OpenAI-compatible endpoint when base_url is set,
  # otherwise the embedded SmolLM2-135M (offline; proves the pipeline, answers poorly).
  provider: auto
  # base_url: http://localhost:8000/v1      # vLLM, Ollama (/v1), llama.cpp server, OpenAI
  # model: meta-llama/Meta-Llama-3-8B-Instruct
  # api_key: ${OPENAI_API_KEY}
  temperature: 0.0
  max_tokens: 512
  embedded_time_limit: 60   # seconds per reply of the embedded model; the text so far is kept
  json_mode: auto
  context_window: 8000
  count_margin: 0.1   # share of the window kept free: the model's tokenizer may count more than ours

embedding:
  provider: auto
  # base_url: http://localhost:8000/v1
  # model: BAAI/bge-m3
  # batch_size: 32   # texts per call (unset: 32 for an endpoint, 512 for the embedded models)
  # int8_kernels: true   # embedded MiniLM: int8 MatMuls, ~2x faster, vectors differ slightly (re-embeds)
  # model: wordllama-l2-supercat-256   # offline, static vectors: far faster, lower recall (unirag[fast-embed])

# rerank:   # a cross-encoder for the *-rerank methods (TEI, vLLM, Jina, Cohere); key: UNIRAG_RERANK_API_KEY
  # base_url: http://localhost:8080/v1
  # model: BAAI/bge-reranker-v2-m3
  # api: cohere   # or tei: TEI's own /rerank ({query, texts} -> [{index, score}])

chunking:
  size: 1200        # the survey's setting; GraphRAG uses 600
  overlap: 100
  presplit: auto    # dataset passages stay one chunk each

retrieval:
  top_k: 4
  build_wait: 600   # seconds a query waits while another process builds what it needs
  max_question_tokens: 2000   # longer questions are refused
  question_path: auto   # question entities/keywords: llm, nlp (spaCy, zero-LLM); auto = llm with a chat endpoint

concurrency: 4
max_retries: 5
cache: true
method: vanilla
"""
