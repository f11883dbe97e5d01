"""``codling acp`` without typer or rich: logging to stderr or a file, then the ACP server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Mapping


def setup_logging(env: Mapping[str, str] | None = None) -> None:
    """Log to stderr, or to ``$CODLING_LOG_FILE``; never to stdout, which in ``codling acp`` is JSON-RPC only.

    ``$CODLING_LOG_LEVEL`` sets the level (default WARNING). The values of the environment's secret variables
    (``codling.secrecy``) are redacted from every line, tracebacks included. A log file that cannot be opened
    is a ``ConfigError``.
    """
    from codling.errors import ConfigError
    from codling.llm.providers import credential_names
    from codling.secrecy import RedactingFormatter, Redactor

    env = os.environ if env is None else env
    level = env.get("CODLING_LOG_LEVEL", "WARNING").upper()
    target = env.get("CODLING_LOG_FILE")
    try:
        handler: logging.Handler = logging.FileHandler(target) if target else logging.StreamHandler(sys.stderr)
    except OSError as e:
        raise ConfigError(f"the log file CODLING_LOG_FILE={target} cannot be written: {e.strerror or e}") from e
    redact = Redactor.from_env(env, credential_names())
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s", redact))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level, logging.WARNING))


def run_acp(model: str | None = None) -> None:
    """Serve ACP on stdio until the client closes the connection; on SIGTERM, SIGHUP or SIGINT close every
    session (turns end cancelled and recorded, commands stopped) and exit with 128 + the signal's number. A
    closed stdin or stdout (no client could be there) or a log file that cannot be written is a usage error (exit
    2, with the reason on stderr)."""
    from codling.errors import ConfigError

    for name in ("stdin", "stdout"):
        if getattr(sys, name) is None:  # Python's stand-in for a descriptor closed when it started
            print(
                f"codling acp: {name} is closed; an editor speaks ACP to codling over stdin and stdout", file=sys.stderr
            )
            sys.exit(2)
    try:
        setup_logging()
    except ConfigError as e:
        print(f"codling acp: {e}", file=sys.stderr)
        sys.exit(2)
    from codling.startup import imports_without_gc, one_malloc_arena

    one_malloc_arena()  # before the warm-up thread, the executor's and the SDK's exist
    with imports_without_gc():  # the ACP SDK's schemas: most of the CPU before initialize is answered
        from codling.acp.serving import serve

    received: int | None = None
    with contextlib.suppress(KeyboardInterrupt):
        received = asyncio.run(serve(model))
    if received is not None:
        sys.exit(128 + received)
