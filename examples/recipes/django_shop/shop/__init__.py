"""The Django recipe's app (docs/recipes/django.md): orders and the jobs they start."""
