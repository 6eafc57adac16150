"""Which model-endpoint URLs the console may call: the one rule, used at registration and per request.

vLLM servers live on loopback and private networks, so those are allowed by default. Never allowed:
schemes other than http(s), link-local addresses (where cloud metadata services answer), other
metadata addresses, the unspecified address (it reaches the local host), multicast and broadcast,
also when an IPv6 address wraps one of them. `MODEL_ENDPOINT_ALLOWED_NETWORKS` (a list of CIDRs)
narrows the rest. A host name is resolved and every address it has must pass: DNS can change, so
calls resolve again (safe_http connects to the address checked here, not to the name).
"""
from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError

SCHEMES = {"http": 80, "https": 443}

ALWAYS_REFUSED = tuple(ipaddress.ip_network(network) for network in (
    "169.254.0.0/16", "fe80::/10",   # link-local: cloud metadata (169.254.169.254) and friends
    "0.0.0.0/8", "::/128",            # "this host": connecting to it reaches whatever listens locally
    "224.0.0.0/4", "ff00::/8", "255.255.255.255/32",  # multicast and broadcast
    "100.100.100.200/32", "fd00:ec2::254/128",        # metadata services outside link-local
))
NAT64 = ipaddress.ip_network("64:ff9b::/96")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsafeEndpointURL(ValueError):
    """The URL may not be called; the message says why (and never quotes a reply)."""


@dataclass(frozen=True)
class EndpointTarget:
    scheme: str
    host: str          # as written in the URL (without brackets)
    port: int
    path: str          # path and query, as sent on the request line
    addresses: tuple[str, ...]

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == SCHEMES[self.scheme] else f"{host}:{self.port}"


def allowed_networks() -> list:
    """The admin's narrowing (empty: every address that is not always refused)."""
    configured = settings.MODEL_ENDPOINT_ALLOWED_NETWORKS
    if isinstance(configured, str):
        configured = [item for item in configured.split(",") if item.strip()]
    return [ipaddress.ip_network(item.strip(), strict=False) for item in configured]


def _wrapped_ipv4(address: Address) -> list[Address]:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64), so it is judged too."""
    if address.version != 6:
        return []
    embedded = [address.ipv4_mapped, address.sixtofour]
    if address in NAT64:
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [ip for ip in embedded if ip is not None]


def _within(address: Address, networks) -> bool:
    return any(address.version == network.version and address in network for network in networks)


def address_refusal(raw: str) -> str:
    """Why this address may not be called ('' when it may)."""
    address = ipaddress.ip_address(raw.split("%", 1)[0])  # an IPv6 zone id names an interface only
    judged = [address, *_wrapped_ipv4(address)]
    if any(_within(ip, ALWAYS_REFUSED) for ip in judged):
        return f"{address} is a link-local, metadata, unspecified, multicast or broadcast address"
    allowed = allowed_networks()
    if allowed and not all(_within(ip, allowed) for ip in judged):
        return f"{address} is outside MODEL_ENDPOINT_ALLOWED_NETWORKS"
    return ""


def _split(url: str) -> tuple[str, str, int, str]:
    if not isinstance(url, str) or not url.strip():
        raise UnsafeEndpointURL("an http(s) URL is required")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as error:
        raise UnsafeEndpointURL(f"not a valid URL ({error})")
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise UnsafeEndpointURL(f"only http(s) URLs are allowed, not {scheme or 'a URL without a scheme'}")
    if not parts.hostname:
        raise UnsafeEndpointURL("the URL names no host")
    if parts.username is not None or parts.password is not None:
        raise UnsafeEndpointURL("the URL may not carry a user name or password")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return scheme, parts.hostname, port or SCHEMES[scheme], path


def resolve_endpoint(url: str) -> EndpointTarget:
    """Check the URL and every address its host resolves to now; raise UnsafeEndpointURL if any fails."""
    scheme, host, port, path = _split(url)
    try:
        addresses = [str(ipaddress.ip_address(host.split("%", 1)[0]))]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as error:
            raise UnsafeEndpointURL(f"the host {host!r} does not resolve ({error})")
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise UnsafeEndpointURL(f"the host {host!r} has no address")
    for address in addresses:
        refusal = address_refusal(address)
        if refusal:
            shown = f"{host} resolves to {refusal}" if host != address else refusal
            raise UnsafeEndpointURL(f"refused: {shown}")
    return EndpointTarget(scheme, host, port, path, tuple(addresses))


def validate_endpoint_url(value: str) -> None:
    """Model-field validator: the page's form and the API's serializer both apply it."""
    if not value:
        return
    try:
        resolve_endpoint(value)
    except UnsafeEndpointURL as error:
        raise ValidationError(str(error), code="unsafe_endpoint_url")
