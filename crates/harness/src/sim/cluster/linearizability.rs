//! A linearizability check of the simulated client's key-value history (LOG-7), in the
//! manner of Wing and Gong's search as Lowe and Porcupine refine it.
//!
//! Each key is a register: writes put a unique value, reads return the value they saw (0 for
//! none yet). Every operation has the virtual time the client invoked it and, when it got an
//! answer, the time it did. The history is linearizable when each key's operations can be put
//! in one order that respects real time (an operation answered before another was invoked
//! comes first) in which every read returns the latest write before it. Keys are checked
//! apart: linearizability is local (Herlihy and Wing), so a history is linearizable when each
//! key's is. A write never answered (its client gave up, its node crashed) may have taken
//! effect at any time after its invocation, or never; a read never answered says nothing and
//! is left out.
//!
//! The search tries, at each step, every operation that may come next — one invoked before
//! the earliest answer among those not yet placed — and remembers every (placed set, value)
//! pair it has seen fail, so that a history of a few dozen overlapping operations per key is
//! checked in moments. A read of the current value that may come next is placed at once (a
//! read changes nothing, so no order needs it later), which keeps reads that waited together
//! from multiplying the orders tried. A key the search cannot decide within its step budget
//! is reported as a failure rather than searched for hours.

use std::collections::{BTreeMap, HashSet};

use conclave_core::Instant;

/// Operations a failure report lists at most.
const SHOWN: usize = 24;

/// Steps the search of one key may take before it gives up: a history it cannot decide in
/// this many is reported as a failure (naming the seed), never left to run for hours.
const SEARCH_BUDGET: u64 = 2_000_000;

/// One client operation on a register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Operation {
    /// The register.
    pub(super) key: u8,
    /// What it did.
    pub(super) kind: OperationKind,
    /// When the client invoked it.
    pub(super) invoked: Instant,
    /// When the client got its answer; `None` when it never did.
    pub(super) answered: Option<Instant>,
}

/// A write of a value, or a read and what it returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OperationKind {
    /// Put this value.
    Write(u64),
    /// Returned this value (once answered).
    Read(Option<u64>),
}

/// Checks `history`; the first key whose operations cannot be linearized, with a description.
pub(super) fn check(history: &[Operation]) -> Result<(), String> {
    // A write never answered and never read changes nothing anyone saw: whether it happened
    // cannot matter, and leaving it out keeps the search from trying every place for it.
    let seen: HashSet<(u8, u64)> = history
        .iter()
        .filter(|op| op.answered.is_some())
        .filter_map(|op| match op.kind {
            OperationKind::Read(Some(value)) => Some((op.key, value)),
            _ => None,
        })
        .collect();
    let mut by_key: BTreeMap<u8, Vec<&Operation>> = BTreeMap::new();
    for operation in history {
        let useful = match operation.kind {
            OperationKind::Write(value) => {
                operation.answered.is_some() || seen.contains(&(operation.key, value))
            }
            OperationKind::Read(result) => result.is_some() && operation.answered.is_some(),
        };
        if useful {
            by_key.entry(operation.key).or_default().push(operation);
        }
    }
    for (key, operations) in by_key {
        let mut budget = SEARCH_BUDGET;
        let found = linearizable(&operations, &mut budget);
        if budget == 0 {
            return Err(format!(
                "key {key}: {} operations, undecided after {SEARCH_BUDGET} steps of the search",
                operations.len()
            ));
        }
        if !found {
            // The operations around the trouble are enough to read; the whole history can be
            // hundreds long.
            let shown: Vec<String> = operations
                .iter()
                .take(SHOWN)
                .map(|op| {
                    format!(
                        "{:?} [{} .. {}]",
                        op.kind,
                        op.invoked,
                        op.answered
                            .map_or_else(|| "none".to_owned(), |at| at.to_string())
                    )
                })
                .collect();
            let more = operations.len().saturating_sub(SHOWN);
            return Err(format!(
                "key {key}: no order of its {} operations respects real time and the register: \
                 {}{}",
                operations.len(),
                shown.join("; "),
                if more > 0 {
                    format!("; and {more} more")
                } else {
                    String::new()
                }
            ));
        }
    }
    Ok(())
}

/// Whether one register's operations can be linearized.
/// Whether one register's operations can be linearized; `budget` counts the search's steps
/// down, and is 0 when it ran out (the answer is then meaningless).
fn linearizable(operations: &[&Operation], budget: &mut u64) -> bool {
    let count = operations.len();
    let words = count.div_ceil(64);
    let mut placed = vec![0u64; words];
    let mut failed: HashSet<(Vec<u64>, u64)> = HashSet::new();
    search(operations, &mut placed, 0, &mut failed, budget)
}

fn is_placed(placed: &[u64], index: usize) -> bool {
    placed[index / 64] & (1 << (index % 64)) != 0
}

