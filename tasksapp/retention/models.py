"""Chores that one worker among several runs now and then (the daily purge), and the health
check's write probe: one row per name, its last run and who holds it."""

from django.db import models


class Chore(models.Model):
    """`lease_owner` holds the chore until `lease_until` (a conditional UPDATE claims it, so one
    worker of several runs it); `last_run_at` and `last_result` say what the last run did."""

    name = models.CharField(max_length=50, unique=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_result = models.JSONField(default=dict, blank=True)
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "tasksapp"

    def __str__(self) -> str:
        return self.name
