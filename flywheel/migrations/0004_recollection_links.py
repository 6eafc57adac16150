# Re-collection of Env_ERROR trajectories (§2.4.2) and the RL groups they complete (§2.4.3).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('flywheel', '0003_endpoint_url_rules'),
    ]

    operations = [
        migrations.AddField(
            model_name='trajectory',
            name='recollection_of',
            field=models.ForeignKey(blank=True, help_text='the Env_ERROR trajectory whose query this one collects again (§2.4.2)', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='recollections', to='flywheel.trajectory'),
        ),
        migrations.AddField(
            model_name='rlrollout',
            name='run',
            field=models.ForeignKey(blank=True, help_text='the RL run whose group this is', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='rl_rollouts', to='flywheel.collectionrun'),
        ),
        migrations.AddConstraint(
            model_name='rlrollout',
            constraint=models.UniqueConstraint(condition=models.Q(('run__isnull', False)), fields=('entry', 'run'), name='one_metabolism_per_run_and_query'),
        ),
    ]
