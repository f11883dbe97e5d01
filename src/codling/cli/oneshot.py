"""``codling run``'s turn: one prompt in a recorded session, drawn live, answered on stdout, with an exit code.

Piped or redirected, stdout carries the answer alone (the turn's last message, at its end) and what the turn
does is drawn on stderr; ``--json`` prints JSON lines instead (a session event, the turn's events, a result
event). The exit codes are :mod:`codling.cli.session_plan`'s; SIGTERM and SIGHUP end the turn as Ctrl-C does and exit
with 128 + N.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, cast

from codling.brain.prompt import PromptBlock
from codling.cli.session_plan import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_LIMIT,
    EXIT_OK,
    EXIT_USAGE,
    SessionPlan,
    open_live,
    unknown_model,
)
from codling.config import Settings
from codling.errors import CodlingError
from codling.llm.catalog import ModelInfo
from codling.secrecy import RedactingStream, Redactor
from codling.shutdown import exit_after_grace, handling
from codling.vocabulary import PermissionMode

if TYPE_CHECKING:
    from codling.brain.session import TurnResult
    from codling.cli.approve import TerminalApprover
    from codling.cli.notify import Notifier
    from codling.cli.render import TerminalRenderer
    from codling.cli.script_output import LastMessage
    from codling.cli.script_stream import ScriptStream
    from codling.store.live import LiveSession
    from codling.tools.ports import Approver
    from codling.vocabulary import StopReason


@dataclass(frozen=True)
class Output:
    """Where a one-shot run reports: JSON lines or text, and the file for its last message (if any)."""

    json: bool
    last_message: Path | None
    verbose: bool = False
    model_title: bool = False
    """Ask the model for a new session's title (else its first request names it, at once)."""


@dataclass(frozen=True)
class Limits:
    """What one ``codling run`` turn may spend: model requests and US dollars (None: config.toml's request
    limit, no spending cap)."""

    max_requests: int | None = None
    max_cost: float | None = None

    def unpriced(self, model: ModelInfo) -> str | None:
        """Why these limits cannot hold for ``model`` (a spending cap on a model without a price), or None."""
        if self.max_cost is None or model.price is not None:
            return None
        return (
            f'--max-cost needs the model\'s price, and {model.id} has none; add "price": [input, output] (US '
            "dollars per million tokens) to its entry in $CODLING_HOME/models.json, or use --max-requests"
        )

    def stopped(self, stop_reason: StopReason, result: TurnResult, resume: str) -> str | None:
        """What to tell the user when the turn stopped at one of its limits (None: it did not)."""
        again = f'what it did is recorded; continue with: codling run --resume {resume} "go on"'
        if stop_reason == "max_turn_requests":
            requests = result.usage.requests
            made = f"{requests} model request{'s' if requests != 1 else ''}"
            if self.max_requests is None:
                return (
                    f"stopped: the turn made {made}, as many as max_requests_per_turn in config.toml allows, so "
                    f"its next request was not made; raise that, or {again}"
                )
            return (
                f"stopped: the turn made {made}, as many as --max-requests {self.max_requests} allows, so its "
                f"next request was not made; raise it, or {again}"
            )
        if stop_reason == "max_cost":
            spent = f"${result.cost:.4f} at list prices" if result.cost is not None else "its spend"
            return (
                f"stopped: the turn had spent {spent}, past --max-cost {self.max_cost:g} US dollars, so its next "
                f"model request was not made; raise the cap, or {again}"
            )
        return None


