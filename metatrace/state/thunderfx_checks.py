"""ThunderFX's answer per FX node to "can thunder run this node?", weakly keyed by the node.

thunder's splitter asks it for every node several times while ``fx.split_module`` places the
node (its regions for grad and autocast), and each answer runs the node's meta and, for a node
that requires grad, its vjp: ~3 s per Dynamo graph of a small HF Llama. The answer depends on
the node only (its target and example values); ``metatrace.thunderfx`` keeps the first.
"""

from __future__ import annotations

import weakref

# torch.fx.Node -> (thunder's options it was asked with, (supported, split reason)); an entry goes
# with its node, and holds the options (compared by identity) as long
SUPPORT = weakref.WeakKeyDictionary()
