"""Fixtures for the screen tests: the session's virtual farm (tests/conftest.py) as Device rows."""
import pytest


@pytest.fixture
def screen_phones(farm_settings, transactional_db):
    """Device rows for the farm's phones, each back on its home screen (the tests open Chatter)."""
    from devices.models import Device
    from devices.phone import PhoneConnection
    from devices.reset import reset_phone

    devices = []
    for serial in farm_settings.serials:
        phone = PhoneConnection(farm_settings.address, serial)
        reset_phone(phone, {"force_stop": ["com.sim.chat"], "home": True})
        width, height = phone.window_size()
        devices.append(Device.objects.create(serial=serial, adb_server=farm_settings.address,
                                             resolution=f"{width}x{height}", model="sim"))
    return devices


def connection(device):
    from devices.phone import PhoneConnection

    return PhoneConnection.for_device(device)


def farm_control(device, request):
    """The farm's own control requests (host:sim-disconnect:SERIAL, host:sim-connect:SERIAL)."""
    from devices.phone import adb_client

    with adb_client(device.adb_server).make_connection() as adb:
        adb.send_command(f"{request}:{device.serial}")
        adb.check_okay()