def terminal_views(
    screen: TextIO, *, err: TextIO | None, approve: bool, verbose: bool
) -> tuple[TerminalRenderer, TerminalApprover | None]:
    """The renderer drawing turns on ``screen`` (notes and the spinner on ``err`` when it is a terminal) and, if
    ``approve``, the approver asking on the terminal; they share the diffs already shown and the
    :class:`~codling.cli.render.PromptGate`."""
    from codling.cli.approve import TerminalApprover
    from codling.cli.draw import can_animate, use_color
    from codling.cli.render import PromptGate, TerminalRenderer

    color = use_color(screen, os.environ)
    shown_diffs: set[str] = set()  # an edit's diff, shown when the user allowed it, is not drawn again
    gate = PromptGate()  # a question is never drawn over
    approver = (
        TerminalApprover(input=sys.stdin, output=sys.stderr, color=color, shown_diffs=shown_diffs, gate=gate)
        if approve
        else None
    )
    animate = can_animate(sys.stderr, os.environ) or (err is not None and can_animate(screen, os.environ))
    renderer = TerminalRenderer(
        screen, err=err, color=color, interactive=animate, verbose=verbose, shown_diffs=shown_diffs, gate=gate
    )
    return renderer, approver


async def run_turn(
    prompt: tuple[PromptBlock, ...],
    settings: Settings,
    plan: SessionPlan,
    mode: PermissionMode | None,
    interactive: bool,
    output: Output,
    limits: Limits = Limits(),
) -> int:
    """Run ``prompt`` in ``plan``'s session and report it as ``output`` says; the exit code. Everything it
    writes (the answer, ``--json``, ``-o``, what is drawn on stderr) has the environment's secret values
    redacted, as history.jsonl has: a run's output ends up in CI logs."""
    from codling.llm.providers import credential_names

    redact = Redactor.from_env(settings.env, credential_names())
    with redacted_output(redact):
        return await _run_turn(prompt, settings, plan, mode, interactive, output, redact, limits)


@contextmanager
def redacted_output(redact: Redactor) -> Iterator[Callable[[], None]]:
    """``sys.stdout`` and ``sys.stderr`` passing through ``redact`` meanwhile (``RedactingStream``). Yields a
    function writing out what they hold back (the end of a text that may start a secret), for a caller about to
    wait for the user (the chat's prompt)."""
    streams = sys.stdout, sys.stderr
    redacting = RedactingStream(sys.stdout, redact), RedactingStream(sys.stderr, redact)
    sys.stdout, sys.stderr = cast(tuple[TextIO, TextIO], redacting)

    def settle() -> None:
        for stream in redacting:
            stream.close()

    try:
        yield settle
    finally:
        settle()
        sys.stdout, sys.stderr = streams


async def _run_turn(
    prompt: tuple[PromptBlock, ...],
    settings: Settings,
    plan: SessionPlan,
    mode: PermissionMode | None,
    interactive: bool,
    output: Output,
    redact: Redactor,
    limits: Limits,
) -> int:
    """The run's phases: its views, its session, the turn driven to its end, the report and the exit code."""
    views = _views(settings, output, interactive, redact)
    live = _open(settings, plan, mode, views.asker, output, limits)
    if live is None:
        return EXIT_USAGE
    last = _watch(live, plan, views)
    ended = await _drive(live, prompt, views.renderer)
    _report(live, ended, last, views, output, limits, redact)
    return _exit_code(ended, live.recorder.file.problem)


@dataclass(frozen=True)
class _Views:
    """What a run draws its turn on and asks the user through."""

    renderer: ScriptStream | TerminalRenderer
    asker: Approver | None
    notifier: Notifier | None
    answer_only: bool
    """stdout carries the answer alone (piped or redirected, without ``--json``); the turn is drawn on stderr."""


