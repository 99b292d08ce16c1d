"""The Python API: one workspace as an object you index into and ask.

    from unirag import UniRAG

    with UniRAG("my-ws") as rag:                  # settings: defaults < my-ws/unirag.yaml < UNIRAG_* < arguments
        rag.index(["docs/"])
        result = rag.query("Who founded X?", method="hipporag")
        print(result.answer, [item.source for item in result.context])
        for event in rag.stream("And why?"):      # AnswerDelta(text)..., then QueryDone(result)
            ...

Why one object per workspace: the model clients, the response cache and the
indices a query loads are built once and shared by every later call (and by
concurrent ones: indices are read-only once loaded).

One door for every caller. Each CLI command that reads or writes a workspace
(``index`` with its estimate and ``--dry-run``, ``delete``, ``documents``,
``stats``, ``query``, ``export``, ``eval``, ``questions``) calls a method of a ``UniRAG`` (``UniRAG.attach``
around the workspace, settings and model stack the command opened); the
server's routes and the MCP tools call the same methods (its graph pages
through :meth:`UniRAG.graph_view`, :meth:`UniRAG.communities` and
:meth:`UniRAG.artifact_problems`, never writing); no door reads ``rag.workspace``
(``tests/test_thin_callers.py``). What an index request
may ask for is checked in one place (:func:`unirag.pipeline.plan_index`), so
every door refuses the same mistakes with the same line. The CLI keeps only
what is its own: progress bars, the "go on?" question before paid calls,
printing, exit codes.

Sync and async. ``index``/``query``/``stream``/``delete`` have async twins
(``aindex``, ``aquery``, ``astream``, ``adelete``) that never block the event
loop: a query's retrieval (CPU-bound index work, and the model calls of agent
operators and map/filter steps, through the sync clients) runs in a worker
thread; its final generation call, the one that streams, is awaited on the
loop, as real async HTTP for an OpenAI-compatible endpoint (the embedded
SmolLM2 is native and blocking: its calls run in a worker thread too).
Indexing and deleting run in a worker thread.

Writes are serialised per object: one ``index``, ``delete`` or artifact refresh
at a time; queries run concurrently. A query refreshes what is stale before it
answers, waiting for another writer (a process, or another object on the same
workspace) if need be; with ``stale_while_writing=True`` (the server's reader)
it answers from the artifacts as they are while another writer updates them, and
switches to the new ones on its first query after the writer is done.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unirag.api_types import AnswerDelta, DocumentInfo, MethodInfo, QueryDone, QueryEvent
from unirag.artifacts.registry import outdated
from unirag.config import load_settings, override_settings
from unirag.errors import SourceError
from unirag.graph.export import export_graph, load_view
from unirag.hierarchy.community_store import CommunityStore
from unirag.llm.async_layers import AsyncAccountedChat
from unirag.llm.base import ChatResponse, UsageLedger
from unirag.llm.factory import backend_chat, build_async_chat, build_stack
from unirag.llm.streaming import stream_chat
from unirag.methods.runner import MethodRunner
from unirag.methods.spec import MethodSpec, builtin_methods, resolve_method
from unirag.operators.question import check_question
from unirag.pipeline import estimate_plan, plan_index, prepare_query, run_delete, run_index
from unirag.progress import Progress
from unirag.stats import workspace_stats
from unirag.text.types import Document
from unirag.workspace import Workspace

if TYPE_CHECKING:
    from types import TracebackType

    from unirag.config import Settings
    from unirag.eval.datasets import Dataset
    from unirag.eval.runner import EvalPlan, EvalProgress
    from unirag.graph.projections import GraphView
    from unirag.hierarchy.communities import Community
    from unirag.generate.plan import AnswerPlan
    from unirag.llm.base import ChatModel, EmbeddingModel
    from unirag.artifacts.cost import CostEstimate
    from unirag.llm.factory import AsyncChatStack, ModelStack
    from unirag.methods.runner import QueryResult
    from unirag.operators.context import QueryState
    from unirag.pipeline import DeleteReport, IndexPlan, IndexReport
    from unirag.text.types import Chunk


def resolve_settings(root: Path | None, settings: Settings | None, overrides: Mapping[str, Any]) -> Settings:
    """The CLI's precedence: defaults < ``root/unirag.yaml`` < ``UNIRAG_*`` env < ``overrides``.

    ``overrides`` keys are dotted (``"chat.model"``), double-underscored
    (``chat__model``) or sections with nested values (``chat={"model": ...}``);
    ``None`` values are ignored. A given ``settings`` replaces the first three
    layers (it is taken as is), ``overrides`` still win over it.
    """
    dotted = {key.replace("__", "."): value for key, value in overrides.items()}
    if settings is None:
        return load_settings(root, dotted)
    return override_settings(settings, dotted)


def as_document(item: Document | Mapping[str, Any]) -> Document:
    """A :class:`~unirag.text.types.Document`, or a record ``{"text", "title"?, "id"?, "source"?}``
    (the shape of a JSONL line); a record's ``id`` is its key, as in a JSONL file."""
    if isinstance(item, Document):
        return item
    if not isinstance(item, Mapping) or not isinstance(item.get("text"), str):
        raise SourceError(f"a document must be a Document or a mapping with a 'text' string, not {item!r:.80}")
    meta = {"key": str(item["id"])} if item.get("id") is not None else {}
    return Document(str(item.get("title") or ""), item["text"], str(item.get("source") or ""), meta=meta)


