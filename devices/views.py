"""The Devices pages: every phone with its status, profile, health, holder and a live thumbnail;
one phone's page, where managers watch and admins take the lease, control, reset, quarantine."""
import logging

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import ADMIN, MANAGER, role_required
from devices import health
from devices.leases import LeaseRefused, current_lease
from devices.models import Device, Lease
from devices.phone import PhoneConnection, PhoneUnavailable
from devices.profiles import resolution_class
from devices.registry import discover_devices
from devices.reset import reset_phone
from devices.streaming import control
from devices.streaming.consumer import notify_viewers

log = logging.getLogger(__name__)


def unknown_device(request, what):
    log.warning("%s asked for an unknown phone: %s", request.user, what)
    return render(request, "devices/unknown_device.html", {"what": what}, status=404)


def _device_or_none(device_id):
    return Device.objects.filter(pk=device_id).first()


@role_required(MANAGER, ADMIN)
def device_list(request):
    devices = Device.objects.all()
    open_leases = {lease.device_id: lease for lease in Lease.objects.filter(released_at__isnull=True)}
    rows = [(device, open_leases.get(device.id), resolution_class(device.resolution)) for device in devices]
    return render(request, "devices/device_list.html", {"rows": rows})


@role_required(MANAGER, ADMIN)
def device_detail(request, device_id):
    device = _device_or_none(device_id)
    if device is None:
        return unknown_device(request, f"id {device_id}")
    lease = current_lease(device)
    return render(request, "devices/device_detail.html", {
        "device": device, "lease": lease, "resolution_class": resolution_class(device.resolution),
        "you_control": control.can_control(device, request.user),
        "held_by_other": lease is not None and lease.holder != control.console_holder(request.user),
        "phone_size": _phone_size(device),
    })


@role_required(MANAGER, ADMIN)
def device_by_serial(request, serial):
    devices = list(Device.objects.filter(serial=serial))
    if not devices:
        return unknown_device(request, f"serial {serial}")
    return redirect("device-detail", device_id=devices[0].pk)


def _phone_size(device):
    try:
        width, height = (int(side) for side in device.resolution.lower().split("x"))
        return {"width": width, "height": height}
    except ValueError:
        return {"width": 1080, "height": 2400}  # until discovery reads it; frames carry the truth


def admin_action(view):
    """Admin-only POST on one phone: unknown ids get the clear 404 page; back to its page after."""
    @role_required(ADMIN)
    @require_POST
    def wrapped(request, device_id):
        device = _device_or_none(device_id)
        if device is None:
            return unknown_device(request, f"id {device_id}")
        view(request, device)
        return redirect("device-detail", device_id=device.pk)

    wrapped.__name__ = view.__name__
    return wrapped


@admin_action
def device_take_control(request, device):
    force = request.POST.get("force") == "1"
    try:
        control.take_control(device, request.user, force=force)
    except LeaseRefused as refused:
        messages.error(request, f"Could not take the lease: {refused}.")
        return
    messages.info(request, f"You hold the lease of {device.serial}: your input now reaches the phone.")


@admin_action
def device_release_control(request, device):
    if control.give_up_control(device, request.user):
        messages.info(request, f"Lease of {device.serial} released.")
    else:
        messages.error(request, "You do not hold this phone's lease.")


@admin_action
def device_reset(request, device):
    """Force-stop every third-party app and go HOME; only when nobody else holds the phone."""
    lease = current_lease(device)
    if lease is not None and lease.holder != control.console_holder(request.user):
        messages.error(request, f"{device.serial} is held by {lease.holder}: take the lease first.")
        return
    try:
        outcome = reset_phone(PhoneConnection.for_device(device), {"force_stop": "all", "home": True},
                              baseline=device.baseline)
    except PhoneUnavailable as error:
        log.warning("reset of %s by %s failed: %s", device, request.user, error)
        messages.error(request, f"Reset failed, the phone does not answer: {error}")
        return
    log.info("%s reset %s: %s", request.user, device, outcome)
    if outcome["errors"]:
        messages.error(request, f"{device.serial} reset with errors: {'; '.join(outcome['errors'])}")
    else:
        messages.info(request, f"{device.serial} reset: apps stopped, back on the home screen.")
    notify_viewers(device.pk, "reset")


@admin_action
def device_quarantine(request, device):
    if device.status == Device.Status.QUARANTINED:
        messages.error(request, f"{device.serial} is already quarantined.")
        return
    reason = request.POST.get("reason", "").strip()[:200] or "by hand from the console"
    health.quarantine(device, by=request.user.username, reason=reason)
    messages.info(request, f"{device.serial} quarantined: its lease ended and its work went to spares.")
    notify_viewers(device.pk, "quarantined")


@admin_action
def device_readmit(request, device):
    if device.status != Device.Status.QUARANTINED:
        messages.error(request, f"{device.serial} is not quarantined.")
        return
    health.readmit(device)
    messages.info(request, f"{device.serial} re-admitted.")
    notify_viewers(device.pk, "readmitted")


@role_required(ADMIN)
@require_POST
def device_discover(request):
    summary = discover_devices()
    messages.info(request, f"Discovery: {summary['seen']} phone(s) answered, "
                           f"{summary['offline']} marked offline.")
    return redirect("device-list")
