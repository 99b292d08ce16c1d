"""``GET/POST /documents``, ``DELETE /documents/{id}``, ``GET /jobs/{id}``, ``GET /stats``, ``GET /chunks/{id}``.

Adding and deleting documents are background jobs (:mod:`unirag.server.jobs`):
the request answers 202 with the job, ``GET /jobs/{id}`` follows it. An upload
records its logical source (``upload:COLLECTION/NAME``, :mod:`unirag.server.uploads`),
so a changed file uploaded again replaces its document, as ``unirag index`` does.
A document to delete is looked up among the stored ids and recorded sources, never
resolved on the file system: ``../etc/passwd`` is an id like any other, and unknown (404).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile

from unirag.server.deps import server_state
from unirag.server.errors import ApiError
from unirag.server.jobs import JobProgress
from unirag.server.state import ServerState
from unirag.server.uploads import UPLOAD_SUFFIXES, check_upload, load_uploads, record_documents
from unirag.server.writes import written
from unirag.text.loaders import TOO_DEEP
from unirag.text.types import Document, is_logical_source

if TYPE_CHECKING:
    from unirag.api import UniRAG

State = Annotated[ServerState, Depends(server_state)]

router = APIRouter(tags=["corpus"])

_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "description": (
            "Files (multipart) or JSON records. Every format `unirag index` reads, through the same loaders and "
            "bounds: " + ", ".join(UPLOAD_SUFFIXES) + ". Each document records its logical source "
            "`upload:COLLECTION/NAME` (the file name within the optional `collection` field; a record's own "
            "`source`): uploading a changed file with the same source replaces its document, an unchanged one "
            "changes nothing, `DELETE /documents/upload:...` removes it. A source is a name, never a path: "
            "`..`, absolute paths, backslashes, `#` and control characters are refused (400)."
        ),
        "content": {
            "multipart/form-data": {"schema": {"type": "object", "required": ["files"], "properties": {
                "files": {"type": "array", "items": {"type": "string", "format": "binary"},
                          "description": f"files: {', '.join(UPLOAD_SUFFIXES)}"},
                "collection": {"type": "string", "description": "optional folder-like prefix of the files' "
                                                                "sources, e.g. `docs/2024`"}}}},
            "application/json": {"schema": {"type": "array", "items": {"type": "object", "required": ["text"],
                                 "properties": {"text": {"type": "string"}, "title": {"type": "string"},
                                                "id": {"type": "string"},
                                                "source": {"type": "string", "description": (
                                                    "logical name, e.g. `notes.jsonl`: the records of one "
                                                    "source replace what it held before")}}}}},
        },
    }
}


@router.get("/documents/formats", summary="What an upload may be: file suffixes and the size limit")
async def upload_formats(state: State) -> dict[str, Any]:
    """The one list the page's file picker accepts, so the page and the server never disagree."""
    return {"suffixes": list(UPLOAD_SUFFIXES), "max_upload_bytes": state.settings.max_upload_bytes}


@router.get("/documents", summary="Every stored document")
async def list_documents(state: State) -> list[dict[str, Any]]:
    return [doc.to_json() for doc in await asyncio.to_thread(state.rag.documents)]


@router.post("/documents", status_code=202, openapi_extra=_UPLOAD_BODY,
             summary="Add documents (files or JSON records); indexing runs as a job")
async def add_documents(request: Request, state: State) -> JSONResponse:
    length = request.headers.get("content-length")
    if length is None or not length.isdigit():
        raise ApiError(411, "send the upload with a Content-Length header")
    if int(length) > state.settings.max_upload_bytes:
        raise ApiError(413, f"upload of {int(length)} bytes is over the limit of {state.settings.max_upload_bytes}",
                       code="upload_too_large")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    warnings: list[str] = []
    if kind == "multipart/form-data":
        docs, warnings = await _uploaded_documents(request, state)
    elif kind == "application/json":
        try:
            payload = json.loads(await request.body())
        except ValueError as exc:
            raise ApiError(400, f"the body is not JSON: {exc}") from None
        except RecursionError:
            raise ApiError(400, f"the body is {TOO_DEEP}") from None
        docs = record_documents(payload)
    else:
        raise ApiError(415, "send files as multipart/form-data or records as application/json",
                       code="unsupported_media_type")
    job = state.jobs.submit("index", lambda progress: _written(state, progress,
                                                               lambda writer: writer.index(documents=docs)))
    return JSONResponse({"job": job.to_json(), "documents": len(docs), "warnings": warnings}, status_code=202)


async def _uploaded_documents(request: Request, state: State) -> tuple[list[Document], list[str]]:
    limit = state.settings.max_upload_bytes
    async with request.form(max_files=100, max_part_size=limit) as form:
        files = [value for _, value in form.multi_items() if isinstance(value, UploadFile)]
        if not files:
            raise ApiError(400, "no file in the upload (send them as form fields 'files')")
        collection = form.get("collection") or ""
        if not isinstance(collection, str):
            raise ApiError(400, "'collection' is a text field, not a file", code="invalid_source")
        uploads = [check_upload(file.filename, await file.read(), collection) for file in files]
    return await asyncio.to_thread(load_uploads, state.rag.root, uploads, state.rag.settings)


def _written(state: ServerState, progress: JobProgress, write: Callable[[UniRAG], Any]) -> dict[str, Any]:
    """Run one write (``write(writer)``: an index or delete report) on a writer of its own."""
    return written(state.rag, progress, write)


@router.delete("/documents/{target:path}", status_code=202,
               summary="Delete documents (by id, recorded source, FILE#RECORD or upload collection) as a job; "
                       "unknown: 404")
async def delete_document(target: str, state: State) -> JSONResponse:
    docs = await asyncio.to_thread(state.rag.documents)
    ids = [doc.id for doc in docs if doc.id == target or any(_names(target, source) for source in doc.sources)]
    if not ids:
        raise ApiError(404, f"no document '{target}' in this workspace (GET /documents lists them)", "not_found")
    # a recorded source withdraws only that origin: text another source still holds stays
    targets = ids if target in ids else [target]
    job = state.jobs.submit("delete", lambda progress: _written(state, progress,
                                                                lambda writer: writer.delete(targets)))
    return JSONResponse({"job": job.to_json(), "documents": ids}, status_code=202)


def _names(target: str, source: str) -> bool:
    """Whether a delete target names a recorded source, compared as text, never resolved: the
    source itself, its file (``FILE`` of ``FILE#RECORD``), or an upload collection it lies in."""
    origin = source.partition("#")[0]
    if target in (source, origin):
        return True
    return is_logical_source(target) and origin.startswith(target.rstrip("/") + "/")


@router.get("/jobs/{job_id}", summary="A job's state, progress, and its report or error")
async def get_job(job_id: str, state: State) -> dict[str, Any]:
    job = state.jobs.get(job_id)
    if job is None:
        raise ApiError(404, f"no job '{job_id}'", "not_found")
    return job.to_json()


@router.get("/stats", summary="Counts, graphs, communities, artifacts and usage (`unirag stats --json`)")
async def stats(state: State) -> dict[str, Any]:
    return await asyncio.to_thread(state.rag.stats)


@router.get("/chunks/{chunk_id}", summary="A passage's text and title (to open a source)")
async def get_chunk(chunk_id: str, state: State) -> dict[str, Any]:
    found = await asyncio.to_thread(state.rag.chunk, chunk_id)
    if found is None:
        raise ApiError(404, f"no chunk '{chunk_id}'", "not_found")
    return {"id": found.id, "document": found.doc_id, "index": found.index, "title": found.title,
            "text": found.text, "tokens": found.n_tokens}