@dataclass
class _QueryRun:
    """One query between its retrieval and its final call."""

    spec: MethodSpec
    runner: MethodRunner
    state: QueryState
    refreshed: dict[str, str]
    refresh_ledger: UsageLedger
    generated: bool = True  # an answer is asked for (not retrieve-only)


class UniRAG:
    """One workspace, its settings, its model clients and its loaded indices.

    ``UniRAG(workspace, settings=None, create=True, **overrides)``: ``create``
    makes the directory and its ``unirag.yaml`` when missing (else a missing
    workspace is an error); ``overrides`` as :func:`resolve_settings`
    (``chat={"base_url": ..., "model": ...}``, ``retrieval__top_k=8``,
    ``**{"graph.extractor": "nlp"}``). ``chat_backend`` / ``embedding_backend``
    replace the model backends the settings name (test doubles, a custom client);
    they still get the cache, retry and concurrency layers. ``stale_while_writing``: while
    another writer holds the workspace (an index job), answer from the artifacts already
    built instead of waiting for it (an artifact never built is still waited for).
    """

    def __init__(
        self,
        workspace: str | Path,
        *,
        settings: Settings | None = None,
        create: bool = True,
        chat_backend: ChatModel | None = None,
        embedding_backend: EmbeddingModel | None = None,
        stale_while_writing: bool = False,
        **overrides: Any,
    ) -> None:
        root = Path(workspace)
        resolved = resolve_settings(root, settings, overrides)  # its store names where the tables are
        opened = Workspace.init(root, store=resolved.store) if create else Workspace.open(root, resolved.store)
        self._setup(opened, resolved, None, chat_backend, embedding_backend, None)
        self.stale_while_writing = stale_while_writing

    @classmethod
    def attach(cls, workspace: Workspace, settings: Settings, stack: ModelStack | None = None,
               progress: Progress | None = None, note: Callable[[str], None] | None = None,
               warn: Callable[[str], None] | None = None) -> UniRAG:
        """Around a workspace, settings and model stack the caller already has (the CLI's
        commands; no stack: built on first use); ``progress`` shows bars for long steps,
        ``note`` gets one-line notices (a query waiting for another process's build), ``warn``
        the warnings of an index run (a file skipped) and of a damaged cache set aside.
        ``close()`` closes the workspace."""
        rag = cls.__new__(cls)
        rag._setup(workspace, settings, stack, None, None, progress)
        rag.note, rag.warn = note, warn
        return rag

    def _setup(self, workspace: Workspace, settings: Settings, stack: ModelStack | None,
               chat_backend: ChatModel | None, embedding_backend: EmbeddingModel | None,
               progress: Progress | None) -> None:
        self.workspace = workspace
        self.settings = settings
        self.progress = progress or Progress(enabled=False)
        self.note: Callable[[str], None] | None = None
        self.warn: Callable[[str], None] | None = None
        self._stack = stack
        self._backends = (chat_backend, embedding_backend)
        self.stale_while_writing = False
        self._runner: MethodRunner | None = None
        self._runner_manifest: dict[str, Any] | None = None  # the manifest the runner's indices were loaded at
        self._async: tuple[asyncio.AbstractEventLoop, AsyncChatStack] | None = None
        # One writer at a time (index, delete, a query's artifact refresh); the lazily built members have
        # their own lock, so a query never waits for a write to reach them.
        self._lock = threading.RLock()
        self._members = threading.RLock()

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def root(self) -> Path:
        return self.workspace.root

    @property
    def stack(self) -> ModelStack:
        """The layered model clients, built on first use (the embedded models load on their first call)."""
        with self._members:
            if self._stack is None:
                chat, embedder = self._backends
                self._stack = build_stack(self.settings, self.workspace.cache(), chat=chat, embedder=embedder)
            return self._stack

    def close(self) -> None:
        """Close the workspace and its cache. An async client is closed by :meth:`aclose` (on its loop)."""
        self._async = None
        self.workspace.close()

    async def aclose(self) -> None:
        """Close the async model client of the running loop, then as :meth:`close`."""
        if self._async is not None and self._async[0] is asyncio.get_running_loop():
            await self._async[1].aclose()
        self.close()

    def __enter__(self) -> UniRAG:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> UniRAG:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()

    # -- corpus ----------------------------------------------------------------------------------

    @staticmethod
    def plan(
        sources: str | Path | Sequence[str | Path] | None = None,
        *,
        graphs: str | Sequence[str] | None = None,
        indices: str | Sequence[str] | None = None,
        method: str | Sequence[str] | None = None,
        for_methods: str | Sequence[str] | None = None,
        fmt: str = "auto",
    ) -> IndexPlan:
        """Check an :meth:`index` request without a workspace: the format is known, every
        source exists, graph, index and method names resolve (one line on a mistake). A
        caller that creates the workspace (the CLI) checks first, so a typo creates nothing."""
        return plan_index(sources, fmt=fmt, graphs=graphs, indices=indices, method=_methods(method, for_methods))

    def estimate(
        self,
        sources: str | Path | Sequence[str | Path] | None = None,
        *,
        graphs: str | Sequence[str] | None = None,
        indices: str | Sequence[str] | None = None,
        method: str | Sequence[str] | None = None,
        for_methods: str | Sequence[str] | None = None,
        fmt: str = "auto",
        rebuild: bool = False,
    ) -> CostEstimate | None:
        """The LLM calls and prompt tokens :meth:`index` with the same arguments would spend on a
        paid chat endpoint, from the sources chunked in memory: no model call, nothing written.
        None when indexing calls no paid model (the embedded model, the zero-LLM path)."""
        return _estimate(self.workspace, self.settings, self._estimate_chat(), sources, graphs=graphs,
                         indices=indices, method=method, for_methods=for_methods, fmt=fmt, rebuild=rebuild)

    @classmethod
    def dry_run(
        cls,
        workspace: str | Path,
        sources: str | Path | Sequence[str | Path] | None = None,
        *,
        settings: Settings | None = None,
        **options: Any,
    ) -> CostEstimate | None:
        """:meth:`estimate` for a workspace that need not exist yet (``unirag index --dry-run``):
        nothing is created, not even its directory. ``options`` as :meth:`estimate`'s."""
        root = Path(workspace)
        resolved = resolve_settings(root, settings, {})
        if not Workspace.exists(root, resolved.store):
            return _estimate(None, resolved, backend_chat(resolved), sources, **options)
        with cls.attach(Workspace.open(root, resolved.store), resolved) as rag:
            return rag.estimate(sources, **options)

    def _estimate_chat(self) -> ChatModel:
        """The chat model an estimate names and counts prompts for. It makes no call, so it never
        builds the model stack (which opens the cache: a dry run writes nothing)."""
        if self._stack is not None:
            return self._stack.chat
        return self._backends[0] or backend_chat(self.settings)

    def index(
        self,
        sources: str | Path | Sequence[str | Path] | None = None,
        *,
        documents: Iterable[Document | Mapping[str, Any]] | None = None,
        graphs: str | Sequence[str] | None = None,
        indices: str | Sequence[str] | None = None,
        method: str | Sequence[str] | None = None,
        for_methods: str | Sequence[str] | None = None,
        fmt: str = "auto",
        sync: bool = False,
        rebuild: bool = False,
        estimate: CostEstimate | None = None,
    ) -> IndexReport:
        """Add files or directories (``sources``) and/or in-memory ``documents`` (Document objects
        or ``{"text", "title"?, "id"?}`` records), then build the chunk indices, the ``graphs``
        (``"kg,tree"`` or a list; default ``graph.graphs``), the ``indices`` (artifact names or
        aliases: ``"graphrag"``, ``["entity_vectors"]``, ``"all"``) and everything the methods
        ``for_methods`` need (``"archrag,hipporag2"`` or a list; ``method`` is its older alias).
        With neither sources nor documents, builds on the stored corpus. As ``unirag index``:
        resumable, unchanged input is a no-op, ``sync`` deletes documents of vanished files,
        ``rebuild`` re-chunks from scratch. ``estimate`` (from :meth:`estimate`, shown before the
        run) is stored with the run's actual usage (``stats()["last_index_cost"]``). Returns the
        report (``.to_json()`` as ``--json``)."""
        plan = plan_index(sources, fmt=fmt, graphs=graphs, indices=indices, method=_methods(method, for_methods))
        docs = [as_document(item) for item in documents] if documents is not None else None
        with self._lock:
            try:
                return run_index(self.workspace, plan.sources, self.settings, self.stack, fmt, self.progress,
                                 warn=self.warn, rebuild=rebuild, graphs=plan.graphs, artifacts=plan.artifacts,
                                 documents=docs, sync=sync, estimate=estimate)
            finally:
                self._runner = None  # the next query loads the new artifacts

    def delete(self, ids_or_sources: str | Sequence[str]) -> DeleteReport:
        """Delete documents (ids, indexed files or directories, ``FILE#RECORD``) with everything
        derived only from them, then refresh every built artifact. An unknown target changes nothing."""
        targets = [ids_or_sources] if isinstance(ids_or_sources, str) else list(ids_or_sources)
        with self._lock:
            try:
                return run_delete(self.workspace, targets, self.settings, self.stack, self.progress)
            finally:
                self._runner = None

    def documents(self) -> list[DocumentInfo]:
        """Every stored document, in the order added."""
        return [DocumentInfo.from_row(row) for row in self.workspace.corpus.documents()]

    def chunk(self, chunk_id: str) -> Chunk | None:
        """One stored passage by id (what a context item's source opens), or None."""
        return self.workspace.corpus.get_chunks([chunk_id]).get(chunk_id)

    def methods(self) -> list[MethodInfo]:
        """Every shipped method (a spec file path works too wherever a method is named)."""
        return [MethodInfo.from_spec(spec) for spec in builtin_methods().values()]

    def stats(self) -> dict[str, Any]:
        """What ``unirag stats --json`` prints: counts, graphs, communities, artifacts, usage
        (a damaged cache file is set aside, said through ``warn``)."""
        self.workspace.cache(self.warn)
        return workspace_stats(self.workspace)

    def export(self, graph: str, format: str = "graphml", out: str | Path | None = None) -> Path:
        """Write one graph type (kg, tkg, rkg, pg, tree, hybrid) as GraphML or Parquet; the path written."""
        return Path(export_graph(self.workspace, graph, format, Path(out) if out is not None else None))

    # -- built artifacts (what the server's graph pages read) -------------------------------------

    def graph_view(self, kind: str) -> GraphView:
        """The ``kind`` graph (kg, tkg, rkg, pg, hybrid, tree) as built; one line if it was not."""
        return load_view(self.workspace, kind)

    def built_version(self, artifact: str) -> tuple[dict[str, Any] | None, int]:
        """What identifies one build of ``artifact`` (its manifest entry, None if never built)
        on one corpus version: a view cached under it is current while this stays equal."""
        return self.workspace.manifest.entry(artifact), self.workspace.corpus.version()

    def artifact_problems(self, names: Iterable[str]) -> dict[str, str]:
        """Why each built artifact of ``names`` cannot be served as it is (behind the corpus,
        or damaged); artifacts never built are left out (a read of them fails on its own)."""
        manifest = self.workspace.manifest
        return {name: why for name in names
                if (why := manifest.artifact_problem(name)) is not None and why != "missing"}

    def hierarchies(self) -> list[str]:
        """The community hierarchies built in this workspace (graphrag, archrag, ...), sorted."""
        return sorted(name.split(":", 1)[1] for name in self.workspace.manifest.entries()
                      if name.startswith("communities:"))

    def communities(self, hierarchy: str) -> list[Community]:
        """Every community of a built ``hierarchy`` (:meth:`hierarchies`), every level."""
        return CommunityStore(self.workspace).load(hierarchy)

    def being_written(self) -> bool:
        """Whether a writer (this object, another one, another process) holds the workspace now."""
        return self.workspace.being_written()

    def passages(self) -> list[Chunk]:
        """Every stored passage, in corpus order."""
        return list(self.workspace.corpus.iter_chunks())

    def sibling(self, progress: Progress | None = None) -> UniRAG:
        """Another UniRAG on the same workspace with its own store connection, sharing this one's
        settings and model stack (the server's index jobs: writes that never block this reader)."""
        return UniRAG.attach(Workspace.open(self.root, self.settings.store), self.settings, self.stack, progress)

    # -- evaluation (``unirag eval``, ``unirag questions``) ----------------------------------------

    def prepare_eval(self, data: Dataset, specs: Sequence[MethodSpec]) -> dict[str, Any]:
        """Index a benchmark's passages and build what ``specs`` need (``built``: what was built)."""
        from unirag.eval.runner import prepare_workspace  # evaluation only: a query never loads eval

        with self._lock:
            try:
                return prepare_workspace(self.workspace, self.settings, self.stack, data, list(specs),
                                         self.progress, self._warned)
            finally:
                self._runner = None

    def answer_eval(self, plan: EvalPlan) -> EvalProgress:
        """Answer every pending question of ``plan`` with every method; rows go to ``plan.out``."""
        from unirag.eval.runner import answer_all  # evaluation only: a query never loads eval

        return answer_all(self.workspace, self.settings, self.stack, plan, self.progress, self._warned)

    def judge_eval(self, rows: Sequence[dict[str, Any]], modes: Sequence[str], out: Path, methods: Sequence[str],
                   **options: Any) -> dict[str, Any]:
        """LLM-judge an eval run's answer ``rows`` through this workspace's response cache
        (``options`` as :func:`~unirag.eval.judge.eval_run.judge_answers`: base_url, model, replicates)."""
        from unirag.eval.judge.eval_run import judge_answers  # evaluation only: a query never loads eval

        return judge_answers(self.settings, self.workspace.cache(), rows, modes, out, methods,
                             progress=self.progress, warn=self._warned, **options)

    def _warned(self, message: str) -> None:
        """``warn`` for callees that always say something: dropped when the caller gave none."""
        if self.warn is not None:
            self.warn(message)

    # -- queries ---------------------------------------------------------------------------------

    def query(self, question: str, method: str | MethodSpec | None = None, *, top_k: int | None = None,
              retrieve_only: bool = False, build: bool | None = None,
              history: Sequence[Mapping[str, Any]] = ()) -> QueryResult:
        """Answer ``question`` with ``method`` (a name, alias, spec file or spec; default the
        settings' ``method``, ``vanilla``). ``top_k``: items per retrieval operator for this
        query; ``retrieve_only``: the context without an answer. Missing or stale artifacts are
        built first when that is free (``build=None``, the default: the zero-LLM path, the
        embedded model); a build that would call a paid chat endpoint raises
        :class:`~unirag.errors.PaidBuildError` (one line with its estimate) unless
        ``build=True``; ``build=False`` refuses any build (one line). ``history``: the earlier
        messages of a chat (``{"role": "user"|"assistant", "content": ...}``, oldest first):
        the question is made self-contained from them first (:mod:`unirag.generate.standalone`;
        ``result.asked`` keeps it as asked, ``result.question`` is what retrieval read)."""
        return _last(self._events(question, method, top_k, retrieve_only, build, streamed=False, history=history))

    def stream(self, question: str, method: str | MethodSpec | None = None, *, top_k: int | None = None,
               retrieve_only: bool = False, build: bool | None = None,
               history: Sequence[Mapping[str, Any]] = ()) -> Iterator[QueryEvent]:
        """As :meth:`query`, yielding :class:`AnswerDelta` events as the final model call
        generates, then one :class:`QueryDone` with the result. The deltas concatenate to
        ``result.raw_answer`` (the model's text; ``result.answer`` is read from it), or to
        ``result.answer`` when no call was needed (the no-data answer of map-reduce)."""
        return self._events(question, method, top_k, retrieve_only, build, streamed=True, history=history)

    def _events(self, question: str, method: str | MethodSpec | None, top_k: int | None, retrieve_only: bool,
                build: bool | None, streamed: bool, history: Sequence[Mapping[str, Any]] = ()) -> Iterator[QueryEvent]:
        run = self._begin(question, method, top_k, build, not retrieve_only, history)
        answer = raw = ""
        if not retrieve_only:
            tick = time.perf_counter()
            plan = run.runner.plan(run.state, run.spec)
            if plan.request is None or not streamed:
                answer, raw = plan.complete(run.state.models.chat)
                if streamed and answer:
                    yield AnswerDelta(answer)
            else:
                for event in stream_chat(run.state.models.chat, plan.request):
                    if isinstance(event, ChatResponse):
                        answer, raw = plan.finish(event.text)
                    else:
                        yield AnswerDelta(event)
            run.state.timings["generate"] = time.perf_counter() - tick
        yield QueryDone(self._finish(run, answer, raw))

    def _begin(self, question: str, method: str | MethodSpec | None, top_k: int | None, build: bool | None,
               generated: bool = True, history: Sequence[Mapping[str, Any]] = ()) -> _QueryRun:
        """Check the question, resolve the method, bring what it needs up to date, retrieve."""
        question = check_question(question, self.settings)  # before any build a refused question would pay for
        spec = method if isinstance(method, MethodSpec) else resolve_method(method or self.settings.method)
        refresh = UsageLedger()
        behind: dict[str, str] = {}
        with self._lock:
            as_is = self._answer_as_is(spec.requires())
            if as_is is not None:
                refreshed: dict[str, str] = {}
                behind = as_is
            else:
                refreshed = prepare_query(self.workspace, self.settings, self.stack, spec.requires(), self.progress,
                                          build=build, ledger=refresh, note=self.note, method=spec.name)
                manifest = self.workspace.manifest.entries()
                if refreshed or manifest != self._runner_manifest:  # another writer may have rebuilt them
                    self._runner, self._runner_manifest = None, manifest
            runner = self._runner_for(top_k)
        state = runner.retrieve(spec, question, history)
        if behind:  # never answer from an older corpus without saying so
            state.warnings.append(
                "answered while an indexing job updates the workspace, from artifacts built on an older corpus: "
                + ", ".join(f"{name} ({why})" for name, why in sorted(behind.items())))
        return _QueryRun(spec, runner, state, refreshed, refresh, generated)

    def _answer_as_is(self, names: list[str]) -> dict[str, str] | None:
        """With ``stale_while_writing``: another writer is at work and every artifact the
        query needs was built once, so it answers from them as they are (the loaded ones
        stay loaded until the writer is done) instead of waiting for the writer. Returns
        the artifacts that are behind the corpus (the answer says so), or None to wait."""
        if not self.stale_while_writing or not self.workspace.being_written():
            return None
        behind = outdated(self.workspace, names)
        return None if any(why == "missing" for why in behind.values()) else behind

    def _runner_for(self, top_k: int | None) -> MethodRunner:
        """The shared runner (its indices load once), or one with another ``top_k`` sharing them."""
        with self._members:
            if self._runner is None:
                self._runner = MethodRunner(self.workspace, self.settings, self.stack, self.progress)
            if top_k is None or top_k == self.settings.retrieval.top_k:
                return self._runner
            settings = override_settings(self.settings, {"retrieval.top_k": top_k})
            return MethodRunner(self.workspace, settings, self.stack, self.progress, self._runner.resources)

    def _finish(self, run: _QueryRun, answer: str, raw: str) -> QueryResult:
        result = run.runner.result(run.state, run.spec, answer, raw, generated=run.generated)
        result.refreshed, result.refresh_ledger = run.refreshed, run.refresh_ledger
        self.workspace.usage.record(f"query:{run.spec.name}", result.ledger)  # its own connection and lock
        return result

    # -- async twins -----------------------------------------------------------------------------

    async def aindex(self, sources: str | Path | Sequence[str | Path] | None = None, **options: Any) -> IndexReport:
        """:meth:`index` in a worker thread (its options too)."""
        return await asyncio.to_thread(lambda: self.index(sources, **options))

    async def adelete(self, ids_or_sources: str | Sequence[str]) -> DeleteReport:
        """:meth:`delete` in a worker thread."""
        return await asyncio.to_thread(self.delete, ids_or_sources)

    async def aquery(self, question: str, method: str | MethodSpec | None = None, *, top_k: int | None = None,
                     retrieve_only: bool = False, build: bool | None = None,
                     history: Sequence[Mapping[str, Any]] = ()) -> QueryResult:
        """:meth:`query` without blocking the loop (module docstring: what runs where)."""
        events = self._aevents(question, method, top_k, retrieve_only, build, streamed=False, history=history)
        return _last([event async for event in events])

    def astream(self, question: str, method: str | MethodSpec | None = None, *, top_k: int | None = None,
                retrieve_only: bool = False, build: bool | None = None,
                history: Sequence[Mapping[str, Any]] = ()) -> AsyncIterator[QueryEvent]:
        """:meth:`stream` as an async iterator: ``async for event in rag.astream(q): ...``."""
        return self._aevents(question, method, top_k, retrieve_only, build, streamed=True, history=history)

    async def _aevents(self, question: str, method: str | MethodSpec | None, top_k: int | None,
                       retrieve_only: bool, build: bool | None, streamed: bool,
                       history: Sequence[Mapping[str, Any]] = ()) -> AsyncIterator[QueryEvent]:
        run = await asyncio.to_thread(self._begin, question, method, top_k, build, not retrieve_only, history)
        answer = raw = ""
        if not retrieve_only:
            tick = time.perf_counter()
            plan: AnswerPlan = await asyncio.to_thread(run.runner.plan, run.state, run.spec)
            if plan.request is None:
                answer, raw = plan.finish("")
                if streamed and answer:
                    yield AnswerDelta(answer)
            else:
                chat = AsyncAccountedChat(self._async_chat().chat, run.state.models.ledger)
                if not streamed:
                    answer, raw = plan.finish((await chat.acomplete(plan.request)).text)
                else:
                    async for event in chat.astream(plan.request):
                        if isinstance(event, ChatResponse):
                            answer, raw = plan.finish(event.text)
                        else:
                            yield AnswerDelta(event)
            run.state.timings["generate"] = time.perf_counter() - tick
        yield QueryDone(await asyncio.to_thread(self._finish, run, answer, raw))

    def _async_chat(self) -> AsyncChatStack:
        """The async chat stack of the running loop (its HTTP client and semaphore belong to it)."""
        loop = asyncio.get_running_loop()
        with self._members:
            if self._async is None or self._async[0] is not loop:
                backend = self.stack.backend
                if backend is None:  # a stack assembled by hand: its layered chat, in worker threads
                    self._async = (loop, build_async_chat(self.settings, None, self.stack.chat))
                else:
                    self._async = (loop, build_async_chat(self.settings, self.workspace.cache(), backend))
            return self._async[1]


