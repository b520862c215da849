"""metatrace's process-lifetime tables that belong to no compile: what thunder's interpreter can
reuse across compiles (metatrace.interpret.costs) and which model's methods a thread is running
(metatrace.interpret.modules.module_methods). Each says what it holds and when entries go.
"""

from __future__ import annotations

import threading
import types
import weakref

# code object -> its decoded instructions (a tuple of immutable ``dis.Instruction``); an entry goes
# with its code object (interpreter_costs.get_instructions)
DECODED_INSTRUCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

# code location -> the Python frame made for tracebacks raised there; cleared whole when it holds
# PYTHON_FRAMES_KEPT (a location's frame is then made again, as thunder would) (fast_paths)
PYTHON_FRAMES: dict[tuple, types.FrameType] = {}
PYTHON_FRAMES_KEPT = 4096


class SwitchIntervalHandoff:
    """How many threads are in ``get_or_make_python_frame`` with the switch interval shortened,
    and the interval to restore when the last leaves (interpreter_costs)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.callers = 0
        self.saved: float | None = None


HANDOFF = SwitchIntervalHandoff()

# per thread: the jitted model whose ``generate`` (a method that calls forward) is running, while
# it runs (module_methods: nested calls are not redirected again)
RUNNING_MODEL_METHODS = threading.local()
