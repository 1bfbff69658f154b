"""A task's input requests are counted over its life (MCP_MAX_INPUT_REQUESTS_PER_TASK); the count
starts from the rows each task already has."""

from django.db import migrations, models
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce


def count_existing(apps, schema_editor):
    RemoteTask = apps.get_model("tasksapp", "RemoteTask")
    InputRequest = apps.get_model("tasksapp", "InputRequest")
    per_task = InputRequest.objects.filter(task=OuterRef("pk")).order_by().values("task")
    counted = per_task.annotate(n=Count("pk")).values("n")
    RemoteTask.objects.update(input_requests_recorded=Coalesce(Subquery(counted), 0))


class Migration(migrations.Migration):
    dependencies = [
        ("tasksapp", "0014_audit_notify_actions"),
    ]

    operations = [
        migrations.AddField(
            model_name="remotetask",
            name="input_requests_capped_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="remotetask",
            name="input_requests_recorded",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(count_existing, migrations.RunPython.noop),
    ]
