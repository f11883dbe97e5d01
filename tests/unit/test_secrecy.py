"""Which variables are secret, what commands see of them, and how their values stay out of text and logs."""

from __future__ import annotations

import errno
import io
import json
import logging
import os
from pathlib import Path

import pytest

from codling.config import Settings, load_settings
from codling.errors import ConfigError
from codling.llm.providers import credential_names
from codling.seal import seal
from codling.secrecy import (
    CREDENTIAL_SHAPES,
    RedactingFormatter,
    RedactingStream,
    Redactor,
    credentials_in,
    is_secret_name,
    is_secret_value,
    redact_credentials,
    scrubbed,
    secret_names,
)

SECRET = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "DB_PASS",
    "DB_PASSWORD",
    "MY_SECRET",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SMTP_PASSWD",
    "apiKey",
    "githubToken",
    "npm-token",
    "GITHUBTOKEN",
    "CLIENTSECRET",
    "KEY",
    "my.secret.value",
    # (issue 29 D9: well-known credentials whose words say nothing on their own)
    "MYSQL_PWD",
    "SENTRY_DSN",
    "NPM_CONFIG__AUTH",
    "SLACK_WEBHOOK_URL",
    "DOCKER_AUTH_CONFIG",
]
NOT_SECRET = [
    "PATH",
    "HOME",
    "PWD",
    "KEYBOARD",
    "KEYBOARD_LAYOUT",
    "PASSAGE",
    "BYPASS_PROXY",
    "MONKEY",
    "TOKENIZERS_PARALLELISM",
    "SSH_AUTH_SOCK",
    "OLDPWD",
    "AUTH_MODE",
    "KEYTIMEOUT",
    "PYTHON_KEYRING_BACKEND",
    "OPENAI_BASE_URL",
]


@pytest.mark.parametrize("name", SECRET)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", NOT_SECRET)
def test_names_that_only_contain_a_secret_word(name: str) -> None:
    assert not is_secret_name(name)


def test_known_credentials_are_secret_whatever_their_names() -> None:
    env = {"CLOUD_ACCESS": "ca-0123456789", "PATH": "/bin", "GH_TOKEN": "ghp_0123456789"}
    assert secret_names(env) == {"GH_TOKEN"}
    assert secret_names(env, known={"CLOUD_ACCESS", "OTHER"}) == {"GH_TOKEN", "CLOUD_ACCESS"}


def test_a_base_url_is_no_secret_unless_it_holds_a_password() -> None:
    # (issue 29 D16: errors said "check that [redacted]/ is reachable"; D9: a URL's password went everywhere)
    assert not {"OPENAI_BASE_URL", "OLLAMA_BASE_URL", "ANTHROPIC_BASE_URL"} & credential_names()
    env = {
        "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1",
        "OLLAMA_BASE_URL": "https://user:s3cret-pw@ollama.example",
        "DATABASE_URL": "postgres://app:hunter2hunter2@db.internal:5432/app",
        "HOMEPAGE": "https://example.com/a:b@c",  # (no password before a host: a path holding ":" and "@")
    }
    assert secret_names(env, credential_names()) == {"OLLAMA_BASE_URL", "DATABASE_URL"}


JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
CREDENTIAL_VALUES = [
    "ghp_" + "a1B2" * 9,
    "gho_" + "Z" * 36,
    "ghs_" + "0" * 36,
    "github_pat_11ABCDEFG0" + "x" * 72,
    "glpat-" + "Ab1_" * 5,
    "sk-" + "A1b2" * 12,
    "sk-proj-" + "x_Y-" * 30,
    "sk-ant-api03-" + "q" * 93,
    "xoxb-1234567890-0987654321-AbCdEf",
    "xapp-1-A012BCDEF-1234567890-abcdef",
    "AKIAIOSFODNN7EXAMPLE",
    "ASIAY34FZKBOKMUTVV7A",
    "AIzaSyA-" + "1" * 31,
    "hf_" + "AbC" * 11 + "d",
    "npm_" + "N" * 36,
    "pypi-AgEIcHlwaS5vcmc" + "P" * 60,
    "sk_live_" + "4" * 24,
    JWT,
    "Bearer ghp_" + "a" * 36,  # inside a longer value
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n",
]
ORDINARY_VALUES = [
    "/usr/local/bin:/usr/bin:/bin",
    "xterm-256color",
    "en_US.UTF-8",
    "sk-learn",
    "sk-" + "a" * 31,  # too short for a key
    "task-sk-" + "a" * 40,  # inside a word
    "ghp_short",
    "AKIA",
    "AKIAIOSFODNN7EXAMPLEXX",  # longer than a key id
    "hf_hub_offline",
    "eyJhbGciOiJIUzI1NiJ9",  # a JWT's header alone
    "https://api.openai.com/v1",
    "main",
]