fn flip(placed: &mut [u64], index: usize) {
    placed[index / 64] ^= 1 << (index % 64);
}

/// Depth-first: places one more operation in every way the real-time order allows.
fn search(
    operations: &[&Operation],
    placed: &mut Vec<u64>,
    value: u64,
    failed: &mut HashSet<(Vec<u64>, u64)>,
    budget: &mut u64,
) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    // Done when every answered operation is placed (unanswered writes may never have happened).
    let pending_answered = operations
        .iter()
        .enumerate()
        .any(|(i, op)| !is_placed(placed, i) && op.answered.is_some());
    if !pending_answered {
        return true;
    }
    if failed.contains(&(placed.clone(), value)) {
        return false;
    }
    // Only an operation invoked before every unplaced operation's answer may come next.
    let horizon = operations
        .iter()
        .enumerate()
        .filter(|(i, _)| !is_placed(placed, *i))
        .filter_map(|(_, op)| op.answered)
        .min();
    // A read that may come next and returns the current value is placed at once, without
    // trying the other orders: it changes no value, and taking it out of the unplaced set only
    // widens what may follow, so if any order works, one with this read next does too. Without
    // this, reads that waited together (a read index taken before a stall of the log) make the
    // search try every order of the writes around them.
    let ready_read = operations.iter().enumerate().position(|(i, op)| {
        !is_placed(placed, i)
            && horizon.is_none_or(|horizon| op.invoked <= horizon)
            && op.kind == OperationKind::Read(Some(value))
    });
    if let Some(i) = ready_read {
        flip(placed, i);
        let found = search(operations, placed, value, failed, budget);
        flip(placed, i);
        if !found {
            failed.insert((placed.clone(), value));
        }
        return found;
    }
    for (i, op) in operations.iter().enumerate() {
        if is_placed(placed, i) || horizon.is_some_and(|horizon| op.invoked > horizon) {
            continue;
        }
        let next = match op.kind {
            OperationKind::Write(written) => written,
            OperationKind::Read(Some(seen)) if seen == value => value,
            OperationKind::Read(_) => continue,
        };
        flip(placed, i);
        if search(operations, placed, next, failed, budget) {
            return true;
        }
        flip(placed, i);
    }
    failed.insert((placed.clone(), value));
    false
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn op(kind: OperationKind, invoked: u64, answered: Option<u64>) -> Operation {
        Operation {
            key: 0,
            kind,
            invoked: at(invoked),
            answered: answered.map(at),
        }
    }

    /// Overlapping operations may be ordered either way; a read after a write's answer must see
    /// it or a later write.
    #[test]
    fn real_time_order_is_required_and_overlap_is_free() {
        let fine = [
            op(OperationKind::Write(1), 0, Some(10)),
            op(OperationKind::Write(2), 5, Some(15)),
            op(OperationKind::Read(Some(1)), 12, Some(20)),
        ];
        assert!(check(&fine).is_ok());
        let stale = [
            op(OperationKind::Write(1), 0, Some(10)),
            op(OperationKind::Write(2), 11, Some(15)),
            op(OperationKind::Read(Some(1)), 16, Some(20)),
        ];
        assert!(check(&stale).is_err());
    }

    /// Reads that waited together through a stall of the log (a read index taken before it)
    /// all return the value from before the writes that overlap them: the search places them
    /// at once instead of trying every order of those writes, and decides well within its
    /// budget.
    #[test]
    fn reads_waiting_through_a_stall_are_decided_within_the_budget() {
        let mut history = vec![op(OperationKind::Write(1), 0, Some(5))];
        for n in 0..24 {
            history.push(op(OperationKind::Write(100 + n), 10 + n, Some(200)));
            history.push(op(OperationKind::Read(Some(1)), 10 + n, Some(100)));
        }
        assert_eq!(check(&history), Ok(()));
    }

    /// A write never answered may or may not have happened, but a read cannot see a value
    /// nobody wrote.
    #[test]
    fn unanswered_writes_are_optional_and_values_must_come_from_writes() {
        let maybe = [
            op(OperationKind::Write(1), 0, Some(10)),
            op(OperationKind::Write(2), 11, None),
            op(OperationKind::Read(Some(1)), 20, Some(25)),
            op(OperationKind::Read(Some(2)), 30, Some(35)),
        ];
        assert!(check(&maybe).is_ok());
        let invented = [
            op(OperationKind::Write(1), 0, Some(10)),
            op(OperationKind::Read(Some(7)), 20, Some(25)),
        ];
        assert!(check(&invented).is_err());
        // Once a later read saw 1 again after 2, 2 cannot have come before both.
        let flapping = [
            op(OperationKind::Write(1), 0, Some(10)),
            op(OperationKind::Write(2), 11, None),
            op(OperationKind::Read(Some(2)), 20, Some(25)),
            op(OperationKind::Read(Some(1)), 30, Some(35)),
        ];
        assert!(check(&flapping).is_err());
    }
}