def _views(settings: Settings, output: Output, interactive: bool, redact: Redactor) -> _Views:
    """The renderer (``--json``'s lines, or the terminal's drawing), the approver if someone can answer, and the
    notifier, which also rings when the approver asks."""
    from codling.cli.script_stream import ScriptStream

    answer_only = not output.json and not sys.stdout.isatty()
    renderer: ScriptStream | TerminalRenderer
    approver: TerminalApprover | None
    if output.json:
        from codling.cli.approve import TerminalApprover
        from codling.cli.draw import use_color

        renderer = ScriptStream(sys.stdout, redact)
        color = use_color(sys.stderr, os.environ)
        approver = TerminalApprover(input=sys.stdin, output=sys.stderr, color=color) if interactive else None
    else:
        renderer, approver = terminal_views(
            sys.stderr if answer_only else sys.stdout,
            err=None if answer_only else sys.stderr,
            approve=interactive,
            verbose=output.verbose,
        )
    notifier = run_notifier(settings, output, sys.stdout, os.environ)
    asker: Approver | None = approver
    if notifier is not None and approver is not None:
        from codling.cli.notify import NotifyingApprover

        asker = NotifyingApprover(approver, notifier)
    return _Views(renderer, asker, notifier, answer_only)


def _open(
    settings: Settings,
    plan: SessionPlan,
    mode: PermissionMode | None,
    asker: Approver | None,
    output: Output,
    limits: Limits,
) -> LiveSession | None:
    """The plan's session opened with the run's limits, after the plan's note and an unknown model's warning;
    None (said on stderr) when it cannot be opened."""
    if plan.note is not None:
        print(f"codling: {plan.note}", file=sys.stderr)
    if (warning := unknown_model(plan.model)) is not None:
        print(f"codling: warning: {warning}", file=sys.stderr)
    try:
        live = open_live(settings, plan, mode, asker, model_titles=output.model_title)
    except CodlingError as e:  # e.g. the session is being written by another codling process
        print(f"codling: {e}", file=sys.stderr)
        return None
    live.brain.options = replace(
        live.brain.options,
        max_requests_per_turn=limits.max_requests or live.brain.options.max_requests_per_turn,
        max_cost=limits.max_cost,
    )
    return live


def _watch(live: LiveSession, plan: SessionPlan, views: _Views) -> LastMessage:
    """``--json``'s session line, and the views subscribed to the session; the observer keeping the answer."""
    from codling.cli.script_output import LastMessage
    from codling.cli.script_stream import ScriptStream

    if isinstance(views.renderer, ScriptStream):
        views.renderer.write(session_event(live.id, plan.model.id, live.header.cwd, plan.stored is not None))
    last = LastMessage()
    live.brain.subscribe(views.renderer)
    live.brain.subscribe(last)
    if views.notifier is not None:
        live.brain.subscribe(views.notifier)
    return last


@dataclass(frozen=True)
class _Ended:
    """How the turn ended: its result, and whether a signal ended it."""

    result: TurnResult
    interrupted: bool
    """Ctrl-C (SIGINT) cancelled it."""
    terminated: int | None
    """SIGTERM or SIGHUP ended it: the signal's number."""
    started: float
    """When the turn started (``time.monotonic``)."""


async def _drive(
    live: LiveSession, prompt: tuple[PromptBlock, ...], renderer: ScriptStream | TerminalRenderer
) -> _Ended:
    """Run the turn, then the session's background work (a title), with the signals' handlers installed; the
    drawing and the session are closed whatever happens."""
    from codling.cli.render import TerminalRenderer

    loop = asyncio.get_running_loop()
    interrupted: list[bool] = []

    def interrupt() -> None:
        interrupted.append(True)
        live.brain.cancel()

    terminated: list[int] = []

    def terminate(sig: int) -> None:
        """SIGTERM or SIGHUP: end the turn as on Ctrl-C (commands stopped, turn_end recorded), skip the title,
        then exit with 128 + the signal's number; past the grace (``codling.shutdown``), exit anyway."""
        if not terminated:
            terminated.append(sig)
            exit_after_grace(sig)
        live.brain.cancel()
        live.brain.cancel_background()

    signals = {
        signal.SIGINT: interrupt,
        signal.SIGTERM: lambda: terminate(signal.SIGTERM),
        signal.SIGHUP: lambda: terminate(signal.SIGHUP),
    }
    started = time.monotonic()
    with handling(signals):
        try:
            result = await live.brain.run(prompt)
            # With --title, a new session's title is asked for once the answer is shown; Ctrl-C skips it.
            loop.add_signal_handler(signal.SIGINT, live.brain.cancel_background)
            if not terminated:
                await live.brain.settle()
        finally:
            if isinstance(renderer, TerminalRenderer):
                renderer.close()
            await live.close()
    return _Ended(result, bool(interrupted), terminated[0] if terminated else None, started)


