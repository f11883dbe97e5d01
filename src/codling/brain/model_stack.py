"""A session's model stack (``ModelStack``): its pydantic-ai agent and model, its system prompt, the toolsets its
turns offer and the models its special turns ask, each built on first use, so a session that has not run a
turn has imported no pydantic-ai."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from codling.brain.context import tools
from codling.brain.images import may_see_images
from codling.brain.options import TOOLS_SPENT_NOTE, SessionOptions
from codling.brain.prompt import system_prompt
from codling.brain.state import SessionState
from codling.llm.catalog import ModelInfo
from codling.tools.deps import ToolDeps
from codling.tools.specs import ToolFilter

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic_ai import Agent
    from pydantic_ai.models import Model

TOOL_RETRIES = 3
"""How often the model may retry a tool call whose arguments did not validate, per tool and turn."""


class Leaning(Protocol):
    """Whether requests carry the lean tool set (the context engine decides, from the window)."""

    @property
    def lean(self) -> bool:
        """Whether the lean tool set is offered."""
        ...


class StackOwner(Protocol):
    """The session a model stack serves: read at each use, since a session's options may be replaced."""

    state: SessionState
    deps: ToolDeps
    options: SessionOptions

    @property
    def context(self) -> Leaning:
        """The session's context engine."""
        ...


class ModelStack:
    """The models, agent, system prompt and toolsets of one session (see the module's docstring)."""

    def __init__(self, owner: StackOwner, factory: Callable[[str], Model] | None) -> None:
        self._owner = owner
        self.factory = factory
        """How models are built from ids (None: from the providers); delegates use the same."""
        self._agent: Agent[ToolDeps, str] | None = None
        self._system_prompt: str | None = None
        self._no_images: set[str] = set()
        """Models whose provider refused this session's images: they are told the names from then on."""

    def forget_agent(self) -> None:
        """Build the agent again at its next use (the session switched models, or its key changed)."""
        self._agent = None

    def instructions(self) -> str:
        """The session's system prompt (static part), built once per session."""
        if self._system_prompt is None:
            state, options = self._owner.state, self._owner.options
            self._system_prompt = system_prompt(state.cwd, state.additional_dirs)
            if options.role_instructions:
                self._system_prompt += "\n" + options.role_instructions.strip() + "\n"
        return self._system_prompt

    def agent(self) -> Agent[ToolDeps, str]:
        """The session's pydantic-ai agent, built on first use (its model is the session's)."""
        if self._agent is None:
            from codling.llm.providers import agent_class

            self._agent = agent_class()(
                self.build(self._owner.state.model.id),
                deps_type=ToolDeps,
                instructions=self.instructions(),
                toolsets=self.turn_toolsets(),
                # Models often fix bad tool arguments on a second or third try; the default (1) fails too soon.
                retries=TOOL_RETRIES,
            )
        return self._agent

    def build(self, model_id: str) -> Model:
        """A pydantic-ai model for ``model_id``, built by the factory or the providers."""
        if self.factory is not None:
            return self.factory(model_id)
        from codling.llm.providers import build_model

        options = self._owner.options
        return build_model(model_id, idle_timeout=options.stream_idle_timeout, cache=options.prompt_cache)

    def model_for(self, model_id: str | None) -> Model:
        """The session's pydantic-ai model, or the model ``model_id`` names."""
        if model_id is None or model_id == self._owner.state.model.id:
            return self.agent().model  # type: ignore[return-value]
        return self.build(model_id)

    def model_info(self, model_id: str | None) -> ModelInfo:
        """The catalog's entry for ``model_id`` (None: the session's model)."""
        state, models = self._owner.state, self._owner.options.models
        if model_id is None or model_id == state.model.id:
            return state.model
        return models.catalog.get(model_id) if models is not None else ModelInfo(model_id, known=False)

    def toolset(self, tool_filter: ToolFilter) -> Any:
        """The session's tools that ``tool_filter`` allows."""
        from pydantic_ai.toolsets import FilteredToolset

        from codling.tools.toolset import build_toolset

        return FilteredToolset(build_toolset(), lambda _ctx, tool: tool_filter.allows(tool.name))

    def turn_toolsets(self) -> list[Any]:
        """The toolsets a user turn offers, in the order its requests list them: codling's tools, then the MCP
        servers'."""
        return [self._turn_toolset(), *self._mcp_toolsets()]

    def _turn_toolset(self) -> Any:
        """The tools of user turns; ``run_tools`` and ``max_tool_passes`` are read at each request, so options
        changed between turns apply to the next one."""
        from pydantic_ai.toolsets import FilteredToolset

        from codling.tools.toolset import build_toolset

        owner = self._owner

        def offered(ctx: Any, tool: Any) -> bool:
            options = owner.options
            return (
                options.run_tools
                and ctx.run_step <= options.max_tool_passes
                and tools.offered(tool.name, options.tool_names, delegates=options.delegates, lean=owner.context.lean)
            )

        async def lean(_ctx: Any, defs: list[Any]) -> list[Any]:
            return [tools.lean_definition(d) for d in defs] if owner.context.lean else defs

        return FilteredToolset(build_toolset(), offered).prepared(lean)

    def _mcp_toolsets(self) -> list[Any]:
        """The MCP servers' tools, offered as codling's own are (not to a delegate, whose role names its tools)."""
        if self._owner.deps.mcp is None:
            return []
        from pydantic_ai.toolsets import FilteredToolset

        from codling.tools.mcp.mcp_toolset import build_mcp_toolset

        owner = self._owner

        def offered(ctx: Any, _tool: Any) -> bool:
            options = owner.options
            return options.run_tools and ctx.run_step <= options.max_tool_passes and options.tool_names is None

        return [FilteredToolset(build_mcp_toolset(), offered)]

    def tools_spent(self, ctx: Any) -> str | None:
        """An instruction for the request after the last tool pass: tools are gone, answer now."""
        options = self._owner.options
        return TOOLS_SPENT_NOTE if options.run_tools and ctx.run_step > options.max_tool_passes else None

    def sees_images(self) -> bool:
        """Whether the session's model is sent the prompt's images (not if its provider refused them)."""
        model = self._owner.state.model
        return may_see_images(model) and model.id not in self._no_images

    def images_refused(self, model_id: str) -> bool:
        """Whether ``model_id``'s provider refused this session's images; ``refuse_images`` records it."""
        return model_id in self._no_images

    def refuse_images(self, model_id: str) -> None:
        """From now on, ``model_id`` is told the images' names instead of being sent them."""
        self._no_images.add(model_id)
