//! The deterministic cluster simulator.
