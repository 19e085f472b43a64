//! Membership (MEM-1..5): to be written.
