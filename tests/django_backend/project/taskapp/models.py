from django.db import models


class Order(models.Model):
    customer = models.CharField(max_length=200)


class SignalSeen(models.Model):
    """A Django task signal received (taskapp/signals.py), in whichever process sent it."""

    result_id = models.CharField(max_length=64)
    signal = models.CharField(max_length=20)
    status = models.CharField(max_length=20)
