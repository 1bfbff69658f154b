# Issue 12 (operator features): archived servers, worker figures for /metrics, the audit actions for
# archive and export, an index for "last change" sorting, and the full-text search index (per vendor).

from django.db import migrations, models


def install_search(apps, schema_editor):
    from tasksapp.search import index

    index.install(schema_editor.connection, backfill=True, agent=False)  # agents came in 0012 (see 0020)


def uninstall_search(apps, schema_editor):
    from tasksapp.search import index

    index.uninstall(schema_editor.connection)


class Migration(migrations.Migration):

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('tasksapp', '0007_oauth'),
    ]

    operations = [
        migrations.AddField(
            model_name='mcpserver',
            name='archived',
            field=models.BooleanField(default=False, help_text='kept read-only: never polled, no calls, answers or cancels (issue 12 #10)'),
        ),
        migrations.AddField(
            model_name='workerheartbeat',
            name='poll_errors',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='workerheartbeat',
            name='lag_p50_ms',
            field=models.FloatField(blank=True, help_text='scheduling lag since the previous beat', null=True),
        ),
        migrations.AddField(
            model_name='workerheartbeat',
            name='lag_p99_ms',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='workerheartbeat',
            name='lag_max_ms',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='operatoraction',
            name='action',
            field=models.CharField(choices=[('server_add', 'added server'), ('server_edit', 'edited server'), ('server_refresh', 'discovered server again'), ('start', 'started call'), ('answer', 'answered'), ('decline', 'declined'), ('answer_cancel', 'cancelled a question'), ('cancel', 'cancelled'), ('oauth_connect', 'started authorization'), ('oauth_grant', 'authorized server'), ('oauth_lost', 'authorization lost'), ('oauth_settings', 'changed OAuth client'), ('oauth_disconnect', 'removed authorization'), ('server_archive', 'archived server'), ('server_unarchive', 'un-archived server'), ('export', 'exported')], db_index=True, max_length=20),
        ),
        migrations.AddIndex(
            model_name='remotetask',
            index=models.Index(fields=['last_seen_at'], name='task_last_change'),
        ),
        migrations.RunPython(install_search, uninstall_search, elidable=False),
    ]
