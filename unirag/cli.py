"""Command-line interface (typer): init, index, query, methods, stats, eval, eval-report, questions, export, serve, mcp.

The package's light modules (errors, progress, store locations, the API's event
types: standard library only) are imported at the top; every other ``unirag``
module is imported inside the command that needs it, the one place in the
package that defers its own imports: together they load pydantic, numpy and
YAML and would make ``unirag --help`` several times slower.
Every :class:`UniragError` becomes one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from unirag.api_types import QueryDone
from unirag.errors import PaidBuildError, SourceError, UniragError
from unirag.progress import Progress
from unirag.store.location import PASSWORD_ENV, STORE_FILE, without_password

if TYPE_CHECKING:
    from unirag.llm.base import UsageLedger

F = TypeVar("F", bound=Callable[..., Any])

# Plain click help (rich_markup_mode=None): rich's type column shows "<bool>" beside every flag.
app = typer.Typer(
    name="unirag",
    help="Graph-based RAG methods in one framework: index a corpus, ask questions, compare methods.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
methods_app = typer.Typer(help="List or explain the available methods.", invoke_without_command=True,
                          rich_markup_mode=None)
#: Every input format (``unirag.text.loaders.FORMATS``, checked by a test), spelled out here so
#: ``--help`` needs no import of the loaders.
INDEX_FORMATS_HELP = "input format: auto|text|jsonl|json|hotpotqa|musique|2wiki|pdf|html|docx|csv"
LOG_FILE = Path("logs") / "unirag.log"
app.add_typer(methods_app, name="methods")

WorkspaceOpt = Annotated[
    Path, typer.Option("--workspace", "-w", envvar="UNIRAG_WORKSPACE", help="workspace directory", show_default=False)
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]
CompareOpt = Annotated[str | None, typer.Option("--compare-to", help="baseline method: paired per-question "
                                                "differences with bootstrap 95% CIs (comparison.csv)")]
StoreOpt = Annotated[
    str | None, typer.Option("--store", help="where the tables live: sqlite (default) or "
                                             "postgresql://user@host:port/db[?schema=NAME] (setting: store)")
]
ChatUrlOpt = Annotated[str | None, typer.Option("--chat-base-url", help="OpenAI-compatible chat endpoint")]
ChatModelOpt = Annotated[str | None, typer.Option("--chat-model", help="chat model name")]
EmbUrlOpt = Annotated[str | None, typer.Option("--embedding-base-url", help="OpenAI-compatible embedding endpoint")]
EmbModelOpt = Annotated[str | None, typer.Option("--embedding-model", help="embedding model name")]
ConcurrencyOpt = Annotated[int | None, typer.Option("--concurrency", help="parallel model calls at most")]


def _err(message: str) -> None:
    print(f"unirag: {message}", file=sys.stderr)
    logging.getLogger("unirag").info(message)


def _warn(message: str) -> None:
    _err(f"warning: {message}")


def _warn_cut_replies(ledger: UsageLedger, time_limit: float | None = None) -> None:
    """Say when replies were cut, with the advice that fits why: max_tokens or the window
    (raise them), the embedded model's time limit (raise it), or its rambling (a bigger
    max_tokens would only buy more of it: a real model is the fix)."""
    limit = f" of {time_limit:g} s" if time_limit else ""
    for field, what, advice in (
        ("cut_replies", "were cut short at max_tokens or the context window",
         "raise chat.max_tokens or chat.context_window if answers look incomplete"),
        ("timed_out_replies", f"were cut at the embedded model's time limit{limit}",
         "raise chat.embedded_time_limit (UNIRAG_CHAT_EMBEDDED_TIME_LIMIT) on a busy machine, "
         "or point chat.base_url at a faster model"),
        ("rambling_replies", "were stopped where the small offline model began to ramble "
         "(repeating itself or inventing sources); the text before is kept",
         "for real answers point chat.base_url at a real model"),
    ):
        cut = {stage: getattr(usage, field) for stage, usage in sorted(ledger.stages.items()) if getattr(usage, field)}
        if cut:
            where = ", ".join(f"{stage}: {count}" for stage, count in cut.items())
            _warn(f"{sum(cut.values())} model replies {what} ({where}); {advice}")
    sanitised = sum(usage.sanitised_replies for usage in ledger.stages.values())
    if sanitised:
        _warn(f"{sanitised} model replies held invalid characters (lone surrogates), replaced by U+FFFD")


def _handle_errors(fn: F) -> F:
    """One line on stderr and a non-zero exit for user-facing errors."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UniragError as exc:
            _err(f"error: {exc}")
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            _err("interrupted: finished work is saved; run the same command again to resume")
            raise typer.Exit(130) from None
        except Exception as exc:
            failure = _store_failure(exc)
            if failure is None:
                raise
            _err(f"error: {failure}")
            raise typer.Exit(failure.exit_code) from None
        finally:
            _stop_log()

    return wrapper  # type: ignore[return-value]


def _store_failure(exc: Exception) -> UniragError | None:
    """A store server lost mid-job (wherever its client said so: a worker thread, a lock,
    a bulk copy) as the store's one line; None for anything else."""
    from unirag.store.connect import store_failure

    return store_failure(exc)


def _remember_store(workspace: Path, store: str | None) -> None:
    """Write ``--store`` into the workspace's settings file when the file names no store yet
    and the directory holds no SQLite store (a workspace this command created), so that every later command finds its tables; never a password (a
    note says where libpq reads it from instead)."""
    from unirag.config import SETTINGS_FILE, environment, read_settings_file
    from unirag.artifacts.settings_template import settings_yaml, with_store

    path = workspace / SETTINGS_FILE
    if not store or (workspace / STORE_FILE).exists() or read_settings_file(path, environment(workspace)).get("store"):
        return  # a SQLite workspace, or one whose file names its store: the file stays as the user wrote it
    kept, had_password = without_password(store)
    text = path.read_text(encoding="utf-8") if path.is_file() else settings_yaml()
    path.write_text(with_store(text, kept), encoding="utf-8")
    if had_password:
        _password_kept_out(path)


