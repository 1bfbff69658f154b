"""Operations: /metrics and /healthz, for machines (a scraper, a load balancer) and signed-in viewers."""

import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from tasksapp import healthcheck, metrics
from tasksapp.permissions import VIEW, can


@login_not_required
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text format, for a scraper holding METRICS_TOKEN or a logged-in viewer."""
    if not (_token_ok(request) or can(request.user, VIEW)):
        response = HttpResponse("Send 'Authorization: Bearer <METRICS_TOKEN>', or log in.\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)


def _token_ok(request: HttpRequest) -> bool:
    token: str = settings.METRICS_TOKEN
    sent = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())


@login_not_required
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 or 503 for load balancers, naming the failed checks; ?require=workers also fails when no
    worker is alive. The figures only for METRICS_TOKEN or a signed-in viewer (tasksapp.healthcheck)."""
    healthy, report = healthcheck.health(require_workers=request.GET.get("require") == "workers")
    if not (_token_ok(request) or can(request.user, VIEW)):
        report = healthcheck.public(report)
    return JsonResponse(report, status=200 if healthy else 503)
