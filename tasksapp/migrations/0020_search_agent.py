# The full-text index gains the name of the agent that started a task through the gateway: the
# triggers are replaced (they now watch agent_id and read tasksapp_agent) and every task is indexed
# again. Migration 0008 keeps installing the index as it was then (no agent: its table is 0012's).

from django.db import migrations


def with_agent(apps, schema_editor):
    from tasksapp.search import index

    index.reinstall(schema_editor.connection, agent=True)


def without_agent(apps, schema_editor):
    from tasksapp.search import index

    index.reinstall(schema_editor.connection, agent=False)


class Migration(migrations.Migration):

    dependencies = [
        ('tasksapp', '0019_pending_call_expiry'),
    ]

    operations = [
        migrations.RunPython(with_agent, without_agent),
    ]
