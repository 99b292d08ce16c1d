"""The families the web page groups its method picker by, in the README's order.

Why here and not in the method specs: a group is how a person browses the
methods (the rows of the README's methods table, gathered into families), not
something a pipeline runs on. tests/test_server.py checks that every shipped
method is in exactly one group, so a new spec fails the test until it is placed.
"""

from __future__ import annotations

#: (group title, its methods in the README's order), the groups in the README's order.
METHOD_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("No retrieval", ("zeroshot", "cot")),
    ("Passages", ("bm25", "vanilla")),
    ("Entity graph", ("hipporag", "fastgraphrag", "g-retriever", "tog", "dalk")),
    ("GraphRAG communities", ("lgraphrag", "ggraphrag", "ggraphrag-c0", "ggraphrag-c1", "ggraphrag-c3",
                              "graphrag-er", "graphrag-cc", "vgraphrag-cc", "vgraphrag", "cheaprag",
                              "graphrag-ac")),
    ("LightRAG", ("llightrag", "glightrag", "hlightrag")),
    ("Trees and passage graphs", ("raptor", "raptor-k", "kgp")),
    ("ArchRAG", ("archrag", "archrag-direct", "archrag-entity-only", "archrag-single-layer", "archrag-spectral",
                 "archrag-spectral-noaug", "archrag-leiden")),
    ("HyGRAG and LeanRAG", ("hygrag", "leanrag")),
    ("HippoRAG 2 and LinearRAG", ("hipporag2", "linearrag")),
)

#: A method no group names (a spec added later) is listed last, under this title.
OTHER_GROUP = "Other"


def method_order() -> dict[str, tuple[int, int, str]]:
    """Method name -> (group rank, rank in its group, group title): the README's order."""
    return {name: (rank, place, title)
            for rank, (title, names) in enumerate(METHOD_GROUPS) for place, name in enumerate(names)}


def grouped(methods: list[dict[str, object]]) -> list[dict[str, object]]:
    """``methods`` (JSON of ``MethodInfo``) with a ``group`` each, sorted in the README's order."""
    order = method_order()
    last = (len(METHOD_GROUPS), 0, OTHER_GROUP)

    def key(method: dict[str, object]) -> tuple[int, int, str]:
        rank, place, _ = order.get(str(method["name"]), last)
        return rank, place, str(method["name"])

    return [{**method, "group": order.get(str(method["name"]), last)[2]} for method in sorted(methods, key=key)]
