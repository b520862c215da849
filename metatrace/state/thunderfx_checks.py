"""ThunderFX's answers to "can thunder run this node?", kept so that each is computed once.

thunder's splitter asks it for every node several times while ``fx.split_module`` places the
node (its regions for grad and autocast), and each answer runs the node's meta and, for a node
that requires grad, its vjp: ~3 s per Dynamo graph of a small HF Llama. Two tables:

- ``SUPPORT``: the answer per ``torch.fx.Node`` (target and example values fixed), the first kept;
- ``SIGNATURE_ANSWERS``: per FX graph, the successful runs of a thunder symbol keyed by what the
  run depends on (``metatrace.thunderfx_checks``: the symbol, the proxies' shapes, dtypes and
  devices, the constant arguments, whether grad is required), so a model's repeated layers and
  repeated ops ask thunder once per distinct signature.

Both are weakly keyed (by the node, by its graph): an entry goes with what it answers for, and
holds the thunder options (compared by identity) as long.
"""

from __future__ import annotations

import weakref

# torch.fx.Node -> (thunder's options it was asked with, (supported, split reason))
SUPPORT = weakref.WeakKeyDictionary()

# torch.fx.Graph -> {signature: (thunder's options, the thunder symbol run)}: successes only
SIGNATURE_ANSWERS = weakref.WeakKeyDictionary()