@pytest.mark.parametrize("value", CREDENTIAL_VALUES)
def test_a_variable_holding_a_well_known_credential_is_secret_whatever_its_name(value: str) -> None:
    # (issue 29 D9: secrets by value and shape)
    assert is_secret_value(value)
    assert secret_names({"CI_BOT": value, "PATH": "/bin"}) == {"CI_BOT"}


@pytest.mark.parametrize("value", ORDINARY_VALUES)
def test_ordinary_values_are_no_credentials(value: str) -> None:
    assert not is_secret_value(value)


def test_a_credential_inside_a_longer_value_is_redacted_on_its_own_too() -> None:
    token = "ghp_" + "a" * 36
    env = {"AUTH_HEADER_VALUE": f"Bearer {token}", "DEPLOY": JWT, "PATH": "/bin"}
    assert credentials_in(env["AUTH_HEADER_VALUE"]) == [token]
    assert scrubbed(env) == {"PATH": "/bin"}
    redact = Redactor.from_env(env)
    assert redact(f"got {token} and {JWT} and Bearer {token}") == "got [redacted] and [redacted] and [redacted]"


def test_scrubbed_keeps_the_rest_and_what_is_allowed() -> None:
    env = {"PATH": "/bin", "HOME": "/home/u", "GITHUB_TOKEN": "ghp_0123456789", "DB_PASS": "hunter2hunter2"}
    assert scrubbed(env) == {"PATH": "/bin", "HOME": "/home/u"}
    assert scrubbed(env, allow=["GITHUB_TOKEN"]) == {
        "PATH": "/bin",
        "HOME": "/home/u",
        "GITHUB_TOKEN": "ghp_0123456789",
    }


def test_the_redactor_takes_every_secret_value_allowed_or_not() -> None:
    env = {"GITHUB_TOKEN": "ghp_0123456789", "DB_PASS": "hunter2hunter2", "PATH": "/usr/bin:/bin"}
    redact = Redactor.from_env(env)
    assert redact("t=ghp_0123456789 p=hunter2hunter2 /usr/bin:/bin") == "t=[redacted] p=[redacted] /usr/bin:/bin"


def test_a_log_line_carrying_a_secret_is_redacted() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(RedactingFormatter("%(levelname)s %(message)s", Redactor(["sk-live-0123456789"])))
    log = logging.getLogger("codling.test_secrecy")
    log.addHandler(handler)
    try:
        log.warning("request failed with key %s", "sk-live-0123456789")
        try:
            raise RuntimeError("401 for sk-live-0123456789")
        except RuntimeError:
            log.exception("boom")
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    assert "sk-live-0123456789" not in text
    assert text.startswith("WARNING request failed with key [redacted]\nERROR boom\n")
    assert "RuntimeError: 401 for [redacted]" in text


def _settings_with(tmp_path: Path, toml: str) -> Settings:
    (tmp_path / "config.toml").write_text(toml)
    return load_settings({"CODLING_HOME": str(tmp_path)})


def test_command_env_allow_is_read_from_config(tmp_path: Path) -> None:
    settings = _settings_with(tmp_path, 'command_env_allow = ["GITHUB_TOKEN", "NPM_TOKEN"]\n')
    assert settings.command_env_allow == ("GITHUB_TOKEN", "NPM_TOKEN")
    assert load_settings({"CODLING_HOME": str(tmp_path / "none")}).command_env_allow == ()


@pytest.mark.parametrize("value", ['"GITHUB_TOKEN"', "[1]", '[""]', "true"])
def test_command_env_allow_must_be_a_list_of_names(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="command_env_allow must be a list of variable names"):
        _settings_with(tmp_path, f"command_env_allow = {value}\n")


def test_codling_s_log_redacts_the_environment_s_secrets(tmp_path: Path) -> None:
    from codling.cli.acp_main import setup_logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    log_file = tmp_path / "codling.log"
    secrets = {"DB_PASS": "db-pass-0123456789", "OPENAI_BASE_URL": "https://user:pw@proxy.example/v1"}
    try:
        setup_logging({"CODLING_LOG_FILE": str(log_file), "CODLING_LOG_LEVEL": "INFO", **secrets})
        logging.getLogger("codling.test").info("connecting to %s with %s", *secrets.values())
        for handler in root.handlers:
            handler.close()
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    assert log_file.read_text().endswith("INFO codling.test: connecting to [redacted] with [redacted]\n")


