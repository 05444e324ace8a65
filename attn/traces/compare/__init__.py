"""Two runs side by side: what changed per forward (`diff`), and which changes are regressions for
a CI job to fail on (`gate`, whose command line this package runs: python -m attn.traces.compare).

Above read, common and figures; beside claims and ranks. gate builds on diff, never the other way.
"""
