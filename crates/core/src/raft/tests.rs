//! Unit tests of the election state machine.