def _password_kept_out(path: Path) -> None:
    _warn(f"the store's password was not written to {path}: set {PASSWORD_ENV} (or ~/.pgpass) for the "
          "commands that use this workspace")


def _stop_log() -> None:
    """Close this command's log handlers (tests run many commands in one process)."""
    logger = logging.getLogger("unirag")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


def _settings(workspace: Path | None, log: bool = True, **flags: Any) -> Any:
    """The command's settings; ``log=False`` leaves the workspace's log file alone (``--dry-run``)."""
    from unirag.config import load_settings

    if workspace is not None and log:
        _start_log(workspace)
    settings = load_settings(workspace, {key.replace("__", "."): value for key, value in flags.items()})
    logging.getLogger("unirag").info("chat model: %s", settings.chat.describe())
    return settings


def _start_log(workspace: Path) -> None:
    """Append this command's messages to ``WORKSPACE/logs/unirag.log`` (a workspace that exists).

    What is logged is what the user saw on stderr (warnings, retry lines, errors) and the
    chat model's name and host: never a key (messages are redacted where they are made)."""
    logger = logging.getLogger("unirag")
    path = workspace / LOG_FILE
    if not workspace.is_dir() or any(getattr(h, "baseFilename", None) == str(path.resolve())
                                     for h in logger.handlers):
        return
    path.parent.mkdir(exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(min(logger.level or logging.INFO, logging.INFO))
    logger.info("unirag %s", " ".join(sys.argv[1:2]))  # the command's name only: its arguments may hold text


def _stack(settings: Any, workspace: Any) -> Any:
    from unirag.llm.factory import build_stack

    return build_stack(settings, workspace.cache(_warn), on_retry=_err)


def _attached(ws: Any, settings: Any, progress: Any = None, note: Callable[[str], None] | None = None) -> Any:
    """The command's :class:`~unirag.api.UniRAG` around the workspace it opened, with the CLI's
    model stack (cache warnings and retry lines on stderr), progress, notices and warnings.
    Closing it closes the workspace; so does a failure to build the stack."""
    from unirag.api import UniRAG

    try:
        return UniRAG.attach(ws, settings, _stack(settings, ws), progress, note=note, warn=_warn)
    except BaseException:
        ws.close()
        raise


def _opened(workspace: Path, settings: Any = None) -> Any:
    """A :class:`~unirag.api.UniRAG` over an existing workspace for a command that calls no
    model (its stack is never built): the command's settings, else the workspace's own."""
    from unirag.api import UniRAG, resolve_settings
    from unirag.workspace import Workspace

    settings = settings if settings is not None else resolve_settings(workspace, None, {})
    return UniRAG.attach(Workspace.open(workspace, settings.store), settings, warn=_warn)


def _show_progress(quiet: bool) -> Any:
    """Bars on an interactive stderr; logs and pipes get a plain line every few seconds of a long step."""
    return Progress(enabled=not quiet, lines=not sys.stderr.isatty())


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="print the version and exit")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="log what happens on stderr (also kept in "
                                                                  "WORKSPACE/logs/unirag.log)")] = False,
) -> None:
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("unirag: log: %(message)s"))
        logger = logging.getLogger("unirag")
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    if version:
        from unirag import __version__

        print(__version__)
        raise typer.Exit(0)


@app.command()
@_handle_errors
def init(directory: Annotated[Path, typer.Argument(help="workspace directory to create")],
         store: StoreOpt = None) -> None:
    """Create a workspace with a settings file (unirag.yaml) listing every setting with its default
    (``--store``: written into it, and the tables created there)."""
    from unirag.config import SETTINGS_FILE
    from unirag.artifacts.settings_template import settings_yaml, with_store
    from unirag.workspace import Workspace

    kept, had_password = without_password(store) if store else (store, False)
    ws = Workspace.init(directory, with_store(settings_yaml(), kept), store=store)
    if had_password:
        _password_kept_out(directory / SETTINGS_FILE)
    where = ws.where
    ws.close()
    print(f"workspace ready: {directory} (settings in {directory / SETTINGS_FILE}"
          + (f"; tables in {where})" if store else ")"))