def _estimate(workspace: Workspace | None, settings: Settings, chat: ChatModel,
              sources: str | Path | Sequence[str | Path] | None, *, graphs: str | Sequence[str] | None = None,
              indices: str | Sequence[str] | None = None, method: str | Sequence[str] | None = None,
              for_methods: str | Sequence[str] | None = None, fmt: str = "auto",
              rebuild: bool = False) -> CostEstimate | None:
    """The estimate of an index request on ``workspace`` (None: one not created yet)."""
    plan = plan_index(sources, fmt=fmt, graphs=graphs, indices=indices, method=_methods(method, for_methods))
    return estimate_plan(workspace, plan, settings, chat, fmt, rebuild)


def _methods(method: str | Sequence[str] | None, for_methods: str | Sequence[str] | None) -> list[str]:
    """The methods an index call builds for: ``for_methods`` and its older alias ``method``, together."""
    names: list[str] = []
    for given in (method, for_methods):
        names += [given] if isinstance(given, str) else list(given or [])
    return names


def _last(events: Iterable[QueryEvent]) -> QueryResult:
    """The result carried by the final :class:`QueryDone` of a query's events."""
    done = None
    for event in events:
        done = event
    if not isinstance(done, QueryDone):
        raise RuntimeError("a query ended without its result")
    return done.result
