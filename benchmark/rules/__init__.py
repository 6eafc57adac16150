"""The benchmark's rules (report §4) as pure functions: no Django, no database.

metric_system: Table 4 as data; quotas: quota tables, realised distributions, drift and
deficits; evolution: the diff between a version and its parent; scoring: the unanimous-judge
verdict, the §4.3 interaction rules and the binary success rate (eq. 7).
"""
