"""What services raise: every message is for the person who asked."""

from django.utils.translation import gettext as _

from tasksapp.mcpclient import McpError, ProtocolError
from tasksapp.models import McpServer


class ServiceError(Exception):
    """An action could not be carried out. The message is for the person who asked."""


class NotAllowed(ServiceError):
    """The action does not fit the current state (already answered, already finished, ...)."""


class CallFailed(ServiceError):
    """The server answered, but with something the dashboard cannot record (a reused task id)."""


class NotRecorded(ServiceError):
    """The server did what was asked, but the database could not record it; the message says what."""


class RemoteFailed(ServiceError):
    """The MCP server refused or could not be reached. Nothing was changed locally."""

    def __init__(self, message: str, *, cause: McpError) -> None:
        super().__init__(message)
        self.cause = cause


def refuse_archived(server: McpServer) -> None:
    """Archived servers are kept read-only: nothing may be sent to them."""
    if server.archived:
        raise NotAllowed(
            _(
                "Server %(name)s is archived: its tasks and history are read-only. "
                "An admin can un-archive it on the Servers page."
            )
            % {"name": server.name}
        )


def describe(exc: McpError) -> str:
    if isinstance(exc, ProtocolError):
        return f"the server answered {exc.code}: {exc.message}"
    return str(exc)
