"""A distributed job's ranks: one rank's compute and communication from its own trace (`comm`), a
folder of rank traces read in parallel and compared (`folder`), and one forward of every rank drawn
on one time axis (`rank_timeline`).

Above read, common and figures; beside claims and compare. The checks across ranks are claims
(attn.traces.claims.rank_checks); diagnose's report for a folder of ranks is diagnosis.
"""
