//! Reading a machine's inventory ([`irqpilot_core::Machine`]) from a root directory.