@app.command()
@_handle_errors
def index(
    workspace: WorkspaceOpt,
    sources: Annotated[
        list[Path] | None,
        typer.Argument(help="files or directories to add (none: build on the corpus already indexed)",
                       show_default=False),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help=INDEX_FORMATS_HELP)] = "auto",
    chunk_size: Annotated[int | None, typer.Option("--chunk-size", help="tokens per chunk")] = None,
    chunk_overlap: Annotated[int | None, typer.Option("--chunk-overlap", help="overlapping tokens")] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="re-chunk from scratch (caches are kept)")] = False,
    sync: Annotated[
        bool, typer.Option("--sync", help="also delete the documents of files gone from the given directories")
    ] = False,
    graph: Annotated[
        str | None, typer.Option("--graph", "-g", help="graphs to build: kg,tkg,rkg,pg,tree,hybrid or all")
    ] = None,
    build: Annotated[
        str | None,
        typer.Option("--index", "-i", help="indices to build, e.g. entity_vectors,graphrag,archrag,chnsw,hygrag,"
                                           "leanrag,chunk_tfidf or all (see 'unirag stats')"),
    ] = None,
    for_methods: Annotated[
        str | None, typer.Option("--for", help="also build everything these methods (names or .yaml, comma-"
                                               "separated) need: graphs, indices, hierarchies")
    ] = None,
    method: Annotated[
        str | None, typer.Option("--method", "-m", help="as --for (one method)")
    ] = None,
    extractor: Annotated[str | None, typer.Option("--extractor", help="entity extractor: llm | nlp")] = None,
    gleaning: Annotated[int | None, typer.Option("--gleaning", help="extra extraction passes (llm)")] = None,
    claims: Annotated[bool | None, typer.Option("--claims/--no-claims", help="extract claims (llm)")] = None,
    chat_base_url: ChatUrlOpt = None,
    chat_model: ChatModelOpt = None,
    embedding_base_url: EmbUrlOpt = None,
    embedding_model: EmbModelOpt = None,
    concurrency: ConcurrencyOpt = None,
    executor: Annotated[
        str | None, typer.Option("--executor", help="who runs the work: local | ray (pip install 'unirag[ray]')")
    ] = None,
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="Ray cluster to join (default: RAY_ADDRESS, else a local one)")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask before paid model calls")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the estimate of LLM calls and prompt tokens "
                                                            "only; change nothing")] = False,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Load, chunk, embed and index SOURCES into the workspace, then build the
    requested graphs and indices (resumable; unchanged input is a no-op).

    With a remote chat endpoint, first prints an estimate of the LLM calls and prompt
    tokens and, on a terminal, asks before going on (--yes: never asks)."""
    from unirag.api import UniRAG
    from unirag.workspace import Workspace

    request = {"graphs": graph, "indices": build, "method": method, "for_methods": for_methods, "fmt": fmt}
    UniRAG.plan(sources, **request)  # a mistake is one line before anything is created
    settings = _settings(
        workspace,
        log=not dry_run,
        chunking__size=chunk_size,
        chunking__overlap=chunk_overlap,
        embedding__base_url=embedding_base_url,
        embedding__model=embedding_model,
        concurrency=concurrency,
        executor=executor,
        ray__address=ray_address,
        graph__extractor=extractor,
        graph__gleaning=gleaning,
        graph__claims=claims,
        chat__base_url=chat_base_url,
        chat__model=chat_model,
        store=store,
    )
    if not sources and not Workspace.exists(workspace, settings.store):
        raise SourceError(f"{workspace} has no corpus yet: give the files or directories to index")
    if dry_run:
        estimate = UniRAG.dry_run(workspace, sources, settings=settings, rebuild=rebuild, **request)
        _print_dry_run(estimate, settings, as_json)
        return
    ws = Workspace.init(workspace, store=settings.store)  # only once sources and settings are known to be valid
    _remember_store(workspace, store)
    _start_log(workspace)
    with _attached(ws, settings, _show_progress(quiet)) as rag:
        estimate = rag.estimate(sources, rebuild=rebuild, **request)
        if estimate is not None:
            _confirm_cost(estimate, yes)
        report = rag.index(sources, rebuild=rebuild, sync=sync, estimate=estimate, **request)
    _warn_cut_replies(report.ledger, settings.chat.embedded_time_limit)
    data = {**report.to_json(), "chat_model": settings.chat.describe()}
    if as_json:
        print(json.dumps(data, indent=2))
        return
    print(
        f"indexed {data['documents_added']} new documents ({data['chunks_added']} chunks); "
        f"{data['already_indexed']} already indexed; {data['duplicates_skipped']} duplicates skipped"
        + (f"; removed {data['documents_removed']} old or vanished documents ({data['chunks_removed']} chunks)"
           if data["documents_removed"] else "")
    )
    print(
        f"model calls: {data['llm_calls']} LLM, {data['embedding_calls']} embedding; "
        f"rebuilt: {', '.join(data['rebuilt']) or 'nothing (up to date)'}"
    )
    print(f"chat model: {settings.chat.describe()}")


def _stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


def _confirm_cost(estimate: Any, yes: bool) -> None:
    """Say the estimate (stderr); on a terminal, ask before paid calls unless ``--yes``.
    Off a terminal (scripts, CI) never ask: the line is said and the run goes on."""
    if not estimate.calls:
        return
    _err(estimate.line())
    if yes or not _stdin_is_terminal():
        return
    if not typer.confirm("unirag: go on with these model calls?", default=False, err=True):
        _err("cancelled: nothing was indexed or built (--yes skips this question, --dry-run only estimates)")
        raise typer.Exit(1)


def _print_dry_run(estimate: Any, settings: Any, as_json: bool) -> None:
    """``index --dry-run``: the estimate (None: no paid calls) on stdout."""
    if estimate is None:
        data: dict[str, Any] = {"estimate": None, "chat_model": settings.chat.describe()}
        message = (f"no paid model calls: indexing uses {settings.chat.describe()} (free), nothing to estimate; "
                   "nothing was changed")
    else:
        data = {"estimate": estimate.to_json(), "chat_model": settings.chat.describe()}
        message = f"{estimate.line()}; dry run: nothing was changed"
    print(json.dumps(data, indent=2) if as_json else message)


@app.command()
@_handle_errors
def query(
    question: Annotated[str, typer.Argument(help="the question", show_default=False)],
    workspace: WorkspaceOpt,
    method: Annotated[
        str | None, typer.Option("--method", "-m", help="method name or path to a method .yaml")
    ] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="items per retrieval operator")] = None,
    chat_base_url: ChatUrlOpt = None,
    chat_model: ChatModelOpt = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", help="answer length cap")] = None,
    retrieve_only: Annotated[
        bool, typer.Option("--retrieve-only", help="stop after retrieval: context without an answer")
    ] = False,
    no_build: Annotated[
        bool, typer.Option("--no-build", help="fail instead of building missing or stale artifacts first")
    ] = False,
    build: Annotated[
        bool, typer.Option("--build", help="build what the method needs even when that calls a paid chat model "
                                           "(without it: asked on a terminal, refused off one)")
    ] = False,
    stream: Annotated[
        bool, typer.Option("--stream", help="print the answer as it is generated (with --json: one JSON "
                                            "event per line)")
    ] = False,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer QUESTION with a method over the workspace; show the answer and its sources.

    Artifacts the method needs that are missing, or built on an older corpus, are
    brought up to date first (and said so); ``--no-build`` refuses instead. A build that
    would call a paid chat model asks first on a terminal (with its estimate) and is
    refused off one unless ``--build``."""
    from unirag.methods.spec import resolve_method
    from unirag.workspace import Workspace

    settings = _settings(
        workspace, retrieval__top_k=top_k, chat__base_url=chat_base_url, chat__model=chat_model,
        chat__max_tokens=max_tokens, method=method, store=store,
    )
    spec = resolve_method(settings.method)
    allowed: bool | None = False if no_build else (True if build else None)
    with _attached(Workspace.open(workspace, settings.store), settings, _show_progress(as_json), note=_err) as rag:
        try:
            result = _ask(rag, question, spec, allowed, stream, retrieve_only, as_json)
        except PaidBuildError as refused:
            if not _stdin_is_terminal():
                raise UniragError(f"{refused.summary}: add --build to build it (or build first with "
                                  f"'unirag index -w {workspace} --for {spec.name}')") from None
            if not typer.confirm(f"unirag: {refused.summary}; continue?", default=False, err=True):
                _err("cancelled: nothing was built")
                raise typer.Exit(1) from None
            result = _ask(rag, question, spec, True, stream, retrieve_only, as_json)
    if result.refreshed and result.refresh_ledger is not None:
        total = result.refresh_ledger.total()
        _err(f"brought what {spec.name} needs up to date first: "
             + "; ".join(f"{name} ({why})" for name, why in result.refreshed.items())
             + f" — {total.llm_calls} LLM calls ({total.cache_hits} cached), {total.embedding_calls} embedding calls")
    _warn_cut_replies(result.ledger, settings.chat.embedded_time_limit)
    for warning in result.warnings:
        _warn(warning)
    if as_json:
        if not stream or retrieve_only:
            print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
        return
    _print_answer(result, spec.title, settings, retrieve_only, answer_shown=stream)


