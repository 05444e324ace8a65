"""Reading a trace: its text in bounded memory, the parsed table of events and named ranges, the one
table of op and kernel names, a training step's backward, what in a trace misleads, and scrubbing
before publishing.

The bottom layer: it imports nothing else from attn.traces, and everything above reads its table.
"""
