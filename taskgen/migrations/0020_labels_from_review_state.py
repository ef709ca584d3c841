"""The reviewers' data, taken up from the review app (review 0011): state only, the tables keep their names and rows.
Django's content types of these models move with them, so the admin's history of a label still finds it.
"""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


MOVED = ["label", "labelchange", "finallabel", "finallabelchange", "reviewercheck", "certifydesign", "validatecell",
         "validateepisodecell", "validatedirtyepisode"]


def content_types_follow(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    taken = set(ContentType.objects.filter(app_label="taskgen", model__in=MOVED).values_list("model", flat=True))
    ContentType.objects.filter(app_label="review", model__in=set(MOVED) - taken).update(app_label="taskgen")


def content_types_back(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    taken = set(ContentType.objects.filter(app_label="review", model__in=MOVED).values_list("model", flat=True))
    ContentType.objects.filter(app_label="taskgen", model__in=set(MOVED) - taken).update(app_label="review")


class Migration(migrations.Migration):

    dependencies = [
        ('taskgen', '0019_run_table_sort_indexes'),
        ('review', '0011_labels_move_to_taskgen_state'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='ValidateEpisodeCell',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('run_id', models.BigIntegerField()),
                    ('site_id', models.BigIntegerField()),
                    ('task_kind', models.CharField(max_length=10)),
                    ('config_a', models.BigIntegerField()),
                    ('config_b', models.BigIntegerField()),
                    ('verdict_a', models.CharField(max_length=12)),
                    ('verdict_b', models.CharField(max_length=12)),
                    ('verifier', models.SmallIntegerField()),
                    ('final', models.CharField(max_length=12)),
                    ('cost_a', models.DecimalField(decimal_places=6, max_digits=24)),
                    ('cost_b', models.DecimalField(decimal_places=6, max_digits=24)),
                    ('episode_id', models.BigIntegerField(db_index=True)),
                ],
                options={
                    'db_table': 'review_validateepisodecell',
                },
            ),
            migrations.CreateModel(
                name='FinalLabelChange',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('before', models.JSONField(blank=True, null=True)),
                    ('after', models.JSONField(blank=True, null=True)),
                    ('changed_at', models.DateTimeField(auto_now_add=True)),
                    ('changed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='final_label_changes', to=settings.AUTH_USER_MODEL)),
                    ('episode', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='final_label_changes', to='taskgen.episode')),
                ],
                options={
                    'db_table': 'review_finallabelchange',
                    'ordering': ['-changed_at', '-id'],
                },
            ),
            migrations.CreateModel(
                name='Label',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('verdict', models.CharField(choices=[('SUCCESS', 'Success'), ('NOT SUCCESS', 'Not success'), ('UNSURE', 'Unsure')], max_length=12)),
                    ('part_overrides', models.JSONField(blank=True, default=list, help_text='indexes of judge parts marked wrong')),
                    ('note', models.TextField(blank=True)),
                    ('tags', models.JSONField(blank=True, default=list)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('updated_at', models.DateTimeField(auto_now=True)),
                    ('episode', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='labels', to='taskgen.episode')),
                    ('reviewer', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='labels', to=settings.AUTH_USER_MODEL)),
                ],
                options={
                    'db_table': 'review_label',
                },
            ),
            migrations.CreateModel(
                name='LabelChange',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('before', models.JSONField(blank=True, null=True)),
                    ('after', models.JSONField()),
                    ('changed_at', models.DateTimeField(auto_now_add=True)),
                    ('changed_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='label_changes', to=settings.AUTH_USER_MODEL)),
                    ('label', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='changes', to='taskgen.label')),
                ],
                options={
                    'db_table': 'review_labelchange',
                    'ordering': ['-changed_at', '-id'],
                },
            ),
            migrations.CreateModel(
                name='ReviewerCheck',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('queue_id', models.BigIntegerField(blank=True, null=True)),
                    ('truth', models.BooleanField(help_text="the verifier's result when the check was served")),
                    ('served_at', models.DateTimeField(auto_now_add=True)),
                    ('episode', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='reviewer_checks', to='taskgen.episode')),
                    ('reviewer', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='reviewer_checks', to=settings.AUTH_USER_MODEL)),
                ],
                options={
                    'db_table': 'review_reviewercheck',
                },
            ),
            migrations.CreateModel(
                name='ValidateCell',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('run_id', models.BigIntegerField()),
                    ('site_id', models.BigIntegerField()),
                    ('task_kind', models.CharField(max_length=10)),
                    ('config_a', models.BigIntegerField()),
                    ('config_b', models.BigIntegerField()),
                    ('verdict_a', models.CharField(max_length=12)),
                    ('verdict_b', models.CharField(max_length=12)),
                    ('verifier', models.SmallIntegerField()),
                    ('final', models.CharField(max_length=12)),
                    ('cost_a', models.DecimalField(decimal_places=6, max_digits=24)),
                    ('cost_b', models.DecimalField(decimal_places=6, max_digits=24)),
                    ('n', models.BigIntegerField()),
                ],
                options={
                    'db_table': 'review_validatecell',
                    'constraints': [models.UniqueConstraint(fields=('run_id', 'site_id', 'task_kind', 'config_a', 'config_b', 'verdict_a', 'verdict_b', 'verifier', 'final'), name='validate_cell_unique')],
                },
            ),
            migrations.CreateModel(
                name='ValidateDirtyEpisode',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('episode_id', models.BigIntegerField()),
                ],
                options={
                    'db_table': 'review_validatedirtyepisode',
                    'indexes': [models.Index(fields=['episode_id'], name='validate_dirty_episode')],
                },
            ),
            migrations.CreateModel(
                name='CertifyDesign',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('seed', models.BigIntegerField()),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                    ('judge_config', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='certify_designs', to='taskgen.judgeconfig')),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='certify_designs', to='taskgen.run')),
                ],
                options={
                    'db_table': 'review_certifydesign',
                    'constraints': [models.UniqueConstraint(fields=('run', 'judge_config'), name='certify_design_one_per_config')],
                },
            ),
            migrations.CreateModel(
                name='FinalLabel',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('verdict', models.CharField(choices=[('SUCCESS', 'Success'), ('NOT SUCCESS', 'Not success'), ('UNSURE', 'Unsure')], max_length=12)),
                    ('reason', models.TextField(blank=True)),
                    ('adjudicated', models.BooleanField(default=False)),
                    ('decided_at', models.DateTimeField(auto_now=True)),
                    ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to=settings.AUTH_USER_MODEL)),
                    ('episode', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='final_label', to='taskgen.episode')),
                ],
                options={
                    'db_table': 'review_finallabel',
                    'indexes': [models.Index(fields=['verdict'], name='review_fina_verdict_56564f_idx')],
                },
            ),
            migrations.AddIndex(
                model_name='label',
                index=models.Index(fields=['reviewer', 'updated_at'], name='review_labe_reviewe_7115c2_idx'),
            ),
            migrations.AddIndex(
                model_name='label',
                index=models.Index(fields=['episode', 'verdict'], name='review_labe_episode_45bfd3_idx'),
            ),
            migrations.AddConstraint(
                model_name='label',
                constraint=models.UniqueConstraint(fields=('episode', 'reviewer'), name='label_unique_per_reviewer'),
            ),
            migrations.AddConstraint(
                model_name='reviewercheck',
                constraint=models.UniqueConstraint(fields=('episode', 'reviewer'), name='reviewer_check_once'),
            ),
            ]),
        migrations.RunPython(content_types_follow, content_types_back),
    ]
