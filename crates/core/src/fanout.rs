//! Fan-out queues (MEM-5): to be written.
