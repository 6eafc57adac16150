"""Phones and leases over the API: everyone with a role reads phones, admins change them.

The accounts signed in on a phone are for managers and admins only; others get the phone without them.
"""
from accounts.api import model_serializer, role_viewset
from accounts.roles import ADMIN, MANAGER, has_role
from devices.models import Device, Lease


class DeviceSerializer(model_serializer(Device)):
    def get_fields(self):
        fields = super().get_fields()
        request = self.context.get("request")
        if request is not None and not has_role(request.user, MANAGER):
            fields.pop("accounts", None)
        return fields


DeviceViewSet = role_viewset(Device, write_roles=(ADMIN,), filter_fields=("status", "adb_server"),
                             serializer=DeviceSerializer)
LeaseViewSet = role_viewset(Lease, read_roles=(MANAGER, ADMIN), filter_fields=("device",),
                            queryset=Lease.objects.select_related("device"))


def register(router):
    router.register("devices", DeviceViewSet, basename="devices")
    router.register("leases", LeaseViewSet, basename="leases")
