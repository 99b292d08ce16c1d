"""The operator contract: params come from the function signature, and a method
spec's params are checked against the signature's types when the spec loads."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from unirag.errors import MethodError, UniragError
from unirag.methods.spec import SPEC_DIR, builtin_methods, parse_spec
from unirag.operators.registry import operator_registry
from unirag.operators.spec import EMIT, OperatorSpec


def spec_file(directory: Path, operators: str, question: str = "[embedding, entities, keywords]") -> Path:
    path = directory / "my.yaml"
    path.write_text(f"name: mine\ntitle: Mine\ndescription: d\nsource: tests\nquestion: {question}\n"
                    f"operators:\n{operators}", encoding="utf-8")
    return path


def test_every_operator_declares_its_params_by_its_signature_only() -> None:
    assert "params" not in {field.name for field in dataclasses.fields(OperatorSpec)}
    for name, spec in operator_registry().items():
        parameters = list(inspect.signature(spec.fn).parameters.values())
        assert parameters[0].name == "state", name
        assert dict(spec.params) == {p.name: p.default for p in parameters[1:]}, name
        assert all(p.default is not inspect.Parameter.empty for p in parameters[1:]), f"{name}: a param without default"
        assert all(not isinstance(p.annotation, str) for p in spec.signature), f"{name}: unresolved annotation"
        assert spec.accepted_params == (*(p.name for p in parameters[1:]), EMIT)
        # Each default is a value its own annotation accepts (a range cannot exclude its default).
        assert spec.invalid_param(dict(spec.params)) is None, name


def test_every_shipped_spec_loads() -> None:
    paths = sorted(SPEC_DIR.glob("*.yaml"))
    assert len(paths) == len(builtin_methods()) >= 35
    for path in paths:
        parse_spec(path)


@pytest.mark.parametrize(
    "operators,located,expected",
    [
        ("  - op: chunk.bm25\n    params: {top_k: many}\n", "operators[0] chunk.bm25.top_k",
         "expected an integer, got 'many'"),
        ("  - op: chunk.bm25\n    params: {top_k: -5}\n", "operators[0] chunk.bm25.top_k",
         "expected at least 1, got -5"),
        ("  - op: chunk.bm25\n  - op: chunk.vdb\n    params: {top_k: 2.5}\n", "operators[1] chunk.vdb.top_k",
         "expected an integer, got 2.5"),
        ("  - op: chunk.bm25\n    params: {top_k: 3.0}\n", "operators[0] chunk.bm25.top_k",
         "expected an integer, got 3.0"),
        ("  - op: chunk.bm25\n    params: {top_k: true}\n", "operators[0] chunk.bm25.top_k",
         "expected an integer, got True"),
        ("  - op: node.vdb\n    params: {query: 5}\n", "operators[0] node.vdb.query",
         "expected 'question', 'keywords_low' or 'keywords_high', got 5"),
        ("  - op: node.relnode\n    params: {combine: avg}\n", "operators[0] node.relnode.combine",
         "expected 'max' or 'sum', got 'avg'"),
        ("  - op: community.vdb\n    params: {hierarchy: 3}\n", "operators[0] community.vdb.hierarchy",
         "expected a string, got 3"),
        ("  - op: node.ppr\n    params: {damping: 1.0}\n", "operators[0] node.ppr.damping",
         "expected less than 1.0, got 1.0"),
        ("  - op: node.onehop\n    params: {include_seeds: 'yes'}\n", "operators[0] node.onehop.include_seeds",
         "expected true or false, got 'yes'"),
        ("  - op: chunk.bm25\n    params: {emit: 0}\n", "operators[0] chunk.bm25.emit",
         "expected true or false, got 0"),
        ("  - op: node.link\n  - repeat:\n      rounds: 2\n      operators:\n        - op: node.onehop\n"
         "          params: {top_k: -1}\n", "operators[1].repeat.operators[0] node.onehop.top_k",
         "expected at least 0, got -1"),
    ],
    ids=["word-for-int", "negative-count", "float-for-int", "whole-float-for-int", "bool-for-int",
         "int-for-choice", "unknown-choice", "int-for-string", "out-of-range-float", "string-for-bool",
         "emit-not-bool", "inside-repeat"],
)
def test_wrongly_typed_params_are_refused_at_load(tmp_path: Path, operators: str, located: str, expected: str) -> None:
    path = spec_file(tmp_path, operators)
    with pytest.raises(MethodError) as info:
        parse_spec(path)
    assert isinstance(info.value, UniragError)
    assert str(info.value) == f"{path}: {located}: {expected}"


@pytest.mark.parametrize(
    "operators",
    [
        "  - op: node.ppr\n    params: {top_k: 0, damping: 0}\n",  # 0 keeps every candidate; an int for a float
        "  - op: community.entity\n    params: {max_level: null, by: matches}\n",
        "  - op: kgp.traverse\n    params: {seeds: 2, hops: 0, agent: true}\n",
        "  - op: leanrag.lca\n    params: {top_c: 0, emit: false}\n",
    ],
)
def test_values_the_annotations_allow_load(tmp_path: Path, operators: str) -> None:
    parse_spec(spec_file(tmp_path, operators))


def test_unknown_params_are_refused_with_the_known_ones(tmp_path: Path) -> None:
    path = spec_file(tmp_path, "  - op: chunk.bm25\n    params: {top_n: 3}\n")
    with pytest.raises(MethodError) as info:
        parse_spec(path)
    assert str(info.value) == (f"{path}: operators[0]: operator chunk.bm25 has no parameter top_n "
                               "(known: top_k, emit)")