def _ask(rag: Any, question: str, spec: Any, build: bool | None, stream: bool, retrieve_only: bool,
         as_json: bool) -> Any:
    """One query, streamed or not; ``build`` as :meth:`UniRAG.query`'s."""
    if stream and not retrieve_only:
        return _print_stream(rag.stream(question, spec, build=build), spec.title, as_json)
    return rag.query(question, spec, retrieve_only=retrieve_only, build=build)


def _print_stream(events: Iterable[Any], title: str, as_json: bool) -> Any:
    """Print a streamed answer as it comes; return the final result.

    Human output: the answer line grows chunk by chunk (the model's own text; the
    final ``Answer:`` line is not cut out of it). ``--json``: one line per event,
    ``{"event": "delta" | "done", "data": ...}`` (the server's SSE events, one to one).
    """
    if not as_json:
        sys.stdout.write(f"Answer ({title}): ")
    result = None
    for event in events:
        if as_json:
            print(json.dumps({"event": event.event, "data": event.to_json()}, ensure_ascii=False), flush=True)
        elif not isinstance(event, QueryDone):
            sys.stdout.write(event.text)
            sys.stdout.flush()
        if isinstance(event, QueryDone):
            result = event.result
    if not as_json:
        sys.stdout.write("\n")
    return result


def _print_answer(result: Any, title: str, settings: Any, retrieve_only: bool, answer_shown: bool) -> None:
    """The human output of ``query``: answer (unless streamed already), sources, usage."""
    from rich.console import Console

    console = Console()
    if not retrieve_only and not answer_shown:
        console.print(f"[bold]Answer[/bold] ({title}): {result.answer}")
    if result.context:
        console.print("[bold]Sources[/bold]")
        for number, item in enumerate(result.context, start=1):
            snippet = " ".join(item.text.split())[:160]
            console.print(f"  [{number}] {item.source} ({item.kind}, score {item.score:.3f}): {snippet}", markup=False)
    if settings.chat.resolved_provider == "embedded" and not retrieve_only:
        _err(
            "note: answered by the embedded SmolLM2-135M, which only proves the pipeline runs; "
            "set UNIRAG_CHAT_BASE_URL and UNIRAG_CHAT_MODEL for a real model"
        )
    usage = result.usage()
    console.print(
        f"[dim]{usage['llm_calls']} LLM calls ({usage['cache_hits']} cached), {usage['prompt_tokens']} prompt + "
        f"{usage['completion_tokens']} completion tokens, {result.timings['total']:.2f} s[/dim]"
    )


@app.command()
@_handle_errors
def documents(workspace: WorkspaceOpt, as_json: JsonOpt = False) -> None:
    """List the workspace's documents: id, chunks, when added, and where each came from."""
    with _opened(workspace) as rag:
        docs = rag.documents()
    if as_json:
        print(json.dumps([doc.to_json() for doc in docs], ensure_ascii=False, indent=2))
        return
    for doc in docs:
        sources = ", ".join(doc.sources) or "(no source)"
        title = f" {doc.title!r}" if doc.title else ""
        print(f"{doc.id}{title}  {doc.chunks} chunks  added {doc.added}  {sources}")
    print(f"{len(docs)} documents")


