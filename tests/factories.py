"""factory_boy factories for the pipeline's rows."""
from __future__ import annotations

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from taskgen import models


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", "pw-for-tests")

    @factory.post_generation
    def role(self, create, extracted, **kwargs):
        if create and extracted:
            self.groups.add(Group.objects.get_or_create(name=extracted)[0])
        if create:
            self.save()


class SiteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Site
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"site{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    home_path = factory.LazyAttribute(lambda o: f"/sites/{o.slug}/")


class TaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Task

    task_id = factory.Sequence(lambda n: f"tg-task-{n:05d}")
    site = factory.SubFactory(SiteFactory)
    instruction = factory.Sequence(lambda n: f"Find the price of item {n} and report it")
    task_kind = "info"


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Run

    name = factory.Sequence(lambda n: f"run-{n}")


class EpisodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Episode

    run = factory.SubFactory(RunFactory)
    task = factory.SubFactory(TaskFactory)
    site = factory.LazyAttribute(lambda o: o.task.site)
    task_kind = factory.LazyAttribute(lambda o: o.task.task_kind)
    task_order = factory.Sequence(lambda n: n)
    actions = factory.LazyFunction(lambda: [{"click": {"index": 3}}, {"answer": {"text": "12"}}])
    answer = "12"
    steps = 2


class JudgeConfigFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.JudgeConfig
        django_get_or_create = ("provider", "model", "prompt_version", "image_policy")

    provider = "rules"
    model = "rules-v1"
    prompt_version = "v1"
    image_policy = "default"


class JudgmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Judgment

    episode = factory.SubFactory(EpisodeFactory)
    config = factory.SubFactory(JudgeConfigFactory)
    verdict = "SUCCESS"
    parts = factory.LazyFunction(lambda: [{"part": "find the price", "done": True, "evidence": "answer says 12"}])
