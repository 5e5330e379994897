"""duetime as a Django tasks backend (Django 6's django.tasks, or the django-tasks backport):
DuetimeBackend, and the `duetime_worker` and `duetime_migrate` management commands once
"duetime.django" is in INSTALLED_APPS. Needs `pip install 'duetime[django]'` (docs/django.md)."""

from duetime.django.backend import DuetimeBackend

__all__ = ["DuetimeBackend"]
