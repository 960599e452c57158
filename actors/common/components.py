"""One shape for every role: a protocol core, components attached one way, one timer form.

- **The core** is the role's actor: the paper's handlers, in the order the paper gives them, and the state
  the paper names. It declares ``CORE``, the list of its attributes and methods its components may use
  besides the actor's own (``ACTOR``: the clock, sending, timers), and no more: each name is one a
  component uses (checked too).
- **A component** is what a run or a fault story adds (recovery, fairness, gangs, a standby): an object the
  core builds in its ``__init__`` (None when the run does not use it). It holds the core as ``self.core``
  and reaches it only through ``CORE`` (``tests/test_role_shape.py`` checks the source). Its state is its
  own: the core calls its methods and may read it, never writes it.
- **Attached one way**: each message a component handles is a line in the core, ``on_X = routed("recovery",
  "on_x")``; so is each of its timers, and the core's reaction to a broken connection calls the
  components' ``broken`` in a fixed order. (The shared recovery parts a component holds, ``Retries`` and
  ``Suspects`` of ``common.recovery``, keep their own ``recover`` registration: they are tools, not roles.)
- **One timer form**: a component's timer is the role's timer message ``(what, key, nonce)``, routed by
  ``what`` (``routed_timer``). The component keeps the nonce of the one timer it wants for each key (or,
  as the LM's heartbeat tick and rebuild do, the time it is due) and drops any other when it fires: a
  chain of retries that was superseded or ended stops at its next timer.
"""

from __future__ import annotations

ACTOR = frozenset({"arrived", "charge", "fabric", "id", "incarnation", "name", "now", "rng", "send",
                   "set_timer"})  # what every actor offers (fabric.actor.Actor) and a component may use


def routed(component: str, method: str, timer: bool = False):
    """A core's handler that hands its message to one of its components (``component`` names the attribute);
    ``timer``: the method takes the message alone."""
    if timer:
        def handler(self, msg, src):
            getattr(getattr(self, component), method)(msg)
    else:
        def handler(self, msg, src):
            getattr(getattr(self, component), method)(msg, src)
    handler.__doc__ = f"Handled by the {component} component ({method})."
    return handler


def routed_timer(**components: str):
    """A core's handler for its timer message ``(what, key, nonce)``: ``what`` names the component
    (``routed_timer(stop="users", probe="recovery")``), whose ``due(msg)`` takes it."""
    def handler(self, msg, src):
        getattr(self, components[msg.what]).due(msg)
    handler.__doc__ = "A timer, handled by the component its ``what`` names: " + ", ".join(
        f"{what} -> {component}" for what, component in components.items()) + "."
    return handler


__all__ = ["ACTOR", "routed", "routed_timer"]
