"""Each hierarchy is declared once (unirag.hierarchy.spec.HierarchySpec) and everything
else reads the declaration: the artifact registry, aliases, the cost estimate, the
settings template. These checks keep a declaration honest about what it names."""

from __future__ import annotations

import dataclasses

import pytest

from unirag.artifacts.registry import aliases, artifact_registry
from unirag.artifacts.settings_template import hierarchy_configs
from unirag.config import IndexSettings
from unirag.hierarchy.registry import HIERARCHY_MODULES, hierarchy_registry, hierarchy_variants, spec_of
from unirag.hierarchy.spec import HierarchySpec
from unirag.operators.registry import operator_registry
from unirag.prompts.prompt import load_prompt


def test_every_hierarchy_module_declares_one_spec_named_after_it() -> None:
    registry = hierarchy_registry()
    assert list(registry) == list(HIERARCHY_MODULES)
    for name, spec in registry.items():
        assert isinstance(spec, HierarchySpec) and spec.name == name
        with pytest.raises(dataclasses.FrozenInstanceError):
            spec.name = "other"  # type: ignore[misc]


def test_a_spec_names_only_what_exists() -> None:
    """Its operators are registered, its prompts ship, its settings have an ``index.<name>``
    mapping, what it needs is an artifact, and its default config gives a cost shape."""
    operators = operator_registry()
    artifacts = artifact_registry()
    for name, spec in hierarchy_registry().items():
        assert set(spec.operators) <= set(operators), name
        for prompt in spec.prompts:
            load_prompt(prompt)
        assert name in IndexSettings.model_fields and hierarchy_configs()[name] is spec.settings
        assert set(spec.needs) <= set(artifacts), name
        assert spec.cost(spec.settings()).size >= 1


def test_the_artifact_registry_is_made_from_the_specs() -> None:
    artifacts = artifact_registry()
    for name, spec in hierarchy_registry().items():
        artifact = artifacts[f"communities:{name}"]
        assert artifact.requires == spec.needs and artifact.summary == spec.description
        assert aliases()[name] == f"communities:{name}"
        assert f"community_vectors:{name}" in artifacts
    for variant, (base, _) in hierarchy_variants().items():
        assert artifacts[f"communities:{variant}"].variant and spec_of(variant) is hierarchy_registry()[base]
