"""Small still frames of phones for pages that show many at once (run pages, lists)."""
import io
import time

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.cache import never_cache
from PIL import Image, ImageDraw

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


def not_answering_jpeg() -> bytes:
    """What a page shows in a phone's place while it does not answer: a grey screen that says so
    (an <img> of an error would be a broken picture and a console error on every refresh)."""
    image = Image.new("RGB", (THUMBNAIL_WIDTH, THUMBNAIL_WIDTH * 2), (226, 229, 234))
    draw = ImageDraw.Draw(image)
    for row, words in enumerate(("phone", "not answering")):
        draw.text((THUMBNAIL_WIDTH // 2, THUMBNAIL_WIDTH - 8 + row * 16), words, fill=(70, 78, 92), anchor="mm")
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=70)
    return buffer.getvalue()


@never_cache
@role_required(MANAGER, ADMIN)
def device_thumbnail(request, device_id):
    device = get_object_or_404(Device, pk=device_id)
    try:
        return HttpResponse(thumbnail_jpeg(device), content_type="image/jpeg")
    except PhoneUnavailable as error:
        # The picture says so; the header carries the reason for whoever reads responses.
        response = HttpResponse(not_answering_jpeg(), content_type="image/jpeg")
        response["X-Phone-Unavailable"] = str(error)[:200].encode("ascii", "replace").decode()
        return response
