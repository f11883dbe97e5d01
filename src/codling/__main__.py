"""Entry point of the ``codling`` console script."""

from __future__ import annotations

import sys


def main() -> None:
    """Run the CLI. ``codling acp`` takes a fast path that skips typer and rich, to answer initialize sooner.

    First of all, codling's secret variables are moved out of its process environment and its memory is made
    unreadable to other processes of the user, the commands it runs included (``codling.seal``)."""
    from codling.seal import seal, undumpable

    # By name only: the providers' table (llm/providers.py) adds just base URLs and costs ~40 ms to import, paid
    # twice when codling restarts; commands still lose those too (tools/local.py).
    seal()
    undumpable()  # after seal(): execve makes a process dumpable again
    if sys.argv[1:] == ["acp"]:
        from codling.cli.acp_main import run_acp

        run_acp()
        return
    from codling.cli.app import app, resume_without_id

    sys.argv = resume_without_id(sys.argv)
    app()


if __name__ == "__main__":
    main()