@app.command()
@_handle_errors
def delete(
    targets: Annotated[
        list[str], typer.Argument(help="document ids, indexed files or directories, FILE#RECORD_ID, "
                                       "or server uploads (upload:NAME, upload:COLLECTION)",
                                  show_default=False)
    ],
    workspace: WorkspaceOpt,
    chat_base_url: ChatUrlOpt = None,
    chat_model: ChatModelOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete documents with their chunks and everything derived only from them, then
    refresh every built graph, index and hierarchy (unchanged summaries come from the cache)."""
    from unirag.workspace import Workspace

    settings = _settings(workspace, chat__base_url=chat_base_url, chat__model=chat_model)
    with _attached(Workspace.open(workspace, settings.store), settings, _show_progress(quiet)) as rag:
        report = rag.delete(targets)
    data = report.to_json()
    if as_json:
        print(json.dumps(data, indent=2))
        return
    print(f"deleted {data['documents_removed']} documents ({data['chunks_removed']} chunks)")
    if report.finished:
        print(f"finished the interrupted delete of {', '.join(report.finished)}: its documents were already "
              "deleted, the artifacts are now refreshed")
    print(f"model calls: {data['llm_calls']} LLM, {data['embedding_calls']} embedding; "
          f"refreshed: {', '.join(data['rebuilt']) or 'nothing'}")


@methods_app.callback()
@_handle_errors
def methods_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List every method with its operator pipeline and required artifacts."""
    if ctx.invoked_subcommand is not None:
        return
    from unirag.methods.spec import builtin_methods

    specs = builtin_methods()
    if as_json:
        print(json.dumps([spec.to_json() for spec in specs.values()], indent=2))
        return
    name_width = max(len(spec.name) for spec in specs.values())
    title_width = max(len(spec.title) for spec in specs.values())
    for spec in specs.values():
        print(f"{spec.name:<{name_width}}  {spec.title:<{title_width}}  {spec.to_json()['pipeline']}")


@methods_app.command("show")
@_handle_errors
def methods_show(name: Annotated[str, typer.Argument(help="method name or spec path")], as_json: JsonOpt = False) -> None:
    """Explain one method: source, conversions, operators, generation, artifacts."""
    from unirag.methods.spec import RepeatBlock, resolve_method
    from unirag.operators.registry import operator_registry

    spec = resolve_method(name)
    data = spec.to_json()
    if as_json:
        print(json.dumps(data, indent=2))
        return
    registry = operator_registry()
    print(f"{spec.title} ({spec.name}) — {spec.description}")
    print(f"source: {spec.source}")
    print(f"pipeline: {data['pipeline']}")
    for step in spec.operators:
        if isinstance(step, RepeatBlock):
            stop = f", stopping early when the LLM answers YES to prompt '{step.repeat.until}'" if step.repeat.until else ""
            print(f"  repeat up to {step.repeat.rounds} rounds{stop}:")
        indent = "    " if isinstance(step, RepeatBlock) else "  "
        for call in step.calls():
            print(f"{indent}{call.op}: {registry[call.op].summary} {call.params or ''}")
    print(f"generation: {spec.generation.mode}, prompt '{spec.generation.prompt}'")
    print(f"requires: {', '.join(data['requires']) or 'nothing (no retrieval)'}")


@app.command()
@_handle_errors
def migrate(
    workspace: WorkspaceOpt,
    to: Annotated[str, typer.Option("--to", help="the store to copy into: sqlite or postgresql://user@host:port/db"
                                                 "[?schema=NAME]", show_default=False)],
    source: Annotated[str | None, typer.Option("--from", help="the store to copy from (default: the "
                                                               "workspace's store setting)")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="empty a target that already holds a workspace "
                                                            "(a SQLite file is moved aside)")] = False,
) -> None:
    """Copy the workspace into another store (tables, model cache, artifact files, vector
    indices), verify counts and fingerprints, and switch its settings to the new store.
    The old store is left as it was."""
    from unirag.migrate import migrate_workspace

    _start_log(workspace)
    report = migrate_workspace(workspace, to, source=source, replace=replace, say=print)
    print(f"migrated {workspace} to {report.target}; its settings now name that store")


