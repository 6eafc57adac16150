"""Signals of the phone layer: layers above listen without this one knowing them."""
from django.dispatch import Signal

# Sent after a lease was taken, released or expired, once the change is committed.
# Arguments: device_id, holder, change ("acquired" | "released" | "expired").
lease_changed = Signal()
