"""The reviewers' data moves down to the data model (taskgen.models.labels, .validate_summary), so the stages read
it without importing the review pages. Only Django's picture of the models moves: the tables keep their names and
every row stays where it is (taskgen 0020 takes them up). The one change to the database: a known-truth check's
queue is kept as a plain id (queues stay here, a layer above), so its foreign key constraint is dropped first.
"""
from django.db import migrations, models
import django.db.models.deletion


class Migration(migrations.Migration):

    dependencies = [
        ('review', '0010_reviewer_checks'),
        ('taskgen', '0019_run_table_sort_indexes'),
    ]

    operations = [
        migrations.AlterField(
            model_name='reviewercheck',
            name='queue',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True,
                                    on_delete=django.db.models.deletion.SET_NULL, related_name='checks',
                                    to='review.queue'),
        ),
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RemoveField(
                model_name='certifydesign',
                name='created_by',
            ),
            migrations.RemoveField(
                model_name='certifydesign',
                name='judge_config',
            ),
            migrations.RemoveField(
                model_name='certifydesign',
                name='run',
            ),
            migrations.RemoveField(
                model_name='finallabel',
                name='decided_by',
            ),
            migrations.RemoveField(
                model_name='finallabel',
                name='episode',
            ),
            migrations.RemoveField(
                model_name='finallabelchange',
                name='changed_by',
            ),
            migrations.RemoveField(
                model_name='finallabelchange',
                name='episode',
            ),
            migrations.RemoveField(
                model_name='label',
                name='episode',
            ),
            migrations.RemoveField(
                model_name='label',
                name='reviewer',
            ),
            migrations.RemoveField(
                model_name='labelchange',
                name='label',
            ),
            migrations.RemoveField(
                model_name='labelchange',
                name='changed_by',
            ),
            migrations.RemoveField(
                model_name='reviewercheck',
                name='episode',
            ),
            migrations.RemoveField(
                model_name='reviewercheck',
                name='queue',
            ),
            migrations.RemoveField(
                model_name='reviewercheck',
                name='reviewer',
            ),
            migrations.DeleteModel(
                name='ValidateCell',
            ),
            migrations.DeleteModel(
                name='ValidateDirtyEpisode',
            ),
            migrations.DeleteModel(
                name='ValidateEpisodeCell',
            ),
            migrations.DeleteModel(
                name='CertifyDesign',
            ),
            migrations.DeleteModel(
                name='FinalLabel',
            ),
            migrations.DeleteModel(
                name='FinalLabelChange',
            ),
            migrations.DeleteModel(
                name='Label',
            ),
            migrations.DeleteModel(
                name='LabelChange',
            ),
            migrations.DeleteModel(
                name='ReviewerCheck',
            ),
            ]),
    ]