@app.command()
@_handle_errors
def stats(workspace: WorkspaceOpt, as_json: JsonOpt = False) -> None:
    """Counts of documents and chunks, graphs, communities per level, artifacts, and usage per stage."""
    settings = _settings(workspace)
    with _opened(workspace, settings) as rag:  # a damaged cache file is set aside with a warning line
        data = {**rag.stats(), "workspace": str(workspace), "chat_model": settings.chat.describe()}
    if as_json:
        print(json.dumps(data, indent=2))
        return
    print(f"workspace {workspace}: {data['documents']} documents, {data['chunks']} chunks, "
          f"{data['chunk_tokens']} chunk tokens")
    print(f"  chat model: {data['chat_model']}")
    for name, entry in sorted(data["artifacts"].items()):
        print(f"  artifact {name}: {entry.get('count', entry.get('entities', '?'))} items, "
              f"built {entry.get('built_at', '?')}")
    if data["stale_artifacts"]:
        print(f"  stale or damaged (corpus version {data['corpus_version']}; the next index, delete or query "
              f"refreshes them): "
              + ", ".join(f"{name} ({why})" for name, why in sorted(data["stale_artifacts"].items())))
    for kind, counts in data["graphs"].items():
        print(f"  graph {kind:<7} {counts['nodes']:>8} nodes {counts['edges']:>9} edges")
    for name, info in data["communities"].items():
        order = "C0 = root" if info["level_order"] == "top_down" else "level 1 = lowest"
        levels = ", ".join(f"L{level}: {count}" for level, count in info["levels"].items())
        update = info.get("update") or {}
        how = (f"; last change attached: {update['changed']} leaves added or removed since the full build of "
               f"{update['base_leaves']}" if update.get("mode") == "attach" else "")
        print(f"  communities {name:<9} {levels} ({order}{how})")
    if data["extractor"]:
        failures = ", ".join(f"{k}: {v}" for k, v in sorted(data["extraction_failures"].items())) or "none"
        print(f"  extractor {data['extractor']}; dropped/repaired: {failures}")
    if data["extract_prompt_tokens_per_chunk"] is not None:
        print(f"  extraction prompt tokens per chunk: {data['extract_prompt_tokens_per_chunk']}")
    print(f"  cache: {data['cache']['chat_responses']} chat responses, {data['cache']['embeddings']} embeddings")
    cost = data["last_index_cost"]
    if cost:
        estimate, actual = cost["estimate"], cost["actual"]
        print(f"  last paid index run ({cost['at']}, {estimate['model']}): estimated {estimate['llm_calls']} LLM calls, "
              f"{estimate['prompt_tokens']} prompt tokens; actual {actual['llm_calls']} calls "
              f"(+{actual['cache_hits']} cached), {actual['prompt_tokens']} prompt tokens")
    for stage, usage in data["usage_by_stage"].items():
        print(
            f"  {stage:<24} llm {usage['llm_calls']:>5} (+{usage['cache_hits']} cached)  "
            f"prompt {usage['prompt_tokens']:>8}  completion {usage['completion_tokens']:>7}  "
            f"embed {usage['embedding_calls']:>4} calls / {usage['embedded_texts']} texts  {usage['seconds']:.1f} s"
            + (f"  cut replies {usage['cut_replies']}" if usage["cut_replies"] else "")
        )


def _write_partial_report(out: Path, data: Any) -> None:
    """On Ctrl-C during ``eval``: the summary of the rows written so far (the run resumes later)."""
    from unirag.eval.report import write_report
    from unirag.eval.runner import all_rows

    rows = all_rows(out)
    if rows:
        write_report(rows, out, f"{data.name}: partial run, {len({r['question_id'] for r in rows})} questions")
        _err(f"partial summary of {len(rows)} answers written to {out / 'summary.md'}")


@app.command("eval")
@_handle_errors
def evaluate(
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="benchmark name (hotpotqa, musique, 2wiki, ...) "
                                         "or path to a question file or folder", show_default=False)],
    workspace: WorkspaceOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="directory for answers.jsonl, summary and plots",
                                      show_default=False)],
    methods: Annotated[str, typer.Option("--methods", help="comma-separated method names or .yaml paths, "
                                         "or all")] = "vanilla",
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="first N questions")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="dataset format (auto: by file names and fields)")
                   ] = "auto",
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="where benchmark names are looked up")] = None,
    retrieve_only: Annotated[
        bool, typer.Option("--retrieve-only", help="no answers: retrieval-level metrics only (agent operators "
                                                   "still ask the model)")
    ] = False,
    extractor: Annotated[str | None, typer.Option("--extractor", help="entity extractor: llm | nlp")] = None,
    budget: Annotated[str | None, typer.Option("--budget", help="also score every context cut to these token "
                                               "budgets, in the method's own order (e.g. 500,1000,2000)")] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="items per retrieval operator "
                                              "(retrieval.top_k; raise it so contexts can fill the budgets)")] = None,
    question_path: Annotated[str | None, typer.Option("--question-path", help="question entities/keywords: "
                                                      "llm | nlp | auto (retrieval.question_path)")] = None,
    judge: Annotated[
        str | None, typer.Option("--judge", help="LLM judge: pairwise,absolute,claims (any of them)")
    ] = None,
    judge_llm: Annotated[str | None, typer.Option("--judge-llm", help="OpenAI-compatible endpoint of the judge "
                                                  "(default: the chat model that answers)")] = None,
    judge_model: Annotated[str | None, typer.Option("--judge-model", help="the judge's model name")] = None,
    replicates: Annotated[int, typer.Option("--replicates", help="judgments per pair order / answer")] = 1,
    compare_to: CompareOpt = None,
    chat_base_url: ChatUrlOpt = None,
    chat_model: ChatModelOpt = None,
    concurrency: ConcurrencyOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Answer every question of a benchmark with every method; write per-question
    rows, a summary table and plots (and, with --judge, LLM-judge verdicts, win
    rates and heat maps). Resumes: rows and verdicts already in OUT are kept, and the
    summary covers every method ever answered in OUT."""
    from unirag.eval.datasets import load_dataset
    from unirag.eval.judge.eval_run import JUDGE_MODES
    from unirag.eval.report import write_report
    from unirag.eval.budget import parse_budgets
    from unirag.eval.runner import EvalPlan, all_rows, run_rows
    from unirag.methods.spec import builtin_methods, resolve_method
    from unirag.workspace import Workspace

    names = [n.strip() for n in methods.split(",") if n.strip()]
    specs = list(builtin_methods().values()) if names == ["all"] else [resolve_method(n) for n in names]
    if not specs:
        raise UniragError("--methods names no method")
    # the settings check --extractor and --question-path (one line each), before any answering
    settings = _settings(workspace, graph__extractor=extractor, chat__base_url=chat_base_url,
                         chat__model=chat_model, concurrency=concurrency, retrieval__top_k=top_k,
                         retrieval__question_path=question_path)
    judge_modes = [m.strip() for m in (judge or "").split(",") if m.strip()]
    unknown = [m for m in judge_modes if m not in JUDGE_MODES]
    if unknown:  # before any answering: a typo must not cost a whole run
        raise UniragError(f"unknown judge mode {', '.join(unknown)} (known: {', '.join(JUDGE_MODES)})")
    if judge_modes and retrieve_only:
        raise UniragError("--judge needs answers: drop --retrieve-only")
    if replicates < 1:
        raise UniragError(f"--replicates must be at least 1, not {replicates}")
    try:
        budgets = parse_budgets(budget)
    except ValueError as exc:
        raise UniragError(f"--budget: {exc}") from None
    wanted = [spec.name for spec in specs]
    if compare_to and compare_to not in wanted and not run_rows(out, {compare_to}):
        raise UniragError(f"--compare-to {compare_to}: not among --methods and not answered in {out} before")
    data = load_dataset(dataset, limit=limit, fmt=fmt, data_dir=data_dir)
    with _attached(Workspace.init(workspace, store=settings.store), settings, _show_progress(quiet or as_json)) as rag:
        prepared = rag.prepare_eval(data, specs)
        if prepared["built"]:
            _err(f"built what the methods need: {', '.join(prepared['built'])}")
        plan = EvalPlan(data, specs, out, generate=not retrieve_only, budgets=budgets)
        try:
            done = rag.answer_eval(plan)
        except KeyboardInterrupt:
            _write_partial_report(out, data)
            raise
        latest = run_rows(out, set(wanted), {q.id for q in data.questions})
        judged: dict[str, Any] = {}
        if judge_modes:
            judged = rag.judge_eval(latest, judge_modes, out, wanted, base_url=judge_llm, model=judge_model,
                                    replicates=replicates)
    rows = all_rows(out)  # every method ever answered in OUT, not only this run's
    report = write_report(rows, out, _report_title(data.name, rows), judged.get("columns", {}), compare_to)
    result = {"dataset": data.name, "questions": len(data.questions), "methods": wanted,
              "answered": done.done, "kept": done.skipped, "failed": done.failed,
              "files": report["files"] + judged.get("files", []), "summary": report["summaries"],
              "judge": {k: v for k, v in judged.items() if k not in ("files", "columns")},
              "comparisons": report["comparisons"]}
    if as_json:
        print(json.dumps(result, indent=2, default=str))
        return
    print((out / "summary.md").read_text(encoding="utf-8"))
    print(f"{done.done} answered, {done.skipped} kept from before, {done.failed} failed; files in {out}")


def _report_title(name: str, rows: list[dict[str, Any]]) -> str:
    methods = len({row["method"] for row in rows})
    return f"{name}: {len({row['question_id'] for row in rows})} questions, {methods} methods"


@app.command("eval-report")
@_handle_errors
def eval_report(
    out: Annotated[Path, typer.Argument(help="an eval output directory (with answers.jsonl)", show_default=False)],
    compare_to: CompareOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rewrite the summary tables and plots of an eval run from every row of its answers.jsonl
    (no model, no workspace); with --compare-to, the paired comparison against that method."""
    from unirag.eval.report import write_report
    from unirag.eval.runner import ANSWERS_FILE, all_rows

    rows = all_rows(out)
    if not rows:
        raise SourceError(f"{out / ANSWERS_FILE}: no answers (run unirag eval -o {out} first)")
    report = write_report(rows, out, _report_title(out.name, rows), compare_to=compare_to)
    if as_json:
        print(json.dumps({"files": report["files"], "summary": report["summaries"],
                          "comparisons": report["comparisons"]}, indent=2, default=str))
        return
    print((out / "summary.md").read_text(encoding="utf-8"))


