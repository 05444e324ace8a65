"""Pictures and tables drawn from a parsed trace or a set's rows: SVG panels and their ticks, the
timeline of one range, the set's overview, the peaks chart, the table of a trace's ranges.

Above read and common; below everything that decides something: a figure shows numbers and never a
verdict, so the tables that show a claim's verdict under a figure live in attn.traces.claims.
"""
