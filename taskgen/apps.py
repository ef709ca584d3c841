from django.apps import AppConfig


class TaskgenConfig(AppConfig):
    name = "taskgen"
    verbose_name = "Pipeline"
