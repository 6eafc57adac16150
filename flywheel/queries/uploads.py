"""Reading an import (query JSONL, external queries) from a request, within QUERY_IMPORT_MAX_BYTES.

The size is checked before the body is read where the request declares it (Content-Length, an
uploaded file's size), and on the text itself otherwise, so an oversized import is refused with a
clear message instead of filling memory or holding a transaction.
"""
from django.conf import settings
from django.core.exceptions import RequestDataTooBig

from flywheel.rules.numbers import whole_number


class ImportTooLarge(Exception):
    pass


def import_limit() -> int:
    return settings.QUERY_IMPORT_MAX_BYTES


def _too_large(size=None) -> ImportTooLarge:
    limit = import_limit()
    shown = f" ({size:,} bytes)" if size is not None else ""
    return ImportTooLarge(f"the import{shown} is larger than the {limit:,}-byte limit "
                          f"(QUERY_IMPORT_MAX_BYTES); split it into several files")


def check_declared_size(request) -> None:
    """Refuse before reading when the request says its body is over the limit."""
    declared = whole_number(request.META.get("CONTENT_LENGTH") or "", maximum=10**30)
    if declared is not None and declared > import_limit():
        raise _too_large(declared)


def check_text(text: str) -> str:
    size = len(text.encode("utf-8"))
    if size > import_limit():
        raise _too_large(size)
    return text


def read_upload(upload) -> str:
    """An uploaded file's text (UTF-8); UnicodeDecodeError when it is not text."""
    if upload.size is not None and upload.size > import_limit():
        raise _too_large(upload.size)
    return check_text(upload.read(import_limit() + 1).decode("utf-8"))


def read_stream(stream) -> str:
    """A raw request body (e.g. application/x-ndjson), read no further than the limit."""
    data = stream.read(import_limit() + 1)
    if len(data) > import_limit():
        raise _too_large()
    return data.decode("utf-8")


def form_import_text(request) -> str:
    """The text of an import page's POST: the uploaded `file`, else the pasted `text`."""
    check_declared_size(request)
    try:
        upload = request.FILES.get("file")
        text = request.POST.get("text", "")
    except RequestDataTooBig:
        # Pasted text is bounded by DATA_UPLOAD_MAX_MEMORY_SIZE; files go through uploads.
        raise ImportTooLarge(f"the pasted text is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes; "
                             f"upload it as a file instead") from None
    return read_upload(upload) if upload else check_text(text)
