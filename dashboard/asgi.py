import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from tasksapp.gateway.app import GatewayApp, GatewayRouter  # noqa: E402
from tasksapp.lib.asgi import PagesHandler  # noqa: E402
from tasksapp.lib.connections import HandBackConnections  # noqa: E402
from tasksapp.live.origin import OriginValidator  # noqa: E402
from tasksapp.routing import websocket_urlpatterns  # noqa: E402

# The pages' middleware and view in one thread hop per request: tasksapp/lib/asgi.py.
django_asgi_app = PagesHandler()
# A page load's thread returns its database connections even when its client left (the pool
# would count them as lent forever): tasksapp/lib/connections.py.
django_pages = ASGIStaticFilesHandler(django_asgi_app) if settings.SERVE_STATIC else django_asgi_app
pages = HandBackConnections(django_pages)
# /gateway/<server id>/mcp: agents' MCP endpoint (tasksapp/gateway), beside the pages.
http_app = GatewayRouter(GatewayApp(), pages)

application = ProtocolTypeRouter(
    {
        "http": http_app,
        # The full origin (scheme, host, port), not only the host: tasksapp/live/origin.py.
        "websocket": OriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
