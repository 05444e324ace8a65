import sys

from attn.profiling.cli import main

sys.exit(main())
