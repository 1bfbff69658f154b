"""The overview page: what it shows is read by tasksapp/presenters/overview.py; its live part is
rendered by tasksapp/live/pages.py (OverviewPage), once per change burst and audience."""

from django.http import HttpRequest, HttpResponse

from tasksapp.permissions import VIEW, require
from tasksapp.presenters.overview import overview_context
from tasksapp.views.common import page


@require(VIEW)
def overview(request: HttpRequest) -> HttpResponse:
    return page(
        request, "tasksapp/overview.html", overview_context(), nav="overview", live={"page": "overview"}
    )
