"""Sessions move to tasksapp_session, keyed by a keyed hash of the session key (tasksapp/sessions.py).

Django's django_session held every key in clear; its rows are deleted, so everyone signed in
signs in again once (a key cannot be hashed from its row without keeping it usable meanwhile)."""

from django.db import migrations, models


def forget_clear_sessions(apps, schema_editor):
    apps.get_model("sessions", "Session").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("tasksapp", "0012_gateway"),
        ("sessions", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="HashedSession",
            fields=[
                ("session_data", models.TextField(verbose_name="session data")),
                ("expire_date", models.DateTimeField(db_index=True, verbose_name="expire date")),
                (
                    "session_key",
                    models.CharField(
                        max_length=64, primary_key=True, serialize=False, verbose_name="session key fingerprint"
                    ),
                ),
            ],
            options={
                "verbose_name": "session",
                "verbose_name_plural": "sessions",
                "db_table": "tasksapp_session",
                "abstract": False,
            },
        ),
        migrations.RunPython(forget_clear_sessions, migrations.RunPython.noop),
    ]
