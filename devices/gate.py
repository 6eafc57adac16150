"""The one door every input event goes through on its way to a phone.

Before each input (a tap, a key, a gesture, typed text, an app launch) the gate
1. takes the screen as it is now: a UI dump read through this connection less than FRESH_S ago
   with no screen-changing command since (the automatic line's observation), else the phone's
   last dump if its page-flip counter has not moved since (devices/screen_signal.py), else a new
   one;
2. audits that exact input on that screen (devices/audit.py) and records a block;
3. confirms the holder's lease (leases.confirm: a read, or a heartbeat when it runs short);
and only then sends the command. The executor's actions and the composite actions
(devices/composite.py) send input only through here, so nothing reaches a phone unaudited, on a
stale screen, or after its lease was lost.
"""
from __future__ import annotations

import time

from devices import leases, screen_signal
from devices.audit import AuditDecision, audit_and_record, enabled_rules
from devices.db_pool import release_connection

FRESH_S = 1.0   # a dump older than this is read again: screens change by themselves too


class InputRefused(Exception):
    """The input was not sent."""


class InputBlocked(InputRefused):
    def __init__(self, decision: AuditDecision):
        super().__init__(decision.reason)
        self.decision = decision


class LeaseLost(InputRefused):
    pass


class InputGate:
    """Audits and sends input for one holder on one phone. `rules` default to the enabled rules of
    the database, read once per gate; `commands` (a list) collects every command line sent."""

    def __init__(self, phone, *, rules=None, device=None, holder: str = "", lease=None,
                 lease_ttl=leases.DEFAULT_TTL, commands: list | None = None):
        self.phone = phone
        self.rules = enabled_rules() if rules is None else rules
        self.device = device
        self.holder = holder
        self.lease = lease
        self.lease_ttl = lease_ttl
        self.commands = [] if commands is None else commands
        self.decisions: list[tuple[dict, AuditDecision]] = []  # (the input's action, its decision)
        self.audit_seconds = 0.0

    def screen(self) -> str:
        """The UI hierarchy as it is now (see FRESH_S)."""
        return self.phone.recent_dump(FRESH_S) or screen_signal.current_dump(self.phone)

    def send(self, action: dict, command: str, timeout: float = 30) -> tuple[int, str]:
        """Audit `action` (the input `command` carries out) on the current screen, confirm the lease,
        send. Raises InputBlocked or LeaseLost, having sent nothing."""
        started = time.monotonic()
        decision = audit_and_record(action, self.screen(), phone=self.phone, device=self.device,
                                    holder=self.holder, rules=self.rules)
        self.decisions.append((action, decision))
        self.audit_seconds += time.monotonic() - started
        if decision.blocked:
            raise InputBlocked(decision)
        if self.lease is not None and not leases.confirm(self.lease, ttl=self.lease_ttl):
            raise LeaseLost(f"lease lost: {self.holder or self.lease.holder} no longer holds "
                            f"{self.phone.serial}; nothing was sent")
        self.commands.append(command)
        release_connection()  # the audit's and the lease's reads are done: pooled, the input needs none
        return self.phone.shell_result(command, timeout=timeout)
