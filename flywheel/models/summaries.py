"""Summaries that pages read instead of counting big tables: tallies folded incrementally
(flywheel/tallies.py says why) and the ledger's snapshot (flywheel/pools/ledger_snapshot.py)."""
from django.db import models


class Tally(models.Model):
    """The rows of one source created before its mark, counted per day (when the source has days)
    and key; `total` and `measured` sum a measured value (e.g. verify_ms) and count the rows that had it."""

    source = models.CharField(max_length=30)
    day = models.DateField(null=True, blank=True)
    key = models.CharField(max_length=300, blank=True, help_text="the source's key fields joined by '|'")
    n = models.BigIntegerField(default=0)
    total = models.FloatField(default=0)
    measured = models.BigIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["source", "day", "key"], name="tally_source_day_key")]

    def __str__(self):
        return f"{self.source} {self.day or ''} {self.key}: {self.n}"


class TallyMark(models.Model):
    """How far a source is folded: its rows with a time before `folded_until` are in Tally."""

    source = models.CharField(max_length=30, unique=True)
    folded_until = models.DateTimeField()
    folded_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"{self.source} folded until {self.folded_until:%Y-%m-%d %H:%M:%S}"


class LedgerSnapshot(models.Model):
    """The ledger's failure counts per run as of `taken_at` (flywheel/pools/ledger_snapshot.py)."""

    taken_at = models.DateTimeField(db_index=True)
    counts = models.JSONField(default=dict, help_text="per run id ('' outside runs): the ledger's raw counts")
    seconds = models.FloatField(default=0, help_text="how long counting took")

    def __str__(self):
        return f"ledger as of {self.taken_at:%Y-%m-%d %H:%M:%S}"
