"""Signals of the phone layer: layers above listen without this one knowing them."""
import logging

from django.dispatch import Signal

log = logging.getLogger(__name__)

# Sent after a lease was taken, released or expired, once the change is committed.
# Arguments: device_id, holder, change ("acquired" | "released" | "expired").
lease_changed = Signal()


def tell_live_screens(sender, device_id, holder, change, **kwargs):
    """Every open live screen of the phone re-checks who may watch and control it (a person whose
    lease ended stops seeing the phone), through the phone's channel-layer group."""
    from devices.streaming.consumer import notify_viewers  # Channels is loaded only when a lease changes

    try:
        notify_viewers(device_id, f"lease_{change}")
    except Exception:  # the channel layer (Redis) is down: the lease change itself stands
        log.warning("could not tell the live screens of phone %s that its lease %s", device_id, change,
                    exc_info=True)


lease_changed.connect(tell_live_screens, dispatch_uid="live-screens-lease-changed")
