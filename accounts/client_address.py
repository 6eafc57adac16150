"""The address a request came from, as sign-in lockouts (django-axes) count it.

X-Forwarded-For is written by whoever sends the request, so it is believed only when the request
arrives from one of settings.TRUSTED_PROXIES; otherwise a client could spread its guesses over
made-up addresses, or lock a colleague out by naming theirs. Behind trusted proxies the client is
the last hop in the header that is not itself a trusted proxy (each proxy appends what it saw).
"""
import ipaddress

from django.conf import settings


def _address(text: str):
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def trusted_networks(entries) -> list:
    """TRUSTED_PROXIES entries (addresses or CIDR networks) as networks; a bad entry is a setup error."""
    return [ipaddress.ip_network(entry.strip(), strict=False) for entry in entries if entry.strip()]


def _trusted(address, networks) -> bool:
    return address is not None and any(address in network for network in networks)


def client_address(request) -> str | None:
    """REMOTE_ADDR, or through trusted proxies the nearest untrusted hop of X-Forwarded-For."""
    remote = request.META.get("REMOTE_ADDR")
    networks = trusted_networks(getattr(settings, "TRUSTED_PROXIES", []))
    if not _trusted(_address(remote or ""), networks):
        return remote
    hops = [hop for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    for hop in reversed(hops):
        address = _address(hop)
        if address is None:
            return remote  # a garbled header: count the proxy rather than believe any of it
        if not _trusted(address, networks):
            return str(address)
    return str(_address(hops[0])) if hops else remote
