# Issue 9: the tool-list note, the refresh audit action, and every stored secret rewritten
# under the HKDF-derived key (values from before stay readable through the old derivation
# anyway; this only saves the lookups under a second fingerprint).

from django.db import migrations, models


def rekey(apps, schema_editor):
    from tasksapp.services.secrets import SECRET_COLUMNS, secrets_rekey

    report = secrets_rekey(models={name: apps.get_model("tasksapp", name) for name in SECRET_COLUMNS})
    if report.rewritten or report.unreadable:
        print(f"\n  {report}")


class Migration(migrations.Migration):

    dependencies = [
        ('tasksapp', '0003_list_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='mcpserver',
            name='tools_note',
            field=models.CharField(blank=True, default='', help_text='why fewer tools are stored than the server lists', max_length=500),
        ),
        migrations.AlterField(
            model_name='operatoraction',
            name='action',
            field=models.CharField(choices=[('server_add', 'added server'), ('server_edit', 'edited server'), ('server_refresh', 'discovered server again'), ('start', 'started call'), ('answer', 'answered'), ('decline', 'declined'), ('cancel', 'cancelled')], db_index=True, max_length=20),
        ),
        migrations.RunPython(rekey, migrations.RunPython.noop),
    ]