# -- sealing: when codling cannot restart itself without its secrets, it goes on and says so -------------------


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_secrets_too_large_for_the_pipe_are_not_sealed_and_stderr_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    restarts: list[list[str]] = []
    seal(
        (),
        {"PATH": "/bin", "HUGE_TOKEN": "t" * 70_000},
        ["codling", "acp"],
        lambda _, argv, __: restarts.append(argv),
        erase=lambda hidden: False,  # not Linux: only a restart would hide them
    )
    assert restarts == []
    assert capsys.readouterr() == (
        "",
        "codling: warning: its secret variables are too large to hand over, so commands could read its secret "
        "variables from /proc\n",
    )


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_a_restart_that_fails_goes_on_unsealed_says_why_and_leaks_no_pipe(capsys: pytest.CaptureFixture[str]) -> None:
    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        raise OSError(errno.E2BIG, os.strerror(errno.E2BIG))

    before = _open_fds()
    seal((), {"PATH": "/bin", "GITHUB_TOKEN": "ghp_0123456789"}, ["codling", "acp"], execve, erase=lambda hidden: False)
    assert _open_fds() == before
    assert capsys.readouterr() == (
        "",
        "codling: warning: it could not restart itself (Argument list too long), so commands could read its "
        "secret variables from /proc\n",
    )


def test_a_stream_redacts_a_secret_split_across_writes() -> None:
    import io

    secret = "ghp_0123456789abcdef"
    out = io.StringIO()
    stream = RedactingStream(out, Redactor([secret]))
    for piece in ("token: ", "ghp_01", "2345678", "9abcdef", " and g", "host is up\n", "tail gh"):
        stream.write(piece)
    assert secret[:6] not in out.getvalue()  # what may start a secret waits for the next write
    stream.close()
    assert out.getvalue() == "token: [redacted] and ghost is up\ntail gh"


def test_a_url_s_password_is_redacted_on_its_own_too() -> None:
    env = {"DATABASE_URL": "postgres://app:s3cr%40t-passw0rd@db.internal:5432/app"}
    redact = Redactor.from_env(env)
    assert redact("PGPASSWORD=s3cr@t-passw0rd psql") == "PGPASSWORD=[redacted] psql"  # percent-decoded
    assert redact("url s3cr%40t-passw0rd") == "url [redacted]"
    assert redact(env["DATABASE_URL"]) == "[redacted]"
    assert Redactor.from_env({"DB_URL": "mysql://u:short@h/d"})("short") == "short"  # too short alone


ONE_OF_EACH_SHAPE = {
    "GitHub token": "ghp_" + "a1B2" * 9,
    "GitHub fine-grained token": "github_pat_" + "A1b_" * 13,
    "GitLab token": "glpat-" + "x1Y2z" * 4,
    "OpenAI or Anthropic key": "sk-ant-api03-" + "Q" * 40,
    "Slack token": "xoxb-1234567890-abcdefABCDEF",
    "AWS access key id": "AKIA" + "Z7" * 8,
    "Google API key": "AIza" + "b" * 35,
    "Hugging Face token": "hf_" + "c" * 30,
    "npm token": "npm_" + "d" * 36,
    "PyPI token": "pypi-" + "e" * 50,
    "Stripe key": "sk_live_" + "f" * 24,
    "SendGrid key": "SG." + "g" * 22 + "." + "h" * 22,
    "DigitalOcean token": "dop_v1_" + "a" * 64,
    "Shopify token": "shpat_" + "0" * 32,
    "Groq key": "gsk_" + "i" * 40,
    "Replicate token": "r8_" + "j" * 30,
    "xAI key": "xai-" + "k" * 50,
    "JSON web token": "eyJ" + "l" * 12 + ".eyJ" + "m" * 12 + ".sig",
    "PEM private key": "-----BEGIN RSA PRIVATE KEY-----MIIEo-----END RSA PRIVATE KEY-----",
}


def test_there_is_an_example_of_every_credential_shape() -> None:
    assert set(ONE_OF_EACH_SHAPE) == {name for name, _ in CREDENTIAL_SHAPES}


@pytest.mark.parametrize("name", sorted(ONE_OF_EACH_SHAPE))
def test_stored_text_loses_a_key_of_every_shape_in_no_variable(name: str) -> None:
    key = ONE_OF_EACH_SHAPE[name]
    assert redact_credentials(f"use {key}, thanks") == "use [redacted], thanks"
    as_json = json.dumps({"text": f"my key:\n{key}"}, ensure_ascii=False)
    assert redact_credentials(as_json) == '{"text": "my key:\\n[redacted]"}'  # typed on a line of its own


def test_stored_text_keeps_what_only_looks_like_a_key_and_loses_url_passwords() -> None:
    kept = "task-sk-" + "a" * 40 + " sk-learn ghp_short AKIAlower"
    assert redact_credentials(kept) == kept
    assert (
        redact_credentials("DATABASE_URL=postgres://app:hunter22@db/x") == "DATABASE_URL=postgres://app:[redacted]@db/x"
    )
