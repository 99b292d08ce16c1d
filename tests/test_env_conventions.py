"""Issue 17 conventions: .env files, the standard OPENAI_* variables, and saying which model answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from unirag.config import OPENAI_DEFAULT_BASE_URL, OPENAI_DEFAULT_MODEL, load_settings


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "UNIRAG_CHAT_MODEL", "UNIRAG_CHAT_BASE_URL",
                 "UNIRAG_CHAT_API_KEY", "UNIRAG_TOP_K", "UNIRAG_RETRIEVAL_TOP_K", "UNIRAG_CONCURRENCY"):
        monkeypatch.delenv(name, raising=False)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def test_dotenv_precedence(clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "unirag.yaml").write_text("concurrency: 2\nretrieval: {top_k: 3}\nmax_retries: 1\n")
    (clean_env / ".env").write_text("# the working directory's\nUNIRAG_CONCURRENCY=5\nUNIRAG_RETRIEVAL_TOP_K=6\n"
                                    "export UNIRAG_MAX_RETRIES='7'\n")
    (ws / ".env").write_text('UNIRAG_RETRIEVAL_TOP_K="9"  \n')
    settings = load_settings(ws)
    assert settings.concurrency == 5  # .env over unirag.yaml
    assert settings.retrieval.top_k == 9  # the workspace's .env over the working directory's
    assert settings.max_retries == 7
    monkeypatch.setenv("UNIRAG_RETRIEVAL_TOP_K", "11")  # the real environment over both
    assert load_settings(ws).retrieval.top_k == 11
    assert load_settings(ws, {"retrieval.top_k": 12}).retrieval.top_k == 12  # flags over everything


def test_openai_variables_name_the_chat_endpoint(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    settings = load_settings(None)
    assert settings.chat.resolved_provider == "openai"
    assert (settings.chat.base_url, settings.chat.model) == (OPENAI_DEFAULT_BASE_URL, OPENAI_DEFAULT_MODEL)
    assert settings.chat.api_key is not None and settings.chat.api_key.get_secret_value() == "sk-test-key"
    assert settings.chat.describe() == f"{OPENAI_DEFAULT_MODEL} at api.openai.com"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    monkeypatch.setenv("OPENAI_MODEL", "qwen2.5")
    assert load_settings(None).chat.describe() == "qwen2.5 at localhost"


def test_unirag_chat_settings_win_over_openai_variables(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    monkeypatch.setenv("OPENAI_MODEL", "gpt-x")
    monkeypatch.setenv("UNIRAG_CHAT_BASE_URL", "http://vllm:8000/v1")
    monkeypatch.setenv("UNIRAG_CHAT_MODEL", "llama")
    chat = load_settings(None).chat
    assert (chat.base_url, chat.model, chat.api_key) == ("http://vllm:8000/v1", "llama", None)
    monkeypatch.delenv("UNIRAG_CHAT_BASE_URL")
    monkeypatch.delenv("UNIRAG_CHAT_MODEL")
    assert load_settings(None, {"chat.provider": "embedded"}).chat.describe().endswith("(embedded, offline)")


def test_openai_key_in_dotenv_is_honoured(clean_env: Path) -> None:
    (clean_env / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv\nOPENAI_MODEL=gpt-4.1-mini\n")
    assert load_settings(None).chat.describe() == "gpt-4.1-mini at api.openai.com"


# -- the command line ---------------------------------------------------------------------------

def test_help_lists_every_format_and_no_bool_metavar() -> None:
    from typer.testing import CliRunner

    from unirag.cli import INDEX_FORMATS_HELP, app
    from unirag.text.loaders import FORMATS

    assert INDEX_FORMATS_HELP.split(": ", 1)[1].split("|") == list(FORMATS[:7]) + list(FORMATS[7:])
    assert set(INDEX_FORMATS_HELP.split(": ", 1)[1].split("|")) == set(FORMATS)
    for command in ("index", "query", "stats"):
        text = CliRunner().invoke(app, [command, "--help"], terminal_width=200).output
        assert "<bool>" not in text and "BOOLEAN" not in text, text
    assert "pdf|html|docx|csv" in CliRunner().invoke(app, ["index", "--help"], terminal_width=200).output


def test_log_file_keeps_messages_and_never_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from fakes import HashEmbedder, small_corpus
    from typer.testing import CliRunner

    import unirag.cli as cli
    from unirag.llm.factory import build_stack

    key = "sk-never-in-the-log-42"
    monkeypatch.setenv("UNIRAG_CHAT_API_KEY", key)
    monkeypatch.setenv("UNIRAG_RETRY_BASE_DELAY", "0")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(cli, "_stack", lambda settings, ws: build_stack(settings, ws.cache(), embedder=HashEmbedder(),
                                                                        on_retry=cli._err))
    ws = tmp_path / "ws"
    runner = CliRunner()
    indexed = runner.invoke(cli.app, ["index", str(small_corpus(tmp_path)), "-w", str(ws), "-q",
                                      "--extractor", "nlp"])
    assert indexed.exit_code == 0, indexed.output
    result = runner.invoke(cli.app, ["-v", "query", "What is the capital of France?", "-w", str(ws), "-m",
                                     "zeroshot", "--chat-base-url", f"http://127.0.0.1:{port}/v1",
                                     "--chat-model", "m"])
    assert result.exit_code != 0
    log = (ws / "logs" / "unirag.log").read_text(encoding="utf-8")
    assert "chat model: m at 127.0.0.1" in log and "retry 1/1" in log and "start the server" in log
    assert "unirag: log:" in result.stderr  # -v: the log on stderr too
    assert key not in log and key not in result.stderr


def test_init_writes_every_setting_with_its_default(tmp_path: Path) -> None:
    import dataclasses

    import yaml
    from pydantic import BaseModel
    from typer.testing import CliRunner

    from unirag.cli import app
    from unirag.config import Settings
    from unirag.artifacts.settings_template import hierarchy_configs

    assert CliRunner().invoke(app, ["init", str(tmp_path / "ws")]).exit_code == 0
    text = (tmp_path / "ws" / "unirag.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(text) is None  # all commented out: the defaults apply
    body = text.split("\n\n", 1)[1]
    uncommented = yaml.safe_load("\n".join(line[2:] for line in body.splitlines()))
    settings = Settings.model_validate(uncommented)
    for name, config in hierarchy_configs().items():
        assert set(uncommented["index"][name]) == {f.name for f in dataclasses.fields(config)}
        uncommented["index"][name] = {}
    assert Settings.model_validate(uncommented) == Settings()  # every default as it is

    def paths(model: type[BaseModel], prefix: str = "") -> set[str]:
        out = set()
        for name, field in model.model_fields.items():
            kind = field.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                out |= paths(kind, f"{prefix}{name}.")
            else:
                out.add(prefix + name)
        return out

    def listed(data: dict, prefix: str = "") -> set[str]:
        out = set()
        for key, value in data.items():
            if isinstance(value, dict) and key not in hierarchy_configs():
                out |= listed(value, f"{prefix}{key}.")
            else:
                out.add(prefix + key)
        return out

    assert paths(Settings) == listed(uncommented)
    assert settings.retrieval.max_question_tokens == 2000