@app.command("questions")
@_handle_errors
def abstract_questions(
    workspace: WorkspaceOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="directory for Question.jsonl + Corpus.jsonl",
                                      show_default=False)],
    users: Annotated[int, typer.Option("--users", "-K", help="K personas")] = 5,
    tasks: Annotated[int, typer.Option("--tasks", "-N", help="N tasks per persona")] = 5,
    per_task: Annotated[int, typer.Option("--questions", "-M", help="M questions per (persona, task)")] = 5,
    sample: Annotated[int, typer.Option("--sample", help="chunks sampled to describe the corpus")] = 20,
    chat_base_url: ChatUrlOpt = None,
    chat_model: ChatModelOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
) -> None:
    """Write K x N x M abstract (sensemaking) questions about the workspace's corpus
    (GraphRAG Algorithm 1) as a dataset 'unirag eval --judge' can run on."""
    from unirag.eval.judge.questions import generate_questions, sample_texts
    from unirag.workspace import Workspace

    settings = _settings(workspace, chat__base_url=chat_base_url, chat__model=chat_model)
    with _attached(Workspace.open(workspace, settings.store), settings) as rag:
        chunks = rag.passages()
        if not chunks:
            raise SourceError(f"{workspace} has no corpus: index documents first")
        texts = sample_texts([c.text for c in chunks], sample)
        generated = generate_questions(rag.stack.chat, texts, users, tasks, per_task,
                                       concurrency=settings.concurrency, progress=_show_progress(quiet),
                                       encoding=settings.chunking.encoding)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "Question.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps({"id": q.id, "question": q.question, "kind": "abstract", "user": q.user,
                                      "task": q.task}, ensure_ascii=False) + "\n" for q in generated)
    with open(out / "Corpus.jsonl", "w", encoding="utf-8") as handle:  # the dataset's passages: the corpus asked
        handle.writelines(json.dumps({"title": c.title, "text": c.text}, ensure_ascii=False) + "\n" for c in chunks)
    for note in generated.notes:
        _err(f"note: {note}")
    print(f"{len(generated)} of {users * tasks * per_task} questions ({len(generated.users)} users) in "
          f"{out / 'Question.jsonl'}; run: unirag eval -d {out} -w {workspace} --judge pairwise ...")


