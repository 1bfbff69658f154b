"""The overview page: what it shows is read by tasksapp/presenters/overview.py; its live part is
rendered by tasksapp/live/pages.py (OverviewPage), once per change burst and audience."""

from django.http import HttpRequest, HttpResponse

from tasksapp.permissions import VIEW, require
from tasksapp.presenters.overview import overview_context
from tasksapp.retention.chores import summary
from tasksapp.views.common import page


@require(VIEW)
def overview(request: HttpRequest) -> HttpResponse:
    # What is kept is read once per page load, outside the live part (no size query per tick).
    context = {**overview_context(), "retention": summary()}
    return page(request, "tasksapp/overview.html", context, nav="overview", live={"page": "overview"})
