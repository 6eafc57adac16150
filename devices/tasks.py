"""Celery tasks of the phone layer."""
from celery import shared_task

from .registry import discover_devices as discover


@shared_task(name="devices.tasks.discover_devices")
def discover_devices():
    """Find phones on every ADB server and record them (beat runs this every minute)."""
    return discover()
