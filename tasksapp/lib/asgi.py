"""Django's ASGI handler for the pages, with the middleware and the view run in one thread hop.

Django's own runs its middleware chain in async mode under ASGI: every middleware written for both
modes (Django's MiddlewareMixin ones: messages, X-Frame-Options, CSP, no-store...) then runs its
sync process_request/process_response through sync_to_async, each process_view too, and the chain
goes back to the event loop and into a thread again around the sync-only ones: a dozen thread
round trips per page, each queued behind every other request on a loaded event loop. The pages'
middleware and views are all sync, so this handler builds the sync chain (as under WSGI and in the
test client, which the tests run) and enters it once per request, in the request's own thread
(tasksapp/lib/connections.HandBackConnections gives each request one). Streaming responses, the
request's body and the signals are Django's ASGI handling, unchanged.
"""

from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler


class PagesHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)
        handler: Any = self  # django-stubs leave the chain's type undeclared
        handler._middleware_chain = sync_to_async(handler._middleware_chain, thread_sensitive=True)
