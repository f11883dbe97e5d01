"""``session/delete`` (the newest ACP schema's; it reaches the agent through ``acp/newer.py``): a stored session
removed for good.

A session open in this process is closed first, as ``session/close`` closes it (its running turn cancelled and
recorded, its pending prompt answered ``cancelled``), so nothing is left writing into the removed directory. A
session another codling process has open is refused (-32003) and stays. Forks of it stay too: a fork is a copy,
and its history still names the deleted session as its parent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acp import RequestError

from codling.acp.rpc_errors import held, invalid_session_id, not_found
from codling.errors import CodlingError, InvalidSessionIdError, SessionHeldError, UnknownSessionError
from codling.store.ids import check_session_id

if TYPE_CHECKING:
    from codling.acp.served import ServedSession
    from codling.store.index import SessionStore


async def delete_session(session_id: str, sessions: dict[str, ServedSession], store: SessionStore) -> None:
    """Delete ``session_id`` from ``store``, closing it first (and leaving ``sessions``) if it is open here:
    -32602 for a malformed id, -32002 for one not on disk (as load answers), -32003 for one another codling
    process holds."""
    try:
        check_session_id(session_id)
    except InvalidSessionIdError as e:
        raise invalid_session_id(session_id, e) from e
    session = sessions.pop(session_id, None)
    if session is not None:
        await session.close()
    try:
        store.delete(session_id)
    except UnknownSessionError as e:
        raise not_found(session_id, str(e)) from e
    except SessionHeldError as e:
        raise held(session_id, str(e)) from e
    except (OSError, CodlingError) as e:
        raise RequestError.internal_error({"details": f"cannot delete session {session_id}: {e}"}) from e
