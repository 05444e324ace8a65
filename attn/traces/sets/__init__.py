"""Profile sets: one trace into a variant folder (`analyze`), a variant run on several ranks into one
(`rank_artifacts`), and a whole committed set checked again from its traces (`recheck`).

A top layer: it writes what every layer below computes (summaries, claims, tables, pictures, diffs).
Beside diagnosis, which it does not import.
"""
