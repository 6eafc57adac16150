"""The Devices page: every phone with its status, profile, health and holder."""
from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import ADMIN, MANAGER, role_required

from .models import Device, Lease
from .registry import discover_devices


@role_required(MANAGER, ADMIN)
def device_list(request):
    devices = Device.objects.all()
    open_leases = {lease.device_id: lease for lease in Lease.objects.filter(released_at__isnull=True)}
    rows = [(device, open_leases.get(device.id)) for device in devices]
    return render(request, "devices/device_list.html", {"rows": rows})


@role_required(ADMIN)
@require_POST
def device_discover(request):
    summary = discover_devices()
    messages.info(request, f"Discovery: {summary['seen']} phone(s) answered, "
                           f"{summary['offline']} marked offline.")
    return redirect("device-list")
