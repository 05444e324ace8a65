"""diagnose: find the attention in any trace (`calls`, `eager_scores` telling eager attention's
products apart), what each call's device work is (`device_work`), what to fix (`findings`), and the
report, for one trace or a folder of ranks (`report`, `rank_report`).

A top layer: it may import every layer below (read, common, figures, claims, ranks, compare) and
nothing imports it but attn.traces itself and the command line. Beside sets, which it does not
import.
"""
