"""The newer protocol at the edge (codling.acp.newer): client capabilities the SDK's models drop, session
updates they cannot hold and requests its router has no route for, through the SDK's own connections."""

from __future__ import annotations

from pathlib import Path

from acp import PROTOCOL_VERSION, RequestError

from codling.acp.newer import ClientExtras, NewerEdge
from codling.acp.server import CodlingAgent
from codling.config import Settings
from tests.fakes.acp_client import WIRE, RecordingClient, connected
from tests.fakes.deadlines import deadline


def make_agent(home: Path) -> CodlingAgent:
    settings = Settings(home=home, mode="yolo", env={"CODLING_HOME": str(home), "CODLING_MODEL": "test"})
    return CodlingAgent(settings_loader=lambda: settings, warm_up=False)


async def test_the_client_extras_are_read_from_the_raw_initialize(home: Path) -> None:
    advertising, silent = make_agent(home), make_agent(home)
    async with connected(advertising, RecordingClient(), session_capabilities={"notices": {}, "compaction": {}}) as c:
        await c.initialize(protocol_version=PROTOCOL_VERSION)
    async with connected(silent, RecordingClient()) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
    assert (advertising.newer.extras, silent.newer.extras) == (ClientExtras(True, True), ClientExtras())


def test_extras_of_shapes_nobody_should_send_are_nothing() -> None:
    shapes: list[object] = [None, [], {"clientCapabilities": None}, {"clientCapabilities": {"session": []}}]
    for params in shapes:
        assert ClientExtras.from_initialize(params) == ClientExtras()
    # null means not advertised, as the schema says
    said: dict[str, object] = {"clientCapabilities": {"session": {"notices": None, "compaction": {}}}}
    assert ClientExtras.from_initialize(said) == ClientExtras(notices=False, compaction=True)


async def test_a_raw_update_reaches_the_client(home: Path) -> None:
    agent, client = make_agent(home), RecordingClient()
    notice = {"sessionUpdate": "notice", "severity": "info", "title": "Hello"}
    async with connected(agent, client, session_capabilities={"notices": {}}) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        await agent.newer.session_update("s-1", notice)
        await client.wait_for("notice", timeout=deadline(10))
    assert client.newer_updates == [("s-1", notice)]


async def test_a_request_the_sdk_has_no_route_for_reaches_the_agent_under_its_extension_name(home: Path) -> None:
    seen: list[tuple[str, dict[str, object]]] = []

    class Listening(CodlingAgent):
        async def ext_method(self, method: str, params: dict[str, object]) -> dict[str, object]:
            seen.append((method, params))
            return {}

    settings = Settings(home=home, mode="yolo", env={"CODLING_HOME": str(home)})
    async with connected(Listening(settings_loader=lambda: settings, warm_up=False), RecordingClient()) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        assert await conn.ext_method(f"{WIRE}logout", {}) == {}
        assert await conn.ext_method(f"{WIRE}session/delete", {"sessionId": "x"}) == {}
        try:
            await conn.ext_method(f"{WIRE}session/unheard_of", {})
        except RequestError as e:
            assert e.code == -32601  # a method of no schema is still unknown
        else:
            raise AssertionError("an unknown method was answered")
    assert seen == [("newer/logout", {}), ("newer/session/delete", {"sessionId": "x"})]


def test_a_notification_with_a_newer_request_name_is_passed_on_as_it_came() -> None:
    edge = NewerEdge()
    message = {"jsonrpc": "2.0", "method": "logout", "params": {}}
    assert edge._received(message) == message
