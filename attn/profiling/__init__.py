"""How we measure: record or read a trace, analyse it, check claims, draw, write the artifacts."""

from attn.profiling.claims import CLAIMS
from attn.profiling.config import ProfileConfig, default_config
from attn.profiling.decode_claims import DECODE_CLAIMS
from attn.profiling.environment import hardware_slug
from attn.profiling.run import ProfilingError, finish_set, profile_example, profile_variant

# The decoding chapter keeps its claims in a module of its own. They are merged here, where the
# package is first imported, so that no import order can leave them out of CLAIMS.
CLAIMS.update(DECODE_CLAIMS)

__all__ = [
    "ProfileConfig",
    "ProfilingError",
    "default_config",
    "finish_set",
    "hardware_slug",
    "profile_example",
    "profile_variant",
]
