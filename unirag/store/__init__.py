"""The database behind a workspace: one interface, two stores.

* :mod:`unirag.store.sqlite` -- the embedded default, ``WS/store.sqlite`` (a file lock
  for the one writer);
* :mod:`unirag.store.postgres` -- a PostgreSQL server (``store: postgresql://...``): one
  schema per workspace, an advisory lock for the one writer, pgvector for vector indices,
  artifact files as blobs (:mod:`unirag.store.artifact_files`).

A workspace reaches its store through one seam: the :class:`~unirag.store.backend.Backend`
that :func:`~unirag.store.connect.backend_for` picks (connections, the writer lock, the
artifact-files strategy, the model cache's place, whether vector indices are tables);
nothing above this package tests which store it is. The store classes above (the
workspace's ``Corpus``, ``Manifest`` and ``UsageBook``, ``GraphStore``, ``CommunityStore``)
write their SQL once, in the subset both understand (``?`` placeholders, ``ON CONFLICT DO NOTHING``);
what differs (column types, replace, insertion order) is a :class:`~unirag.store.database.Dialect`
fact, and each store's tables carry a schema version (:mod:`unirag.store.schema`).
It sits with the foundations (it needs only :mod:`unirag.errors`), so the model cache
(:mod:`unirag.llm`) can use it too.
"""
