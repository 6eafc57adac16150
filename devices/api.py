"""Phones and leases over the API: everyone with a role reads, admins change."""
from accounts.api import role_viewset
from accounts.roles import ADMIN, MANAGER
from devices.models import Device, Lease

DeviceViewSet = role_viewset(Device, write_roles=(ADMIN,), filter_fields=("status", "adb_server"))
LeaseViewSet = role_viewset(Lease, read_roles=(MANAGER, ADMIN), filter_fields=("device",),
                            queryset=Lease.objects.select_related("device"))


def register(router):
    router.register("devices", DeviceViewSet, basename="devices")
    router.register("leases", LeaseViewSet, basename="leases")
