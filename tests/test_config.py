"""Settings: precedence, interpolation, validation, and secrets kept out of output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unirag.config import DEFAULT_SETTINGS_YAML, SETTINGS_FILE, Settings, load_settings
from unirag.errors import ConfigError


def write_yaml(root: Path, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / SETTINGS_FILE).write_text(text, encoding="utf-8")
    return root


def get(settings: Settings, dotted: str) -> object:
    node: object = settings
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


# Each field: (dotted path, env name, file value as YAML text, file value, env value, env parsed, flag value)
FIELDS = [
    ("chat.base_url", "UNIRAG_CHAT_BASE_URL", "http://file:1/v1", "http://file:1/v1",
     "http://env:2/v1", "http://env:2/v1", "http://flag:3/v1"),
    ("chat.model", "UNIRAG_CHAT_MODEL", "file-model", "file-model", "env-model", "env-model", "flag-model"),
    ("concurrency", "UNIRAG_CONCURRENCY", "2", 2, "3", 3, 9),
    ("retrieval.top_k", "UNIRAG_RETRIEVAL_TOP_K", "5", 5, "6", 6, 7),
    ("chunking.size", "UNIRAG_CHUNKING_SIZE", "500", 500, "600", 600, 700),
]


def yaml_for(dotted: str, value: str) -> str:
    parts = dotted.split(".")
    if len(parts) == 1:
        return f"{parts[0]}: {value}\n"
    return f"{parts[0]}:\n  {parts[1]}: {value}\n"


@pytest.mark.parametrize("dotted,env_name,file_text,file_value,env_text,env_value,flag_value", FIELDS)
def test_precedence_defaults_file_env_flags(
    tmp_path: Path, dotted: str, env_name: str, file_text: str, file_value: object, env_text: str,
    env_value: object, flag_value: object,
) -> None:
    default = get(Settings(), dotted)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert get(load_settings(empty, env={}), dotted) == default
    assert get(load_settings(None, env={}), dotted) == default

    root = write_yaml(tmp_path / "ws", yaml_for(dotted, file_text))
    assert get(load_settings(root, env={}), dotted) == file_value
    assert get(load_settings(root, env={env_name: env_text}), dotted) == env_value
    assert get(load_settings(root, {dotted: flag_value}, env={env_name: env_text}), dotted) == flag_value
    # a None override is "flag not given": it must not mask the lower layers
    assert get(load_settings(root, {dotted: None}, env={env_name: env_text}), dotted) == env_value
    # env without a file beats the default
    assert get(load_settings(empty, env={env_name: env_text}), dotted) == env_value


def test_layers_merge_per_field_not_per_section(tmp_path: Path) -> None:
    root = write_yaml(tmp_path, "chat:\n  base_url: http://file/v1\n  model: file-model\n  max_tokens: 100\n")
    settings = load_settings(root, {"chat.max_tokens": 50}, env={"UNIRAG_CHAT_MODEL": "env-model"})
    assert settings.chat.base_url == "http://file/v1"
    assert settings.chat.model == "env-model"
    assert settings.chat.max_tokens == 50
    assert settings.chat.temperature == Settings().chat.temperature


def test_default_settings_file_loads_to_defaults(tmp_path: Path) -> None:
    # the shipped file mentions ${OPENAI_API_KEY} only in a comment: no env needed
    root = write_yaml(tmp_path, DEFAULT_SETTINGS_YAML)
    assert load_settings(root, env={}) == Settings()


def test_interpolation(tmp_path: Path) -> None:
    root = write_yaml(
        tmp_path,
        "chat:\n"
        "  base_url: http://${HOST}:${PORT:-8000}/v1\n"
        "  model: ${MODEL:-llama-3}\n"
        "embedding:\n"
        "  model: ${EMB_MODEL:-bge}\n"
        "concurrency: ${WORKERS}\n",
    )
    settings = load_settings(root, env={"HOST": "gpu-box", "WORKERS": "6", "EMB_MODEL": "e5"})
    assert settings.chat.base_url == "http://gpu-box:8000/v1"
    assert settings.chat.model == "llama-3"
    assert settings.embedding.model == "e5"
    assert settings.concurrency == 6
    settings = load_settings(root, env={"HOST": "h", "PORT": "9", "MODEL": "qwen", "WORKERS": "1"})
    assert settings.chat.base_url == "http://h:9/v1"
    assert settings.chat.model == "qwen"


def test_interpolation_empty_default(tmp_path: Path) -> None:
    root = write_yaml(tmp_path, "chat:\n  model: x${SUFFIX:-}\n")
    assert load_settings(root, env={}).chat.model == "x"


def test_missing_variable_is_named(tmp_path: Path) -> None:
    root = write_yaml(tmp_path, "chat:\n  api_key: ${MY_SECRET_KEY}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(root, env={})
    message = str(info.value)
    assert "MY_SECRET_KEY" in message
    assert "\n" not in message


def one_line_config_error(**kwargs: object) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(**kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert message and "\n" not in message, message
    assert "Traceback" not in message
    return message


def test_invalid_yaml(tmp_path: Path) -> None:
    root = write_yaml(tmp_path, "chat:\n  model: [unclosed\n  base_url: : :\n")
    message = one_line_config_error(workspace=root, env={})
    assert SETTINGS_FILE in message and "YAML" in message


def test_top_level_not_a_mapping(tmp_path: Path) -> None:
    root = write_yaml(tmp_path, "- just\n- a list\n")
    one_line_config_error(workspace=root, env={})


@pytest.mark.parametrize(
    "yaml_text,env,overrides,needle",
    [
        ("concurrency: 0\n", {}, None, "concurrency"),
        ("", {"UNIRAG_CONCURRENCY": "many"}, None, "concurrency"),
        ("", {"UNIRAG_RETRIEVAL_TOP_K": "-1"}, None, "retrieval.top_k"),
        ("chat:\n  provider: magic\n", {}, None, "chat.provider"),
        ("chat:\n  temprature: 0.5\n", {}, None, "temprature"),
        ("", {}, {"chunking.sise": 100}, "sise"),
        ("", {}, {"chat.max_tokens": 0}, "chat.max_tokens"),
    ],
)
def test_invalid_values(tmp_path: Path, yaml_text: str, env: dict[str, str], overrides: dict | None,
                        needle: str) -> None:
    root = write_yaml(tmp_path, yaml_text)
    message = one_line_config_error(workspace=root, overrides=overrides, env=env)
    assert needle in message


def test_unknown_environment_variable(tmp_path: Path) -> None:
    message = one_line_config_error(workspace=tmp_path, env={"UNIRAG_CHAT_MODLE": "x"})
    assert "UNIRAG_CHAT_MODLE" in message
    assert "UNIRAG_CHAT_MODEL" in message  # the known names are listed


def test_non_setting_variables_and_other_prefixes_are_ignored(tmp_path: Path) -> None:
    # (OPENAI_API_KEY is honoured since issue 17: tests/test_env_conventions.py)
    env = {"UNIRAG_WORKSPACE": "/somewhere", "UNIRAG_DEBUG": "1", "HOME_API_KEY": "x", "UNIRAGX": "y"}
    assert load_settings(tmp_path, env=env) == Settings()


@pytest.mark.parametrize("size,overlap", [(100, 100), (100, 150), (64, 64)])
def test_overlap_must_be_below_size(tmp_path: Path, size: int, overlap: int) -> None:
    message = one_line_config_error(workspace=tmp_path, overrides={"chunking.size": size,
                                                                  "chunking.overlap": overlap}, env={})
    assert "overlap" in message


def test_overlap_below_size_from_mixed_layers(tmp_path: Path) -> None:
    root = write_yaml(tmp_path, "chunking:\n  size: 200\n  overlap: 50\n")
    # the flag lowers size below the file's overlap: rejected as a whole
    one_line_config_error(workspace=root, overrides={"chunking.size": 40}, env={})
    ok = load_settings(root, {"chunking.size": 40, "chunking.overlap": 10}, env={})
    assert (ok.chunking.size, ok.chunking.overlap) == (40, 10)


SECRET = "sk-test-0123456789-very-secret"


def test_api_keys_never_printed(tmp_path: Path) -> None:
    root = write_yaml(tmp_path, "chat:\n  base_url: http://x/v1\n  api_key: ${OPENAI_API_KEY}\n")
    settings = load_settings(root, env={"OPENAI_API_KEY": SECRET, "UNIRAG_EMBEDDING_API_KEY": SECRET + "-emb"})
    assert settings.chat.api_key is not None
    assert settings.chat.api_key.get_secret_value() == SECRET
    assert settings.embedding.api_key is not None
    assert settings.embedding.api_key.get_secret_value() == SECRET + "-emb"
    for text in (repr(settings), str(settings), json.dumps(settings.public_dict()), repr(settings.chat),
                 str(settings.chat), repr(settings.embedding), settings.model_dump_json()):
        assert SECRET not in text
    public = settings.public_dict()
    assert public["chat"]["api_key"] and public["chat"]["api_key"] != SECRET
    json.dumps(public)  # JSON-safe


def test_api_key_not_in_config_error(tmp_path: Path) -> None:
    root = write_yaml(tmp_path, "chat:\n  api_key: ${OPENAI_API_KEY}\n  max_tokens: nope\n")
    message = one_line_config_error(workspace=root, env={"OPENAI_API_KEY": SECRET})
    assert SECRET not in message


@pytest.mark.parametrize(
    "provider,base_url,expected",
    [
        ("auto", None, "embedded"),
        ("auto", "http://localhost:8000/v1", "openai"),
        ("embedded", "http://localhost:8000/v1", "embedded"),
        ("openai", None, "openai"),
    ],
)
def test_resolved_provider(tmp_path: Path, provider: str, base_url: str | None, expected: str) -> None:
    for section in ("chat", "embedding"):
        settings = load_settings(
            tmp_path, {f"{section}.provider": provider, f"{section}.base_url": base_url}, env={}
        )
        assert getattr(settings, section).resolved_provider == expected


def test_resolved_provider_from_env(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, env={"UNIRAG_CHAT_BASE_URL": "http://gpu:8000/v1"})
    assert settings.chat.resolved_provider == "openai"
    assert settings.embedding.resolved_provider == "embedded"


def test_env_reaches_nested_list_and_mapping_settings() -> None:
    settings = load_settings(env={
        "UNIRAG_GRAPH_TREE_METHOD": "kmeans",
        "UNIRAG_GRAPH_GRAPHS": "[kg, tree]",
        "UNIRAG_INDEX_ARCHRAG": "{augment: codicil, max_levels: 2}",
    })
    assert settings.graph.tree.method == "kmeans"
    assert settings.graph.graphs == ["kg", "tree"]
    assert settings.index.archrag == {"augment": "codicil", "max_levels": 2}
    with pytest.raises(ConfigError, match="UNIRAG_GRAPH_GRAPHS: not a YAML list"):
        load_settings(env={"UNIRAG_GRAPH_GRAPHS": "[kg"})
    with pytest.raises(ConfigError, match="graph.tree.method"):
        load_settings(env={"UNIRAG_GRAPH_TREE_METHOD": "spectral"})


def test_prompt_window_keeps_the_count_margin_free() -> None:
    """Prompts pack to the window less the margin for a model tokenizer that counts
    more tokens than ours; a margin of 0 trusts our count."""
    assert Settings().chat.prompt_window == 7200
    assert Settings.model_validate({"chat": {"count_margin": 0}}).chat.prompt_window == 8000
    with pytest.raises(ValueError):
        Settings.model_validate({"chat": {"count_margin": 0.5}})


def test_the_servers_key_variable_is_not_an_unknown_setting(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``UNIRAG_SERVER_API_KEY=KEY unirag serve`` is how the server's key is meant to be given (the
    command line would show it in ps); the settings loader refused it as an unknown variable."""
    from unirag.config import load_settings

    settings = load_settings(tmp_path, env={"UNIRAG_SERVER_API_KEY": "secret"})
    assert "secret" not in repr(settings.public_dict())
