"""The high-throughput collection lines (§2.3.3–§2.3.5): automatic, schema-guided, external replay."""
