"""Whether repeated blocks are stamped (``metatrace.interpret.modules.repeated_blocks``).

Lifetime: the process; read from ``METATRACE_STAMP_BLOCKS`` (``0`` turns stamping off) when
metatrace is imported, changed only by ``repeated_blocks.stamping`` (tests compare both ways).
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass
class StampingSettings:
    enabled: bool = True


SETTINGS = StampingSettings(enabled=os.environ.get("METATRACE_STAMP_BLOCKS", "1") != "0")
