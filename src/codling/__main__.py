"""Entry point of the ``codling`` console script."""

from __future__ import annotations

import os
import sys
from typing import TextIO


def main() -> None:
    """Run the CLI. ``codling acp`` takes a fast path that skips typer and rich, to answer initialize sooner.

    First of all, codling's secret variables are erased from what ``/proc`` shows of its environment and its
    memory is made unreadable to other processes of the user, the commands it runs included (``codling.seal``)."""
    from codling.cli.argv import runs_tools
    from codling.seal import seal, undumpable
    from codling.startup import imports_without_gc

    # By name only: the providers' table (llm/providers.py) adds just base URLs and costs ~40 ms to import;
    # commands still lose those too (tools/local.py). Where the secrets cannot be erased in place, only a command
    # that may run tools pays for the restart (a second Python start-up).
    seal(restart=runs_tools(sys.argv[1:]) and "_CODLING_COMPLETE" not in os.environ)
    undumpable()  # after seal(): execve makes a process dumpable again
    _stored_keys()
    if sys.argv[1:3] == ["acp", "login"]:
        # An editor's terminal sign-in runs the agent's own command with the method's args appended.
        sys.argv[1:3] = ["login"]
    if sys.argv[1:] == ["acp"]:
        from codling.cli.acp_main import run_acp

        run_acp()
        return
    with imports_without_gc():
        from codling.cli.app import app, command_names
        from codling.cli.session_args import resume_without_id
    from codling.cli.argv import Refusal, route

    argv = resume_without_id(sys.argv)
    if "_CODLING_COMPLETE" not in os.environ:  # shell completion reads its words from the environment
        routed = route(argv[1:], command_names(), stdin_tty=_tty(sys.stdin), stdout_tty=_tty(sys.stdout))
        if isinstance(routed, Refusal):
            print(f"codling: {routed.message}", file=sys.stderr)
            sys.exit(2)
        argv = [argv[0], *routed]
    sys.argv = argv
    app()


def _tty(stream: TextIO | None) -> bool:
    return stream is not None and stream.isatty()


def _stored_keys() -> None:
    """The keys ``codling login`` stored, for the variables the environment does not set (``codling.credentials``);
    a file codling must not use is said on stderr (stdout is JSON-RPC's in ``codling acp``)."""
    from codling.credentials import apply
    from codling.errors import ConfigError

    try:
        apply(os.environ)
    except ConfigError as e:
        print(f"codling: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