@app.command()
@_handle_errors
def export(
    workspace: WorkspaceOpt,
    graph: Annotated[str, typer.Option("--graph", "-g", help="kg | tkg | rkg | pg | tree | hybrid")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="graphml | parquet")] = "graphml",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="output file (graphml) or directory (parquet)")] = None,
) -> None:
    """Write one graph type as GraphML (networkx-readable) or Parquet node/edge tables."""
    with _opened(workspace) as rag:
        path = rag.export(graph, fmt, out)
    print(f"wrote {path}")


def _need_server_extra(command: str, *modules: str) -> None:
    """One line, not a traceback, when an optional server package is absent (an install from
    before the extra gained one counts too). ``pip install 'unirag[server]'`` holds for a clone's
    install: pip finds the installed unirag and adds the extra's packages."""
    import importlib.util

    def absent(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is None
        except ImportError:  # a finder that refuses it (or a broken parent package)
            return True

    missing = [module for module in modules if absent(module)]
    if missing:
        raise UniragError(f"'unirag {command}' needs the server extra ({', '.join(missing)} missing): "
                          "pip install 'unirag[server]'")


@app.command()
@_handle_errors
def serve(
    ctx: typer.Context,
    workspace: WorkspaceOpt,
    host: Annotated[str, typer.Option(
        "--host", help="address to bind; other than loopback (127.0.0.1, ::1, localhost) it needs an API key "
                       "or --insecure")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port")] = 8080,
    api_key: Annotated[
        str | None, typer.Option("--api-key", envvar="UNIRAG_SERVER_API_KEY", show_default=False,
                                 help="require 'Authorization: Bearer KEY' on every route but /health; set it in "
                                      "the environment (UNIRAG_SERVER_API_KEY): a key on the command line is "
                                      "visible to every user of the machine in 'ps'")
    ] = None,
    allowed_host: Annotated[
        list[str] | None, typer.Option("--allowed-host", show_default=False, metavar="<name>",
                                       help="a DNS name the server is reached by (repeatable); requests with "
                                            "another Host are refused (421: DNS rebinding)")
    ] = None,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="serve a non-loopback --host without an API key (prints a warning)")
    ] = False,
    no_build: Annotated[
        bool, typer.Option("--no-build", help="queries never build a missing artifact (409 instead)")
    ] = False,
    build_paid: Annotated[
        bool, typer.Option("--build-paid", help="queries may build artifacts with a paid chat model (without it: "
                                                "409 with the estimate; free builds always run)")
    ] = False,
    max_upload_mb: Annotated[int, typer.Option("--max-upload-mb", help="largest POST /documents body")] = 20,
) -> None:
    """Serve the workspace over HTTP: query, stream, documents, graphs, and an OpenAI-compatible API.

    The web page at /, OpenAPI docs at /docs. Binds 127.0.0.1 unless told otherwise. The API key
    comes from the environment: UNIRAG_SERVER_API_KEY=KEY unirag serve ... (--api-key works too, but
    shows the key in 'ps'); the key is never printed. Without a key, --host beyond loopback is refused
    unless --insecure. Writes (POST, PUT, PATCH, DELETE) from a web page of another origin are refused
    (403), and so is a Host header naming neither this machine nor an --allowed-host (421)."""
    _need_server_extra("serve", "fastapi", "uvicorn", "fastapi_offline", "python_multipart")
    from unirag.server.app import create_app
    from unirag.server.run import serve as run_server
    from unirag.server.settings import ServerSettings

    settings = ServerSettings(host=host, port=port, api_key=api_key or None, build=not no_build,
                              build_paid=build_paid, max_upload_bytes=max_upload_mb * 1024 * 1024,
                              allowed_hosts=tuple(allowed_host or ()), insecure=insecure)
    exposed = settings.check_exposure()
    source = ctx.get_parameter_source("api_key")  # typer's own click: its enum, compared by name
    if api_key and source is not None and source.name == "COMMANDLINE":
        _warn("--api-key on the command line is visible to every user of this machine in 'ps'; "
              "set UNIRAG_SERVER_API_KEY in the environment instead")
    if exposed:
        _warn(exposed)
    served = create_app(workspace, settings)
    guarded = "an API key is required" if settings.api_key else "no API key"
    _err(f"serving {workspace} on http://{host}:{port} ({guarded}; the web page at /, docs at /docs)")
    run_server(served, settings)


@app.command()
@_handle_errors
def mcp(
    workspace: WorkspaceOpt,
    files_root: Annotated[
        Path | None,
        typer.Option("--files-root", help="the directory add_files may read from (default: the current one)",
                     exists=True, file_okay=False, dir_okay=True),
    ] = None,
) -> None:
    """Serve the workspace as MCP tools on stdin/stdout: query, retrieve, list_methods, add_text,
    add_files, delete_documents, list_documents, stats. add_files reads only files that resolve
    (symlinks followed) inside --files-root, by default the directory this command runs in."""
    _need_server_extra("mcp", "mcp")
    from unirag.api import UniRAG
    from unirag.server.mcp_tools import serve_stdio

    with UniRAG(workspace, create=False, stale_while_writing=True) as rag:
        serve_stdio(rag, files_root=files_root)


def main() -> None:
    """Console entry point: a one-line message instead of a traceback for anything unexpected."""
    try:
        app()
    except SystemExit as exc:
        if exc.code == 130:  # interrupted: exit now, without joining model calls still in flight
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        raise
    except Exception as exc:
        if os.environ.get("UNIRAG_DEBUG"):
            raise
        first = (str(exc).splitlines() or [""])[0]
        _err(f"internal error: {type(exc).__name__}: {first} (set UNIRAG_DEBUG=1 for a traceback)")
        sys.exit(3)

