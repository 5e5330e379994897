"""The Django app "duetime.django" (label "duetime"): no models, only the management
commands duetime_worker and duetime_migrate."""

from django.apps import AppConfig


class DuetimeConfig(AppConfig):
    name = "duetime.django"
    label = "duetime"
    verbose_name = "duetime"
