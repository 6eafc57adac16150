# One judge per trajectory (a claim), a flag for people, and when a run's work was last dispatched.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('flywheel', '0004_recollection_links'),
    ]

    operations = [
        migrations.AddField(
            model_name='trajectory',
            name='judging_since',
            field=models.DateTimeField(blank=True, help_text='claimed for judging (one judge per trajectory, once)', null=True),
        ),
        migrations.AddField(
            model_name='trajectory',
            name='flag',
            field=models.CharField(blank=True, help_text='why a person must look at it instead of HTSC (a malformed spec, a task already done before any action)', max_length=300),
        ),
        migrations.AddField(
            model_name='collectionrun',
            name='dispatched_at',
            field=models.DateTimeField(blank=True, help_text='last time its work was sent to the host queues', null=True),
        ),
    ]
