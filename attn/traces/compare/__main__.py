"""python -m attn.traces.compare A B: diff two runs or two sets, gate and all (attn.traces.compare.gate)."""

import sys

from attn.traces.compare.gate import main

sys.exit(main())
