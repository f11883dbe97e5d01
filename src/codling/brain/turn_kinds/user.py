"""A user turn (``UserTurn``): the prompt run through the model, after a compaction when the context would pass
its threshold (kept in the history: ``PromptTurn.record``); a prompt command (``/init``) is one, with codling's
prompt.

Its run through the model (``ModelTurn``), once the prompt is ready: the request settings (codling's own
retries, the read timeout, thinking, the session's prompt cache key), the prompt with its context block (and the
history breakpoint on Anthropic), the context engine's per-request hooks; a compaction and one retry when the
context overflows; one retry without the images a model the catalog does not know refused; and the windows a
provider's errors or counts reveal."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, cast

from codling.brain.context.budget import Budget
from codling.brain.context.digests import tool_call_digest
from codling.brain.context.overflow import overflow_of
from codling.brain.context.window import may_cut_silently, stated_message, truncated_message, truncated_window
from codling.brain.drive import drive
from codling.brain.events import Usage
from codling.brain.failures import describe_failure
from codling.brain.images import refuses_images
from codling.brain.prompt import ImageBlock, user_content
from codling.brain.turn_context import TurnContext
from codling.brain.turn_kinds.compaction import Compaction, compact_if_due
from codling.brain.turn_kinds.streamed import PromptTurn
from codling.brain.turn_task import perform
from codling.errors import SessionError
from codling.llm.providers import Endpoint, history_breakpoint, prompt_cache_settings
from codling.vocabulary import StopReason

log = logging.getLogger(__name__)


class UserTurn(PromptTurn):
    """The user's prompt through the model (see the module's docstring)."""

    kind = "user"

    async def work(self) -> None:
        """Compact first past the threshold (its own step), then run the prompt through the model."""
        await compact_if_due(self.turn, self.user_text)
        self.stop, self.usage = await ModelTurn(self.turn).run(self.user_text, self.images)


@dataclass
class ModelTurn:
    """The model's part of one user turn (``run``)."""

    turn: TurnContext

    async def run(self, user_text: str, images: tuple[ImageBlock, ...] = ()) -> tuple[StopReason, Usage]:
        """Run the prompt (the threshold's compaction ran before: ``UserTurn``); on a context overflow (an error
        in no known wording that looks like one included; a window the provider revealed is used) compact, then
        retry once."""
        turn, send = self.turn, self.turn.send
        session, turn_id = turn.session, turn.id
        window = session.state.model.context_limit
        try:
            return await self._drive(user_text, images)
        except Exception as e:
            found = overflow_of(e)
            learned = session.state.model.context_limit < window  # the provider revealed a smaller window
            if found is None or not (session.state.entries or learned):
                raise
            log.info(
                "%s reported by the provider; compacting and retrying once",
                "something like a context overflow" if found.guessed else "context overflow",
            )
        if session.state.entries:
            await perform(Compaction(turn, "overflow"))
        # The prompt was cut to the window the turn started with; a window learned since may take less.
        retry_text = (
            session.context.fit_prompt(user_text, turn_id, send, turn.log.turn_number) if learned else user_text
        )
        if done := [tool_call_digest(s, turn.log.finished.get(cid)) for cid, s in turn.log.calls.items()]:
            # Tools already ran in this turn: say so, so the retried request does not redo their side effects.
            retry_text += (
                "\n\n[Before the context overflowed, this turn already did:\n" + "\n".join(done) + "\n"
                "Do not repeat those steps; continue from there.]"
            )
        try:
            return await self._drive(retry_text, images)
        except Exception as e:
            # (an overflow only guessed at may be something else: then the provider's own message says more)
            if (found := overflow_of(e)) is not None and not found.guessed:
                budget = session.context.budget
                if found.requested is not None and found.limit is not None:
                    size = f"{found.requested:,} tokens by the provider's count, of the {found.limit:,} it takes"
                else:
                    last_input = (
                        turn.requests.last_input if turn.requests is not None else session.context.context_used()
                    )
                    size = f"about {last_input:,} tokens, of the {budget.input_limit:,} a request may use"
                raise SessionError(
                    f"The request is still too long for {session.state.model.id} after compacting the conversation "
                    f"and cutting this turn's tool output ({size}). Shorten the request, or start a new session."
                ) from e
            raise

    async def _drive(self, user_text: str, images: tuple[ImageBlock, ...]) -> tuple[StopReason, Usage]:
        """Run the turn's requests; when a model the catalog does not know is refused the prompt's images,
        say so, send the request again with their names instead, and send that model no images again."""
        turn, send = self.turn, self.turn.send
        session, model = turn.session, turn.state.model
        try:
            return await self._drive_once(user_text, images)
        except Exception as e:
            if not images or model.known or session.models.images_refused(model.id) or not refuses_images(e):
                raise
            session.models.refuse_images(model.id)
            said = describe_failure(e).rstrip(".")
            session.context.warn_once(
                f"images-{model.id}",
                turn.id,
                send,
                f"{model.id} refused the attached images ({said}). The request went again without them: the model "
                'was only told their names, as it will be for the rest of this session (with "images": false '
                "for this model in $CODLING_HOME/models.json, codling will not try again). Attach images with a "
                "model that can see them.",
            )
        return await self._drive_once(user_text, images)

    async def _drive_once(self, user_text: str, images: tuple[ImageBlock, ...]) -> tuple[StopReason, Usage]:
        turn, send = self.turn, self.turn.send
        session = turn.session
        from pydantic_ai.settings import ModelSettings
        from pydantic_ai.usage import UsageLimits

        from codling.brain.provider_retries import ProviderRetries

        model = session.state.model
        settings: ModelSettings = {
            # codling retries itself, visibly (ProviderRetries); the SDK's retries would wait in silence.
            "max_retries": 0,
            # The transport's read timeout: no byte for this long ends the request, streamed or not.
            "timeout": session.options.stream_idle_timeout,
        }
        # The session's choice, for a model that can think (the catalog says so); the model's default otherwise.
        if (thinking := session.state.thinking.setting(model)) is not None:
            settings["thinking"] = thinking
        # max_tokens is set per request by the context engine (the room the window has left).
        turn_id = turn.id
        turn.requests = requests = session.context.requests(self._compact_mid_turn)
        agent = session.models.agent()
        # (the agent's model is always a built Model here; a bare name would have no base URL)
        turn.endpoint = endpoint = Endpoint(model.id, getattr(agent.model, "base_url", None))
        # The same key on every request of the session: the provider routes them to one prompt cache.
        cache_settings = prompt_cache_settings(model.id, endpoint.base_url, session.state.session_id)
        settings = cast("ModelSettings", {**settings, **cache_settings})
        requests.learn = self._learn_stated_window
        if may_cut_silently(endpoint.model_id, endpoint.base_url) and not images:
            # (images: each provider counts them its own way, so a count with them says nothing of a cut)
            requests.reported = self._learn_cut_window
        turn.block = block = session.context.turn_block()  # the history keeps it with the prompt
        content = user_content(
            f"{block}\n\n{user_text}" if block else user_text, images, can_see=session.models.sees_images()
        )
        history = session.state.messages()
        if mark := history_breakpoint(model.id, session.options.prompt_cache, history):
            content = [*mark, *(content if isinstance(content, list) else [content])]
        async with agent.iter(
            content,
            message_history=history,
            # One tool result may take about a quarter of the window (the model is told the cap, so it can page).
            deps=replace(
                session.deps, output_tokens=session.context.budget.tool_output, sees_images=session.models.sees_images()
            ),
            usage_limits=UsageLimits(request_limit=session.options.max_requests_per_turn),
            model_settings=settings,
            instructions=[session.models.tools_spent],
            capabilities=[ProviderRetries(session.options.retry, turn_id, send, endpoint), requests, *self._caps()],
        ) as run:
            return await drive(
                run,
                turn_id,
                send,
                session.deps,
                # As soon as the provider answers, even if the turn is cancelled or fails later; counted
                # against the history as it is now (a compaction later in the turn makes it stale).
                turn.first_input_reported,
                idle_timeout=session.options.stream_idle_timeout,
            )

    def _caps(self) -> list[Any]:
        """The turn's spending cap as a capability (none without ``max_cost``)."""
        session = self.turn.session
        if session.options.max_cost is None:
            return []
        from codling.brain.spend_cap import SpendCap

        return [SpendCap(session.options.max_cost, session.state.model, lambda: session.aside.so_far.cost)]

    def _learn_stated_window(self, error: Exception) -> Budget | None:
        """The budget of the window a provider's overflow error states, when it is smaller than the one in
        use: the session uses it from now on, and says so (see ``context/window.py``); else None."""
        turn, send = self.turn, self.turn.send
        session = turn.session
        found = overflow_of(error)
        before, catalog = session.state.model.context_limit, session.state.catalog_model is None
        if found is None or found.limit is None or not session.state.learn_window(found.limit):
            return None
        message = stated_message(session.state.model.id, found.limit, before, catalog)
        session.context.warn_once(f"window-{found.limit}", turn.id, send, message)
        return session.context.budget

    def _learn_cut_window(self, reported: int, estimate: int) -> Budget | None:
        """The budget of the window a server that cut a request silently has (it reported ``reported`` input
        tokens of a request codling counts ``estimate``): the session uses it from now on, and says so (see
        ``context/window.py``); else None."""
        turn, send = self.turn, self.turn.send
        session = turn.session
        learned = truncated_window(reported, estimate, session.state.model.context_limit)
        if learned is None or not session.state.learn_window(learned):
            return None
        message = truncated_message(session.state.model.id, learned, reported, estimate)
        session.context.warn_once(f"window-{learned}", turn.id, send, message)
        return session.context.budget

    async def _compact_mid_turn(self) -> tuple[list[Any], str] | None:
        """Compact the history between two requests of a turn (the turn's own messages stay); the new
        history's messages and the context block the turn's prompt carries from then on (in full: the blocks
        the compaction took are gone), or None when there was nothing to compact."""
        turn = self.turn
        session = turn.session
        if not session.state.entries:
            return None
        await perform(Compaction(turn, "mid-turn"))
        turn.block = session.context.turn_block()
        return session.state.messages(), turn.block
