"""``codling models``: the models codling knows, their context limits, whether credentials are set, and which one
``codling run`` would use and why (a table laid out to the terminal's width). rich loads only when it runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codling.cli.session_args import fail_config
from codling.cli.session_plan import load
from codling.config import Settings
from codling.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console


def models() -> None:
    """List the models codling knows, their context limits and whether credentials are set; mark the one
    `codling run` would use, and say why."""
    from rich.console import Console

    from codling.llm.providers import has_credentials, select_model

    try:
        settings, catalog = load()
    except ConfigError as e:
        raise fail_config(e) from e
    try:
        choice = select_model(None, settings, catalog)
    except ConfigError as e:
        selected, why = None, str(e)
    else:
        selected, why = choice.info.id, _why_selected(choice.source, settings)
    listed = list(catalog)
    if selected is not None and all(info.id != selected for info in listed):
        listed.insert(0, choice.info)  # chosen by name, and in no catalog
    rows = [
        (
            info.id,
            f"{info.context_limit:,}",
            "yes" if has_credentials(info.id, settings.env) else "no",
            "← selected" if info.id == selected else "",
        )
        for info in listed
    ]
    print_models(rows, f"selected: {selected} ({why})" if selected else f"no model selected: {why}", Console())


def print_models(rows: list[tuple[str, str, str, str]], selected: str, console: Console) -> None:
    """The models table and the line saying which is selected, laid out to ``console``'s width: a value too long
    for its column folds onto more lines rather than ending in "…" (the ids were cut at 40 columns)."""
    from rich.table import Table

    table = Table("model", "context limit", "credentials", "", box=None, pad_edge=False)  # as `sessions list`
    for column in table.columns:
        column.overflow = "fold"  # rich's default cuts a value too long for its column (issue 32)
    table.columns[1].min_width = max((len(row[1]) for row in rows), default=0)  # a number is read whole
    for row in rows:
        table.add_row(*row)
    console.print(table)
    console.print(selected, highlight=False, soft_wrap=True)  # one line, for the terminal to wrap: a path stays whole


def _why_selected(source: str, settings: Settings) -> str:
    from codling.paths import config_file

    return {
        "CODLING_MODEL": "set by CODLING_MODEL",
        "config.toml": f"set by model in {config_file(settings.home)}",
        "codling login": "chosen at `codling login`; choose another with --model, CODLING_MODEL or model in "
        "config.toml",
        "server": "the first model the server at OPENAI_BASE_URL lists",
        "credentials": "the first listed whose provider has credentials; choose another with --model, "
        "CODLING_MODEL or model in config.toml",
    }.get(source, f"from {source}")