def _report(
    live: LiveSession, ended: _Ended, last: LastMessage, views: _Views, output: Output, limits: Limits, redact: Redactor
) -> None:
    """The answer (stdout when piped, the ``-o`` file) of a turn that completed; then ``--json``'s result line, or
    the context meter and how to continue; then a limit that stopped the turn and a history that could not be
    written, on stderr."""
    from codling.cli.script_stream import ScriptStream, result_line

    result = ended.result
    if result.error is None and result.stop_reason != "cancelled":
        if views.answer_only and last.text:
            sys.stdout.write(last.text + "\n")
        if output.last_message is not None:
            _write_last_message(output.last_message, redact(last.text))
    if isinstance(views.renderer, ScriptStream):
        views.renderer.close()
        duration_ms = round((time.monotonic() - ended.started) * 1000)
        views.renderer.write(result_line(live.id, result, redact(last.text), duration_ms, live.brain.state.turn_count))
    else:
        if result.context is not None:
            print(context_meter(result.context.used, result.context.size), file=sys.stderr)
        named = f" “{live.recorder.title}”" if live.recorder.title else ""
        print(f"codling: session {live.id}{named} (continue with: codling run --resume {live.id} …)", file=sys.stderr)
    if (stopped := limits.stopped(result.stop_reason, result, live.id)) is not None:
        print(f"codling: {stopped}", file=sys.stderr)
    if (problem := live.recorder.file.problem) is not None:  # e.g. the disk is full: the user must act
        print(f"codling: {problem}", file=sys.stderr)


def _exit_code(ended: _Ended, problem: str | None) -> int:
    """The run's exit code (:mod:`codling.cli.session_plan`'s), given how the turn ended and the history's
    ``problem`` (None: it was written)."""
    if ended.terminated is not None:
        return 128 + ended.terminated
    if ended.result.error is not None or problem is not None:
        return EXIT_FAILED
    if ended.result.stop_reason == "cancelled":
        return EXIT_INTERRUPTED if ended.interrupted else EXIT_FAILED
    if ended.result.stop_reason in ("max_turn_requests", "max_cost"):
        return EXIT_LIMIT
    return EXIT_OK


def run_notifier(settings: Settings, output: Output, stdout: TextIO, env: Mapping[str, str]) -> Notifier | None:
    """The notifier of a run drawn on the terminal (``cli/notify.py``); None for ``--json`` or when ``stdout``
    is not a terminal: a script reads that output, and no one switched windows."""
    if output.json:
        return None
    from codling.cli.notify import terminal_notifier

    return terminal_notifier(settings, stdout, env)


def session_event(session_id: str, model_id: str, cwd: Path, resumed: bool) -> dict[str, object]:
    """The first JSON line of a run: what a script needs to continue the session later."""
    return {"type": "session", "session_id": session_id, "model": model_id, "cwd": str(cwd), "resumed": resumed}


def _write_last_message(path: Path, text: str) -> None:
    try:
        path.write_text(text + "\n" if text else "")
    except OSError as e:
        print(f"codling: cannot write the last message to {path}: {e.strerror or e}", file=sys.stderr)


def context_meter(used: int, size: int) -> str:
    """The one-line context meter printed after a turn: ``context: 12,345 / 200,000 tokens (6%)``."""
    share = used / size if size else 0.0
    return f"context: {used:,} / {size:,} tokens ({share:.0%})"
