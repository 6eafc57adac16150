"""Small still frames of phones for pages that show many at once (run pages, lists)."""
import io
import time

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.cache import never_cache
from PIL import Image

from accounts.roles import ADMIN, MANAGER, role_required
from devices.models import Device
from devices.phone import PhoneConnection, PhoneUnavailable

THUMBNAIL_WIDTH = 180
_recent: dict[int, tuple[float, bytes]] = {}   # device id → (taken at, JPEG); many viewers, one capture
MAX_AGE_S = 1.0


def thumbnail_jpeg(device) -> bytes:
    cached = _recent.get(device.pk)
    if cached and time.monotonic() - cached[0] < MAX_AGE_S:
        return cached[1]
    png = PhoneConnection.for_device(device).screencap_png()
    image = Image.open(io.BytesIO(png)).convert("RGB")
    image.thumbnail((THUMBNAIL_WIDTH, THUMBNAIL_WIDTH * 3))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=70)
    _recent[device.pk] = (time.monotonic(), buffer.getvalue())
    return buffer.getvalue()


@never_cache
@role_required(MANAGER, ADMIN)
def device_thumbnail(request, device_id):
    device = get_object_or_404(Device, pk=device_id)
    try:
        return HttpResponse(thumbnail_jpeg(device), content_type="image/jpeg")
    except PhoneUnavailable as error:
        return HttpResponse(f"{device.serial} does not answer: {error}", status=503, content_type="text/plain")
