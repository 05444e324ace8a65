"""What every job above shares: units, times with their spread, writes that are never seen half
done, text that is safe in a terminal or in Markdown, and the artifact contract (every path and file
name of a profile set, `artifacts`).

Imports only attn.traces.read (Markdown asks the name table what a name is); none of it draws,
checks a claim or compares.
"""
