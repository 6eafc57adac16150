"""Content-addressed storage of screenshots and UI dumps through Django's storage API.

An identical frame is stored once: its name is derived from the hash of its bytes.
"""
import hashlib

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage


def blob_name(data: bytes, extension: str) -> str:
    digest = hashlib.sha256(data).hexdigest()
    return f"blobs/{digest[:2]}/{digest}.{extension.lstrip('.')}"


def store_blob(data: bytes, extension: str) -> str:
    """Store `data` unless the same bytes are already stored; return the storage name."""
    name = blob_name(data, extension)
    if not default_storage.exists(name):
        saved = default_storage.save(name, ContentFile(data))
        if saved != name:  # a concurrent writer won the race; keep one copy
            default_storage.delete(saved)
    return name


def read_blob(name: str) -> bytes:
    with default_storage.open(name, "rb") as handle:
        return handle.read()
